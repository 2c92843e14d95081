"""Provides scan_dev(): the Ascend device nodes under /dev, with owner, mode and access."""

from __future__ import annotations

import grp
import os
import pwd
import re
import stat
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Dict, List, Mapping, Optional, Tuple

from npuwatch import chip_families
from npuwatch.probes.sysroot import Sysroot, cannot_read

DEV_DIR = PurePosixPath("/dev")

#: Management nodes an NPU process needs (driver-interfaces.md §1): the chip-family table's,
#: whose rows say which a family has (devmm_svm is absent on 310B/Atlas 200 SoC boards).
MANAGER_NODES = chip_families.MANAGER_NODES

#: Further nodes worth reporting when present (§1): the docker variant of the manager (preferred
#: by MindCluster on 310B), its ``npu_device_cust`` alias, and the scheduler/DVPP nodes.
EXTRA_NODES = ("davinci_manager_docker", "npu_device_cust", "event_sched", "dvpp_cmdlist")

#: What to do when ``/dev`` itself cannot be listed (``DevNodes.unreadable``): ``check`` and the doctor.
UNREADABLE_DEV_HINT = (
    "/dev is normally readable by every user (`ls -ld /dev`: drwxr-xr-x root): check how it is "
    "mounted here (a container's /dev is its runtime's), or run as root"
)

# ``/dev/davinci*`` also matches davinci_manager; Ray's ``davinci?`` misses davinci10–15 on A3.
# MindCluster's DevicePathPattern is ^/dev/davinci\d+$ (driver-interfaces.md §1, "Glob pitfalls").
# ASCII digits only: Python's \d would also accept "davinci٣".
_DAVINCI = re.compile(r"^davinci([0-9]{1,9})$")
_VDAVINCI = re.compile(r"^vdavinci([0-9]{1,9})$")


@dataclass(frozen=True)
class DevNode:
    """One device node: what it is, who owns it, and whether this user can open it."""

    name: str  # "davinci3"
    path: str  # the machine path, "/dev/davinci3"
    is_char_device: bool
    usable: bool  # a char device (or, in a simulated tree, a regular file)
    uid: Optional[int] = None
    gid: Optional[int] = None
    owner: Optional[str] = None  # None when the UID has no name on this machine
    group: Optional[str] = None
    mode: Optional[int] = None  # permission bits, e.g. 0o660
    can_read_write: bool = False  # os.access(R_OK | W_OK) for the current user
    problem: Optional[str] = None  # why the node is not usable ("is a directory" …)

    @property
    def mode_text(self) -> Optional[str]:
        """The permission bits as ``ls``-style octal digits (``660``)."""
        return None if self.mode is None else format(self.mode, "03o")


@dataclass(frozen=True)
class DevNodes:
    """The Ascend part of ``/dev``: chip nodes by physical ID, manager nodes, and their access."""

    davinci_ids: Tuple[int, ...] = ()  # /dev/davinciN: N is the chip's physical ID (§1)
    vdavinci_ids: Tuple[int, ...] = ()  # vNPU nodes, IDs from 100
    nodes: Mapping[str, DevNode] = field(default_factory=dict)  # every node found, by name
    reason: Optional[str] = None  # why nothing could be listed (no /dev, cannot read /dev), else None
    #: ``/dev`` is there but this user may not list it: ``reason`` says ``cannot read /dev as …``.
    unreadable: bool = False

    def node(self, name: str) -> Optional[DevNode]:
        """The node called ``name`` (``davinci3``, ``davinci_manager``), if present."""
        return self.nodes.get(name)

    def has(self, name: str) -> bool:
        """Whether ``/dev/<name>`` is present and usable."""
        found = self.nodes.get(name)
        return found is not None and found.usable

    @property
    def has_davinci_manager(self) -> bool:
        """Whether ``/dev/davinci_manager`` (the DCMI/npu-smi endpoint) is present."""
        return self.has("davinci_manager")

    @property
    def has_devmm_svm(self) -> bool:
        """Whether ``/dev/devmm_svm`` (shared virtual memory) is present."""
        return self.has("devmm_svm")

    @property
    def has_hisi_hdc(self) -> bool:
        """Whether ``/dev/hisi_hdc`` (the host–device channel) is present."""
        return self.has("hisi_hdc")

    @property
    def has_davinci_manager_docker(self) -> bool:
        """Whether ``/dev/davinci_manager_docker`` is present."""
        return self.has("davinci_manager_docker")

    @property
    def missing_managers(self) -> Tuple[str, ...]:
        """The names in ``MANAGER_NODES`` that are absent or unusable."""
        return tuple(name for name in MANAGER_NODES if not self.has(name))

    @property
    def inaccessible(self) -> Tuple[DevNode, ...]:
        """Usable nodes the current user cannot open read-write (needs root or HwHiAiUser)."""
        return tuple(n for n in self.nodes.values() if n.usable and not n.can_read_write)


