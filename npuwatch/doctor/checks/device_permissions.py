"""Check device-permissions: the current user can open the NPU device nodes read-write."""

from __future__ import annotations

import grp
from typing import List, Optional, Sequence

from npuwatch.doctor import facts
from npuwatch.doctor.facts import DRIVER_GROUP, UserIdentity, may_open
from npuwatch.doctor.machine import Machine
from npuwatch.doctor.result import Check, Finding, Group, Problem, Status, combine, passed
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
    """Try each present node as the current user; root always passes.  In a container, also the
    user's ``/etc/passwd`` entry and the image's ``HwHiAiUser`` against the nodes' owner."""
    user = facts.machine_user(machine)
    nodes = [node for node in machine.dev().nodes.values() if node.usable]
    who = f"{user.name} (uid {user.uid})" if user.name else f"uid {user.uid}"
    details = [_node_line(node) for node in nodes]
    in_container = machine.container().in_container
    problems: List[Problem] = []
    if in_container and not user.is_root and user.name is None:
        problems.append(_no_passwd_entry(machine, user))
    if user.is_root:
        return passed("running as root: every device node can be opened", details)
    denied = [node for node in nodes if not may_open(node, user)]
    if denied:
        names = ", ".join(node.path for node in denied[:6]) + (" …" if len(denied) > 6 else "")
        summary = f"{who} cannot open {len(denied)} of {len(nodes)} device nodes: {names}"
        other = _image_driver_user(machine, denied) if in_container else None
        if other is not None:
            summary += f" ({other})"
        problems.insert(0, Problem(Status.FAIL, summary, _hint(machine, user, denied)))
        details.append(f"{who} is in groups {sorted(user.gids)}")
    return combine(problems, f"{who} can open all {len(nodes)} device nodes", details)


def _no_passwd_entry(machine: Machine, user: UserIdentity) -> Problem:
    """Issue 29 item 5: a container user the image's /etc/passwd does not name (``docker run
    --user 1000`` on an image without that user): HCCL's start-up fails for TP > 1."""
    gid = machine.group_id(DRIVER_GROUP)
    group = f"-g {DRIVER_GROUP} " if gid is not None else ""
    return Problem(
        Status.WARN,
        f"uid {user.uid} has no entry in this container's /etc/passwd: multi-chip jobs (HCCL, "
        "tensor parallel > 1) fail to start without a user name and home",
        f"add the user to the image (Dockerfile `RUN useradd -u {user.uid} {group}-m npuuser`), or run "
        "the container as a user the image has (`docker run --user <name>`)",
    )


def _image_driver_user(machine: Machine, denied: Sequence[DevNode]) -> Optional[str]:
    """How the image's ``HwHiAiUser`` differs from the nodes' owner (the host's driver user), or
    ``None`` when the image has none or it owns the nodes."""
    gid = machine.group_id(DRIVER_GROUP)
    node_gid = next((node.gid for node in denied if node.gid is not None), None)
    if gid is None or node_gid is None or node_gid == gid:
        return None
    return (
        f"this image's {DRIVER_GROUP} is gid {gid}, but the nodes belong to gid {node_gid}, "
        "the host's driver group"
    )


def _hint(machine: Machine, user: UserIdentity, denied: Sequence[DevNode]) -> str:
    gid = next((node.gid for node in denied if node.gid is not None), None)
    named = next((node.group for node in denied if node.group), None)
    if machine.container().in_container:
        # A tree names the nodes' group from its own /etc/group: an image may not know the host's.
        group = f"group {named} (gid {gid})" if named else f"gid {gid}"
        return (
            f"the nodes belong to {group} and mode 0660: run the container as a user "
            f"in that group (`docker run --user $(id -u):$(id -g) --group-add {gid}`), or as root; or "
            "install the host driver with `--install-for-all` so every user may open them"
        )
    group = named or DRIVER_GROUP
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
