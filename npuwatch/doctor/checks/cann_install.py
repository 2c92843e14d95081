"""Check cann-install: a CANN toolkit is installed, which version, and its components agree.

The CANN facts other checks share (the home in use, its version, ``set_env.sh``, architecture,
how versions compare) are machine facts: ``npuwatch.doctor.facts``.
"""

from __future__ import annotations

import grp
import os
import re
import stat
from pathlib import PurePosixPath
from typing import List, Optional, Tuple

from npuwatch.doctor.facts import DOWNLOAD_PAGE, cann_arch, display_real, home_version, release
from npuwatch.doctor.machine import Machine
from npuwatch.doctor.result import Check, Finding, Group, failed, passed, warned
from npuwatch.probes.install_files import (
    DEFAULT_ASCEND_ROOT,
    VersionCfg,
    cann_home_candidates,
    parse_version_cfg,
)

_COMPONENT = re.compile(r"[a-z]+|\d+")


def looked_in(machine: Machine) -> List[str]:
    """Where CANN homes are searched, in order (runtime-and-doctor.md §6.3)."""
    places = []
    for variable in ("ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME"):
        value = machine.environ.get(variable)
        places.append(f"${variable} ({value})" if value else f"${variable} (unset)")
    places += [f"{DEFAULT_ASCEND_ROOT}/cann", f"{DEFAULT_ASCEND_ROOT}/ascend-toolkit/latest"]
    home = machine.environ.get("HOME")
    if home:
        places += [f"{home}/Ascend/cann", f"{home}/Ascend/ascend-toolkit/latest"]
    return places


def install_hint(arch: str = "$(uname -m)") -> str:
    """How to install the toolkit (the version placeholder is the user's choice)."""
    return (
        f"install the CANN toolkit: download Ascend-cann-toolkit_<version>_linux-{arch}.run from "
        f"{DOWNLOAD_PAGE} (pick the version for your driver), run "
        f"`bash Ascend-cann-toolkit_<version>_linux-{arch}.run --install` (as root it goes to "
        "/usr/local/Ascend, otherwise to $HOME/Ascend), then install the kernels/ops package for "
        "your chip and `source` the set_env.sh it prints"
    )


# ---------------------------------------------------------------- the check


def _side_by_side(machine: Machine) -> List[str]:
    """Versioned folders beside ``latest``/``cann`` (older installs kept after an upgrade)."""
    root = PurePosixPath(DEFAULT_ASCEND_ROOT)
    found = []
    for entry in machine.sysroot.listdir(root / "ascend-toolkit"):
        folder = root / "ascend-toolkit" / entry
        if entry != "latest" and machine.sysroot.listdir(folder):
            found.append(str(folder))
    found += [str(root / e) for e in machine.sysroot.listdir(root) if e.startswith("cann-")]
    return found


def _unreadable_home(machine: Machine) -> Optional[Finding]:
    """A CANN home behind a folder this user cannot enter (a toolkit installed as root without
    ``--install-for-all``: ``ascend-toolkit`` 0750 root): installed, not readable; never "not
    installed" (issue 29, as driver-install already says for the driver)."""
    for candidate in cann_home_candidates(machine.sysroot):
        blocked = machine.unreadable(candidate)
        if blocked is None:
            continue
        uid = os.getuid()
        user = machine.user_name(uid) or f"uid {uid}"
        group = _group_of(machine, blocked)
        fixes = [
            "reinstall the toolkit as root with `--install-for-all` (`bash Ascend-cann-toolkit_<version>_"
            "linux-$(uname -m).run --install --install-for-all`) so every user may read it"
        ]
        if group is not None and group != "root":
            who = "$USER" if user.startswith("uid ") else user
            fixes.append(f"add the user to its group: `sudo usermod -aG {group} {who}`, then log in again")
        fixes.append("or run as root")
        return failed(
            f"CANN is installed at {candidate}, but not readable by {user}: {blocked} is closed to this user",
            ", or ".join(fixes[:-1]) + "; " + fixes[-1],
            ["looked in: " + ", ".join(looked_in(machine)), f"{blocked}: {_mode_line(machine, blocked)}"],
        )
    return None