def scan_dev(sysroot: Sysroot) -> DevNodes:
    """List the Ascend nodes under ``<root>/dev``; never raises on a broken or partial /dev."""
    if not sysroot.exists(DEV_DIR):
        return DevNodes(reason=f"{DEV_DIR} is missing")
    names = _names(sysroot)
    try:
        entries = sysroot.entries(DEV_DIR)
    except PermissionError:  # there, but not ours to list: never "missing"
        uid = os.getuid()
        return DevNodes(reason=cannot_read(DEV_DIR, names.user(uid) or f"uid {uid}"), unreadable=True)
    except OSError as error:
        return DevNodes(reason=f"{DEV_DIR} cannot be listed: {error.strerror or error}")
    nodes: Dict[str, DevNode] = {}
    davinci: List[int] = []
    vdavinci: List[int] = []
    for name in entries:
        chip = _DAVINCI.match(name)
        virtual = _VDAVINCI.match(name)
        if not (chip or virtual or name in MANAGER_NODES or name in EXTRA_NODES):
            continue
        node = _stat_node(sysroot, name, names)
        nodes[name] = node
        if node.usable and chip:
            davinci.append(int(chip.group(1)))
        elif node.usable and virtual:
            vdavinci.append(int(virtual.group(1)))
    return DevNodes(
        davinci_ids=tuple(sorted(davinci)),
        vdavinci_ids=tuple(sorted(vdavinci)),
        nodes=nodes,
    )


def _stat_node(sysroot: Sysroot, name: str, names: _NameBook) -> DevNode:
    machine_path = DEV_DIR / name
    real = sysroot.path(machine_path)
    try:
        info = os.stat(real)  # follows links: some runtimes mount nodes as symlinks
    except OSError as error:
        return DevNode(
            name=name,
            path=str(machine_path),
            is_char_device=False,
            usable=False,
            problem=f"cannot stat: {error.strerror or error}",
        )
    is_char = stat.S_ISCHR(info.st_mode)
    # mknod needs root, so simulated trees hold regular files (driver-interfaces.md §9.2(a)); on
    # the live machine only a char device will do — docker creates a *directory* when asked to
    # bind-mount a device path that does not exist on the host.
    usable = is_char or (not sysroot.is_live and stat.S_ISREG(info.st_mode))
    problem = None if usable else f"is {_kind(info.st_mode)}, not a character device"
    return DevNode(
        name=name,
        path=str(machine_path),
        is_char_device=is_char,
        usable=usable,
        uid=info.st_uid,
        gid=info.st_gid,
        owner=names.user(info.st_uid),
        group=names.group(info.st_gid),
        mode=stat.S_IMODE(info.st_mode),
        can_read_write=os.access(real, os.R_OK | os.W_OK),
        problem=problem,
    )


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISREG(mode):
        return "a regular file"
    if stat.S_ISBLK(mode):
        return "a block device"
    return "not a device"


class _NameBook:
    """UID/GID → name: a tree's own /etc/passwd and /etc/group alone (a UID it does not name has
    no name there, whatever this host calls it); the live machine's user database."""

    def __init__(self, users: Mapping[int, str], groups: Mapping[int, str], live: bool) -> None:
        self._users = users
        self._groups = groups
        self._live = live

    def user(self, uid: int) -> Optional[str]:
        if uid in self._users or not self._live:
            return self._users.get(uid)
        try:
            return pwd.getpwuid(uid).pw_name
        except (KeyError, OverflowError):
            return None

    def group(self, gid: int) -> Optional[str]:
        if gid in self._groups or not self._live:
            return self._groups.get(gid)
        try:
            return grp.getgrgid(gid).gr_name
        except (KeyError, OverflowError):
            return None


def _names(sysroot: Sysroot) -> _NameBook:
    # On the live machine pwd/grp already see NSS (LDAP, sssd); a tree is another machine, whose
    # own account files win where it has them.
    if sysroot.is_live:
        return _NameBook({}, {}, live=True)
    return _NameBook(
        _parse_id_file(sysroot.read_text("/etc/passwd")),
        _parse_id_file(sysroot.read_text("/etc/group")),
        live=False,
    )


def _parse_id_file(text: Optional[str]) -> Dict[int, str]:
    """``name:x:ID:…`` lines (passwd and group share the first three fields) → {ID: name}."""
    table: Dict[int, str] = {}
    for line in (text or "").splitlines():
        fields = line.split(":")
        if len(fields) >= 3 and fields[0] and fields[2].isascii() and fields[2].isdigit():
            table.setdefault(int(fields[2][:10]), fields[0])
    return table
