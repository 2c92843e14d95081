"""Check cann-install: a CANN toolkit is installed, which version, and its components agree.

Also the CANN facts the other CANN checks share: the home in use, its version, its
``set_env.sh``, its architecture, and how CANN/HDK versions compare (runtime-and-doctor.md
§6.2–6.3: ``ascend-toolkit/latest`` up to 8.3, ``cann`` from 8.5, root or ``$HOME/Ascend``).
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath
from typing import List, Optional, Tuple

from npuwatch.doctor.machine import Machine
from npuwatch.doctor.result import Check, Finding, Group, failed, passed, warned
from npuwatch.probes.install_files import (
    DEFAULT_ASCEND_ROOT,
    ToolkitInstallInfo,
    VersionCfg,
    parse_toolkit_install_info,
    parse_version_cfg,
    read_cann_version,
)

DOWNLOAD_PAGE = "https://www.hiascend.com/developer/download/community/result?module=cann"

_COMPONENT = re.compile(r"[a-z]+|\d+")

VersionKey = Tuple[Tuple[int, int], ...]


# ---------------------------------------------------------------- shared CANN facts


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


def _component_versions(cfg: VersionCfg) -> List[Tuple[str, str]]:
    running = [(e.package, e.public) for e in cfg.entries if e.state == "running" and e.public]
    if running:
        return running
    return [(e.package, e.public) for e in cfg.entries if e.public]


def run(machine: Machine) -> Finding:
    """Find the CANN homes; none fails, an unreadable version or mixed components warn."""
    homes = machine.cann_homes()
    if not homes:
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