def _group_of(machine: Machine, folder: PurePosixPath) -> Optional[str]:
    try:
        gid = os.stat(machine.sysroot.path(folder)).st_gid
    except OSError:
        return None
    return machine.group_names().get(gid) or (str(gid) if not machine.sysroot.is_live else _live_group(gid))


def _live_group(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except (KeyError, OverflowError):
        return str(gid)


def _mode_line(machine: Machine, folder: PurePosixPath) -> str:
    try:
        info = os.stat(machine.sysroot.path(folder))
    except OSError as exc:
        return f"cannot stat: {exc.strerror}"
    owner = machine.user_name(info.st_uid) or str(info.st_uid)
    group = _group_of(machine, folder) or str(info.st_gid)
    return f"{owner}:{group} mode {stat.S_IMODE(info.st_mode):o}"


def _component_versions(cfg: VersionCfg) -> List[Tuple[str, str]]:
    running = [(e.package, e.public) for e in cfg.entries if e.state == "running" and e.public]
    if running:
        return running
    return [(e.package, e.public) for e in cfg.entries if e.public]


def run(machine: Machine) -> Finding:
    """Find the CANN homes; none fails, an unreadable version or mixed components warn."""
    homes = machine.cann_homes()
    if not homes:
        unreadable = _unreadable_home(machine)
        if unreadable is not None:
            return unreadable
        return failed(
            "CANN toolkit not installed",
            install_hint(),
            ["looked in: " + ", ".join(looked_in(machine))],
        )
    home = homes[0]
    version = home_version(machine, home)
    details = []
    for other in homes:
        real = machine.sysroot.realpath(other)
        shown = str(other)
        target = display_real(machine, real)
        if target != str(other):
            shown = f"{other} → {target}"
        details.append(f"CANN {home_version(machine, other) or 'version unknown'} at {shown}")
    in_use = {machine.sysroot.realpath(h) for h in homes}
    installed = [p for p in _side_by_side(machine) if machine.sysroot.realpath(p) not in in_use]
    if installed:
        details.append("also installed (not in use): " + ", ".join(installed))
    several = f" ({len(homes)} installs found; this one is used)" if len(homes) > 1 else ""
    if version is None:
        return warned(
            f"CANN found at {home} but its version could not be read",
            f"the install looks incomplete (no {home}/<arch>-linux/ascend_toolkit_install.info, "
            f"version.cfg or runtime/version.info): reinstall it; {install_hint(cann_arch(machine, home))}",
            details,
        )
    listing, mixed = _mixed_components(machine, home, version)
    details += listing
    if mixed is not None:
        return warned(mixed[0], mixed[1], details)
    return passed(f"CANN {version} at {home}{several}", details)


def _mixed_components(
    machine: Machine, home: PurePosixPath, version: str
) -> Tuple[List[str], Optional[Tuple[str, str]]]:
    """Components of one install at different versions (§10 row 19: E30006 OPP verification).

    Returns the evidence lines (empty when all agree) and, when it matters, (summary, hint).
    """
    text = machine.sysroot.read_text(home / "version.cfg")
    if text is None:
        return [], None
    components = _component_versions(parse_version_cfg(text))
    if len({public for _, public in components}) < 2:
        return [], None
    lines = [f"version.cfg: {package} {public}" for package, public in components]
    if release(version) >= (8, 5):
        # From 8.5 the ops and other sub-packages upgrade independently (hicann/release-management
        # 9.1.0 release notes, "Independently Upgradable Subpackages"): evidence, not a warning.
        return [*lines, "CANN 8.5+ allows independently upgraded sub-packages"], None
    arch = cann_arch(machine, home)
    listing = ", ".join(f"{package} {public}" for package, public in components)
    return lines, (
        f"CANN {version} at {home} mixes component versions: {listing}",
        "mixed components fail at device open with 507033 + `E30006 Failed to verify the OPP`: "
        f"reinstall one version throughout, e.g. `bash Ascend-cann-toolkit_{version}_linux-{arch}.run "
        f"--full`, then the kernels package of the same version (`bash Ascend-cann-kernels-<chip>_"
        f"{version}_linux-{arch}.run --install`)",
    )


CHECK = Check(
    id="cann-install",
    group=Group.CANN,
    title="a CANN toolkit is installed, its version known and its components consistent",
    run=run,
)
