"""Provides the machine facts several doctor checks share, so that no check imports another.

- **CANN**: the home in use (``active_home``) and its version, toolkit info, architecture and
  ``set_env.sh``; how CANN/HDK versions compare (runtime-and-doctor.md §6.2–6.3:
  ``ascend-toolkit/latest`` up to 8.3, ``cann`` from 8.5, root or ``$HOME/Ascend``).
- **The user** the doctor runs as (``current_user``, ``machine_user``: tests replace
  ``current_user`` to act as another user) and whether they may open a device node.
- **Devices**: each chip's ``/dev/davinciN`` (``physical_ids``), the manager nodes the chips'
  families need (``required_manager_nodes``) and the ``docker run --device`` flags that mount nodes.
- **Trust**: the skip of a check that would run an untrusted ``--root`` tree's code (``not_trusted``).

The visible-devices variables are read by ``npuwatch.probes.visible_devices``.
"""

from __future__ import annotations

import os
import pwd
import re
import time
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import Dict, FrozenSet, List, Optional, Sequence, Tuple

from npuwatch.chip_families import family_of, required_device_nodes
from npuwatch.doctor.machine import Machine
from npuwatch.doctor.result import Finding, skipped
from npuwatch.probes.devices import DevNode, DevNodes
from npuwatch.probes.install_files import ToolkitInstallInfo, parse_toolkit_install_info, read_cann_version
from npuwatch.probes.tree_trust import TRUST_HINT

DOWNLOAD_PAGE = "https://www.hiascend.com/developer/download/community/result?module=cann"

VersionKey = Tuple[Tuple[int, int], ...]

# ---------------------------------------------------------------- CANN


def version_key(version: str) -> VersionKey:
    """A sortable key: ``8.0.RC2`` < ``8.0.0`` < ``8.1.RC1``; ``25.0.rc1.1`` < ``25.0.0``.

    A number is a release component; ``RCn`` (and ``alpha``/``beta``/``Tn`` builds) sort before
    the final release of the same line, as Huawei publishes them.
    """
    key: List[Tuple[int, int]] = []
    for part in re.split(r"[.\-_]", version.strip().lower()):
        if part.isdigit():
            key.append((1, int(part)))
        elif part:
            digits = re.sub(r"\D", "", part)
            key.append((0, int(digits) if digits else 0))
    return tuple(key)


def version_matches(version: str, prefix: str) -> bool:
    """Whether ``version`` is in the line ``prefix``: ``25.0.rc1.1`` is in ``25.0`` and ``25.0.RC1``."""
    have, want = _components(version), _components(prefix)
    return have[: len(want)] == want


def same_release(first: str, second: str) -> bool:
    """Whether two CANN-numbered versions are one release (``8.1.RC1`` = ``8.1.rc1``; ``8.0.0`` ≠
    ``8.1.RC1``): their first three components, as NNAL is published per CANN release."""
    return _components(first)[:3] == _components(second)[:3]


def _components(version: str) -> List[str]:
    return [part for part in re.split(r"[.\-_]", version.strip().lower()) if part]


def release(version: str) -> Tuple[int, ...]:
    """``8.1.RC1`` → ``(8, 1)``: the leading numbers only."""
    numbers: List[int] = []
    for part in version.split("."):
        if not part.isdigit():
            break
        numbers.append(int(part))
    return tuple(numbers)


def active_home(machine: Machine) -> Optional[PurePosixPath]:
    """The CANN home in use: ``$ASCEND_HOME_PATH`` when it exists, else the first one found."""
    homes = machine.cann_homes()
    return homes[0] if homes else None


def home_version(machine: Machine, home: PurePosixPath) -> Optional[str]:
    """CANN's version at ``home`` (toolkit install info, version.cfg, runtime/version.info)."""
    return read_cann_version(machine.sysroot, home)


def toolkit_info(machine: Machine, home: PurePosixPath) -> Optional[ToolkitInstallInfo]:
    """``<home>/<arch>-linux/ascend_toolkit_install.info``, or ``None``."""
    for entry in machine.sysroot.listdir(home):
        if entry.endswith("-linux"):
            text = machine.sysroot.read_text(home / entry / "ascend_toolkit_install.info")
            if text is not None:
                return parse_toolkit_install_info(text)
    return None


def cann_arch(machine: Machine, home: PurePosixPath) -> str:
    """``aarch64``/``x86_64`` of the install, or ``$(uname -m)`` for a command to fill in."""
    info = toolkit_info(machine, home)
    if info is not None and info.arch:
        return info.arch
    for entry in machine.sysroot.listdir(home):
        if entry.endswith("-linux"):
            return entry[: -len("-linux")]
    return "$(uname -m)"


def set_env_script(machine: Machine, home: PurePosixPath) -> PurePosixPath:
    """The ``set_env.sh`` to source for ``home``.

    Toolkit layout (≤ 8.3): ``…/ascend-toolkit/set_env.sh`` beside ``latest``; cann layout
    (8.5+): ``<home>/set_env.sh`` (``cann/set_env.sh``).  The first that exists, else the
    documented one for the layout.
    """
    candidates = []
    if home.parent.name == "ascend-toolkit":
        candidates.append(home.parent / "set_env.sh")
    candidates.append(home / "set_env.sh")
    for candidate in candidates:
        if machine.sysroot.exists(candidate):
            return candidate
    return candidates[0]


def display_real(machine: Machine, real: Path) -> str:
    """A real path (from ``sysroot.realpath``) as the machine names it: ``/usr/local/…``."""
    if machine.sysroot.is_live:
        return str(real)
    try:
        return "/" + real.relative_to(machine.sysroot.realpath("/")).as_posix()
    except ValueError:
        return str(real)


