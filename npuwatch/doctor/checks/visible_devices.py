"""Provides the visible-devices check: the device-selection variables against the chips present."""

from __future__ import annotations

import re
from typing import Iterable, List, Optional, Sequence, Tuple

from npuwatch.doctor.machine import Machine
from npuwatch.doctor.result import Check, Finding, Group, Problem, Status, combine, passed
from npuwatch.probes.visible_devices import (
    DEVICE_ID,
    DOCKER_VISIBLE,
    RT_VISIBLE,
    parse_docker_visible,
    parse_rt_visible,
)

_MAPPING_LINES = 16


def _ids(ids: Iterable[int]) -> str:
    return ",".join(str(n) for n in ids)


def _count(count: int) -> str:
    return f"{count} device" if count == 1 else f"{count} devices"


def _indices(count: int) -> str:
    return "only 0" if count == 1 else f"0-{count - 1}"


def _span(count: int) -> str:
    return "logical ID 0" if count == 1 else f"logical IDs 0-{count - 1}"


def _shown(name: str, value: str) -> str:
    """``NAME=0,1``, quoted when the value holds anything else (``NAME="1, 2"``)."""
    return f"{name}={value}" if re.fullmatch(r"[0-9,-]+", value) else f'{name}="{value}"'


class _Devices:
    """The chips this process can see: logical ID n is the n-th node of ``/dev``."""

    def __init__(self, nodes: Sequence[str], physical: Sequence[int], in_container: bool) -> None:
        self.nodes = tuple(nodes)  # "/dev/davinci4", in logical order
        self.physical = tuple(physical)  # 4: the N of /dev/davinciN
        self.in_container = in_container

    @property
    def count(self) -> int:
        return len(self.nodes)

    @property
    def all_ids(self) -> str:
        return _ids(range(self.count))

    def logical(self, number: int) -> Optional[int]:
        """The logical ID of ``number`` read as a physical ID (a /dev/davinciN node), if any."""
        return self.physical.index(number) if number in self.physical else None

    def correct(self, intended: Sequence[int]) -> Tuple[int, ...]:
        """Logical IDs the user most likely meant: physical IDs mapped, the rest in range."""
        fixed: List[int] = []
        for number in intended:
            if number >= self.count:
                mapped = self.logical(number)
                if mapped is None:
                    continue
                number = mapped
            if number not in fixed:
                fixed.append(number)
        return tuple(sorted(fixed)) or tuple(range(self.count))


def _rt_issues(value: str, devices: _Devices) -> Tuple[List[Problem], Tuple[int, ...]]:
    """Problems of ASCEND_RT_VISIBLE_DEVICES, and the logical IDs the runtime ends up with."""
    shown = _shown(RT_VISIBLE, value)
    parsed = parse_rt_visible(value)
    fix = f"export {RT_VISIBLE}={_ids(devices.correct(parsed.intended))}"
    if not value.strip():
        return [
            Problem(
                Status.FAIL,
                f"{RT_VISIBLE} is set but empty: every device is hidden (torch.npu.is_available() is False)",
                f"`unset {RT_VISIBLE}` to see all {devices.count} devices, or "
                f"`export {RT_VISIBLE}={devices.all_ids}`; under Ray or another launcher, have it assign "
                'NPUs to this worker (Ray: `resources={"NPU": 1}`)',
            )
        ], ()
    issues: List[Problem] = []
    effective: List[int] = []
    out_of_range = [n for n in parsed.read if n >= devices.count]
    for number in parsed.read:  # reading also stops at the first invalid or non-ascending ID
        if number >= devices.count or (effective and number <= effective[-1]):
            break
        effective.append(number)
    if out_of_range:
        summary = (
            f"{shown} names device {out_of_range[0]}, but only {_count(devices.count)} "
            f"{'is' if devices.count == 1 else 'are'} visible here ({_span(devices.count)}): "
            f"EE1001 'input data rang[0-{devices.count})' / 207004"
        )
        mapped = devices.logical(out_of_range[0])
        if mapped is not None:
            where = "in this container" if devices.in_container else "here"
            summary += f"; {devices.nodes[mapped]} is logical device {mapped} {where}"
        issues.append(Problem(Status.FAIL, summary, f"`{fix}`"))
    if not parsed.read:
        issues.append(
            Problem(
                Status.FAIL,
                f"{shown} has no device ID before its first invalid character: every device is hidden",
                f"`{fix}`",
            )
        )
    elif parsed.drops_devices:
        dropped = _ids(parsed.intended[len(parsed.read) :])
        issues.append(
            Problem(
                Status.WARN,
                f"{shown}: the runtime stops reading at {parsed.stop!r}, so {dropped} "
                f"{'are' if ',' in dropped else 'is'} silently dropped (it reads only {_ids(parsed.read)})",
                f"`{fix}` (IDs separated by commas only)",
            )
        )
    if len(set(parsed.read)) != len(parsed.read) or list(parsed.read) != sorted(parsed.read):
        issues.append(
            Problem(
                Status.WARN,
                f"{shown} is not ascending and unique: the runtime reads only {_ids(effective) or 'none'}",
                f"`{fix}`",
            )
        )
    return issues, tuple(effective)


