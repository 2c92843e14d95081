"""Check device-permissions: the current user can open the NPU device nodes read-write."""

from __future__ import annotations

import grp
import os
import pwd
from dataclasses import dataclass, replace
from typing import FrozenSet, List, Optional, Sequence

from npuwatch.doctor.machine import Machine
from npuwatch.doctor.result import Check, Finding, Group, failed, passed
from npuwatch.probes.devices import DevNode

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


def _group_members(machine: Machine, group: str) -> Optional[Sequence[str]]:
    """The members /etc/group lists for ``group`` (``None`` when it has no line)."""
    text = machine.sysroot.read_text("/etc/group")
    for line in (text or "").splitlines():
        fields = line.split(":")
        if len(fields) >= 4 and fields[0] == group:
            return [member for member in fields[3].split(",") if member]
    if machine.sysroot.is_live:
        try:
            return list(grp.getgrnam(group).gr_mem)
        except KeyError:
            return None
    return None


def _node_line(node: DevNode) -> str:
    owner = node.owner if node.owner is not None else str(node.uid)
    group = node.group if node.group is not None else str(node.gid)
    return f"{node.path} {owner}:{group} mode {node.mode_text}"


def run(machine: Machine) -> Finding:
    """Try each present node as the current user; root always passes."""
    user = machine_user(machine)
    nodes = [node for node in machine.dev().nodes.values() if node.usable]
    who = f"{user.name or 'uid ' + str(user.uid)} (uid {user.uid})"
    details = [_node_line(node) for node in nodes]
    if user.is_root:
        return passed("running as root: every device node can be opened", details)
    denied = [node for node in nodes if not may_open(node, user)]
    if not denied:
        return passed(f"{who} can open all {len(nodes)} device nodes", details)
    names = ", ".join(node.path for node in denied[:6]) + (" …" if len(denied) > 6 else "")
    summary = f"{who} cannot open {len(denied)} of {len(nodes)} device nodes: {names}"
    return failed(
        summary, _hint(machine, user, denied), [*details, f"{who} is in groups {sorted(user.gids)}"]
    )


def _hint(machine: Machine, user: UserIdentity, denied: Sequence[DevNode]) -> str:
    group = next((node.group for node in denied if node.group), None) or DRIVER_GROUP
    gid = next((node.gid for node in denied if node.gid is not None), None)
    if machine.container().in_container:
        return (
            f"the nodes belong to group {group} (gid {gid}) and mode 0660: run the container as a user "
            f"in that group (`docker run --user $(id -u):$(id -g) --group-add {gid}`), or as root; or "
            "install the host driver with `--install-for-all` so every user may open them"
        )
    members = _group_members(machine, group)
    parts: List[str] = []
    if user.name and members is not None and user.name in members:
        parts.append(
            f"{user.name} joined {group} after this login: log out and in again (or run `newgrp {group}`)"
        )
    else:
        parts.append(
            f"add the user to the group: `sudo usermod -aG {group} $USER`, then log out and in again"
        )
    parts.append("or reinstall the driver with `--install-for-all` so every user may open the nodes")
    return "; ".join(parts)


CHECK = Check(
    id="device-permissions",
    group=Group.DRIVER,
    title="the current user can open the NPU device nodes",
    run=run,
    requires=("device-nodes",),
)