def source_advice(script: PurePosixPath) -> str:
    """The exact line, and where to put it so every shell and job gets it."""
    return (
        f"`source {script}` (add it to ~/.bashrc; a container needs the variables it sets as "
        "Dockerfile `ENV` lines or `docker run -e`; a systemd service or Ray/Slurm job needs it "
        f"in its own command: `bash -c 'source {script} && exec …'`)"
    )


# ---------------------------------------------------------------- the driver install

#: The driver installer's log (runtime-and-doctor.md §6.1, install logs).
DRIVER_INSTALL_LOG = PurePosixPath("/var/log/ascend_seclog/ascend_install.log")


def boot_time_s(machine: Machine) -> Optional[float]:
    """When the machine booted (``btime`` of its ``/proc/stat``), or ``None``."""
    text = machine.sysroot.read_text("/proc/stat", limit=256 * 1024) or ""
    found = re.search(r"^btime\s+(\d+)\s*$", text, re.MULTILINE)
    return float(found.group(1)) if found else None


def installed_since_boot(machine: Machine) -> Optional[str]:
    """Why a reboot is due: the driver's install log written after this boot (a driver installed
    or upgraded without the reboot it asks for keeps the old kernel module: DCMI -8005), or ``None``."""
    booted = boot_time_s(machine)
    if booted is None:
        return None
    try:
        written = os.stat(machine.sysroot.path(DRIVER_INSTALL_LOG)).st_mtime
    except OSError:
        return None
    if written <= booted:
        return None
    return f"{DRIVER_INSTALL_LOG} was written at {_utc(written)}, after this boot at {_utc(booted)}"


def reboot_first(machine: Machine, hint: str, details: List[str]) -> str:
    """``hint`` led by "reboot" when the driver was installed after this boot (issue 29: DCMI
    -8005 then wants a reboot, not a reinstall); the evidence joins ``details``."""
    why = installed_since_boot(machine)
    if why is None:
        return hint
    details.append(why)
    return (
        f"reboot: the driver was installed after this boot, so the running kernel module is not the "
        f"installed one; if it persists after the reboot: {hint}"
    )


def _utc(seconds: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(seconds))


# ---------------------------------------------------------------- the user


#: The driver's run user and group (runtime-and-doctor.md §6.5).
DRIVER_GROUP = "HwHiAiUser"


@dataclass(frozen=True)
class UserIdentity:
    """Who the checks run as: effective UID, name and groups."""

    uid: int
    name: Optional[str]
    gids: FrozenSet[int]
    #: True for this process's own identity: ``os.access`` on the nodes then answers for it
    #: (ACLs included); False for another identity, judged by the mode bits.
    process: bool = True

    @property
    def is_root(self) -> bool:
        """UID 0 opens every node whatever its mode."""
        return self.uid == 0


def current_user() -> UserIdentity:
    """This process's effective identity (tests replace this function to act as another user)."""
    uid = os.geteuid()
    try:
        name: Optional[str] = pwd.getpwuid(uid).pw_name
    except (KeyError, OverflowError):
        name = None
    return UserIdentity(uid, name, frozenset({os.getegid(), *os.getgroups()}))


def machine_user(machine: Machine) -> UserIdentity:
    """``current_user()`` named as the machine names its UID (a tree's /etc/passwd, not this host's)."""
    user = current_user()
    name = machine.user_name(user.uid, user.name)
    return user if name == user.name else replace(user, name=name)


def may_open(node: DevNode, user: UserIdentity) -> bool:
    """Whether ``user`` can open ``node`` read-write."""
    if user.is_root:
        return True
    if user.process:
        return node.can_read_write
    if node.mode is None:
        return False
    if node.uid == user.uid:
        bits = node.mode >> 6
    elif node.gid in user.gids:
        bits = node.mode >> 3
    else:
        bits = node.mode
    return bits & 0o6 == 0o6


# ---------------------------------------------------------------- devices


def physical_ids(machine: Machine, dev: DevNodes) -> Dict[Tuple[int, int], int]:
    """(NPU, chip) → /dev/davinciN: the Phy-ID column where printed, else the chips in node order."""
    table = machine.info_table()
    chips = sorted(table.chips, key=lambda c: c.identity.key) if table is not None else []
    printed = {c.identity.key: c.identity.phy_id for c in chips if c.identity.phy_id is not None}
    if chips and len(printed) == len(chips):
        return printed
    if len(chips) == len(dev.davinci_ids):
        return {c.identity.key: phy for c, phy in zip(chips, dev.davinci_ids)}
    return {}


def required_manager_nodes(machine: Machine) -> Tuple[str, ...]:
    """The manager nodes this machine needs, by the families of its PCI functions (the family
    table: a 310B SoC board has no devmm_svm); with no PCI function (an SoC board in RC mode),
    those every family needs."""
    return required_device_nodes(family_of(device_id=f.device_id) for f in machine.pci().functions)


def device_flags(names: Sequence[str]) -> str:
    """``--device /dev/a --device /dev/b`` for ``docker run``."""
    return " ".join(f"--device /dev/{name}" for name in names)


# ---------------------------------------------------------------- trust


def not_trusted(machine: Machine, what: str, details: Sequence[str] = ()) -> Optional[Finding]:
    """A skip saying ``what`` (the tree's code a check would run: ``loading libdcmi.so``) was not
    done because the ``--root`` tree is not trusted, naming ``--trust-root`` (a skip has no hint:
    its details say how); ``None`` when the machine's code may run (``Machine.runs_tree_code``)."""
    if machine.runs_tree_code:
        return None
    return skipped(f"{what}: skipped, the tree is not trusted (--trust-root)", [*details, TRUST_HINT])