def _docker_issues(value: str, devices: _Devices, rt_set: bool, vnpu: bool) -> List[Problem]:
    shown = _shown(DOCKER_VISIBLE, value)
    ids, bad = parse_docker_visible(value)
    issues: List[Problem] = []
    if bad:
        issues.append(
            Problem(
                Status.WARN,
                f"{shown} has items the Ascend Docker Runtime cannot read: {', '.join(repr(b) for b in bad)}",
                f"use physical IDs and ranges only, e.g. `-e {DOCKER_VISIBLE}=0-2,4` at `docker run`",
            )
        )
    if devices.in_container:
        absent = [n for n in ids if n not in devices.physical]
        extra = [n for n in devices.physical if n not in ids]
        if ids and not absent and extra and not rt_set and not vnpu:
            issues.append(_not_applied(shown, ids, extra, devices))
        if absent and not vnpu:  # vNPU containers get /dev/vdavinciN nodes instead
            nodes = " ".join(f"--device /dev/davinci{n}" for n in absent)
            issues.append(
                Problem(
                    Status.FAIL,
                    f"{shown} names /dev/davinci{absent[0]}, which is not in this container: the "
                    "Ascend Docker Runtime reads it only when it starts a container",
                    f"recreate the container with the Ascend Docker Runtime "
                    f"(`docker run --runtime ascend -e {DOCKER_VISIBLE}={value.strip()} …`) or add `{nodes}`",
                )
            )
    elif not rt_set and ids:
        logical = [devices.logical(n) for n in ids]
        fix = _ids(n for n in logical if n is not None) or devices.all_ids
        issues.append(
            Problem(
                Status.WARN,
                f"{shown} does not limit this process: only the Ascend Docker Runtime reads it, "
                "when it starts a container",
                f"`export {RT_VISIBLE}={fix}` (logical IDs) to limit this process's devices",
            )
        )
    return issues


def _not_applied(shown: str, ids: Sequence[int], extra: Sequence[int], devices: _Devices) -> Problem:
    """Issue 29 item 4: the variable names a subset, yet every node is here: no Ascend Docker
    Runtime started this container (docker compose on runc), so nothing applied it
    (runtime-and-doctor.md §7.2: the runtime reads it at container start)."""
    logical = _ids(n for n in (devices.logical(p) for p in ids) if n is not None)
    others = ", ".join(f"/dev/davinci{n}" for n in extra[:4]) + (" …" if len(extra) > 4 else "")
    return Problem(
        Status.WARN,
        f"{shown} names {len(ids)} of the {devices.count} chips in this container, but {others} "
        f"{'are' if len(extra) > 1 else 'is'} here too: the Ascend Docker Runtime did not start this "
        "container (docker compose or runc?), so nothing applied it and jobs may use every chip",
        f"`export {RT_VISIBLE}={logical}` (the logical IDs of the chips it names), or recreate the container "
        f"with the Ascend Docker Runtime (`docker run --runtime ascend`, compose `runtime: ascend`), "
        f"or pass only `--device /dev/davinci{ids[0]}`… for the chips meant",
    )


