"""Check device-permissions: the current user can open the NPU device nodes read-write."""

from __future__ import annotations

import grp
from typing import List, Optional, Sequence

from npuwatch.doctor import facts
from npuwatch.doctor.facts import DRIVER_GROUP, UserIdentity, may_open
from npuwatch.doctor.machine import Machine
from npuwatch.doctor.result import Check, Finding, Group, failed, passed
from npuwatch.probes.devices import DevNode


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
    user = facts.machine_user(machine)
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