def _device_id_issue(value: str, devices: _Devices, rt_ids: Optional[Tuple[int, ...]]) -> Optional[Problem]:
    shown = _shown(DEVICE_ID, value)
    count = devices.count if rt_ids is None else len(rt_ids)
    text = value.strip()
    if not text.isascii() or not text.isdigit():
        return Problem(Status.FAIL, f"{shown} is not a device ID", f"`export {DEVICE_ID}=0`")
    number = int(text)
    if number < count:
        return None
    fixed: Optional[int] = None
    if rt_ids is not None and number in rt_ids:
        fixed = rt_ids.index(number)  # with both set, ASCEND_DEVICE_ID is an index into the list
    elif rt_ids is None:
        fixed = devices.logical(number)  # a physical ID: its place among the nodes
    scope = f"the {_count(count)} {RT_VISIBLE} leaves" if rt_ids is not None else f"{_count(count)} here"
    return Problem(
        Status.FAIL,
        f"{shown} is out of range: it is an index into {scope} ({_indices(count)})",
        f"`export {DEVICE_ID}={0 if fixed is None or fixed >= count else fixed}`",
    )


def _mapping(devices: _Devices, visible: Sequence[int]) -> List[str]:
    lines = [f"logical {new} → {devices.nodes[old]}" for new, old in enumerate(visible)]
    if len(lines) > _MAPPING_LINES:
        lines = [*lines[:_MAPPING_LINES], f"… and {len(lines) - _MAPPING_LINES} more"]
    if devices.in_container:
        lines.append("in a container, logical IDs count from 0 over the /dev/davinciN nodes present")
    return lines


def run(machine: Machine) -> Finding:
    """Check the three device-selection variables against the chips of this machine."""
    dev = machine.dev()
    names = [f"/dev/davinci{n}" for n in dev.davinci_ids] + [f"/dev/vdavinci{n}" for n in dev.vdavinci_ids]
    devices = _Devices(names, dev.davinci_ids + dev.vdavinci_ids, machine.container().in_container)
    if devices.count == 0:
        return Finding(Status.SKIP, "no /dev/davinciN node: there is no device to select")
    environ = machine.environ
    rt_value: Optional[str] = environ.get(RT_VISIBLE)
    issues: List[Problem] = []
    details: List[str] = []
    visible: Tuple[int, ...] = tuple(range(devices.count))
    rt_ids: Optional[Tuple[int, ...]] = None
    if rt_value is not None:
        rt_issues, rt_ids = _rt_issues(rt_value, devices)
        issues += rt_issues
        visible = rt_ids
        details.append(f"{_shown(RT_VISIBLE, rt_value)} (logical IDs, read by the CANN runtime)")
    docker_value: Optional[str] = environ.get(DOCKER_VISIBLE)
    if docker_value is not None:
        details.append(f"{_shown(DOCKER_VISIBLE, docker_value)} (physical IDs, read at container start)")
        issues += _docker_issues(docker_value, devices, rt_value is not None, bool(dev.vdavinci_ids))
    device_id: Optional[str] = environ.get(DEVICE_ID)
    if device_id is not None:
        details.append(f"{_shown(DEVICE_ID, device_id)} (legacy single device)")
        # With nothing left by ASCEND_RT_VISIBLE_DEVICES, that failure is the one to fix first.
        issue = None if rt_ids == () else _device_id_issue(device_id, devices, rt_ids)
        if issue is not None:
            issues.append(issue)
    details += _mapping(devices, visible)
    if issues:
        return combine(issues, "", details)
    if rt_value is None:
        summary = f"all {devices.count} devices visible ({RT_VISIBLE} unset)"
    else:
        summary = f"{_shown(RT_VISIBLE, rt_value)}: {len(visible)} of {devices.count} devices visible"
    if device_id is not None:
        summary += f", {DEVICE_ID}={device_id.strip()}"
    return passed(summary, details)


CHECK = Check(
    id="visible-devices",
    group=Group.FRAMEWORKS,
    title=f"{RT_VISIBLE}, {DOCKER_VISIBLE} and {DEVICE_ID} name chips that exist",
    run=run,
    needs_hardware=True,
)
