"""Reads Ascend install files: driver/firmware ``version.info``, install info, ``version.cfg``.

Formats: runtime-and-doctor.md §6 and captures 018 (driver version.info), 019 (firmware
version.info), 020/048 (ascend_toolkit_install.info).  Every parser takes text and never raises;
the discovery functions read through a ``Sysroot`` and return machine paths
(``PurePosixPath('/usr/local/Ascend/driver')``): ``sysroot.path(p)`` gives the real one.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Dict, List, Mapping, Optional, Set, Tuple

from npuwatch.model import Versions
from npuwatch.probes.sysroot import Sysroot

DEFAULT_ASCEND_ROOT = "/usr/local/Ascend"
DEFAULT_DRIVER_DIR = PurePosixPath("/usr/local/Ascend/driver")
DEFAULT_FIRMWARE_DIR = PurePosixPath("/usr/local/Ascend/firmware")
INSTALL_INFO = PurePosixPath("/etc/ascend_install.info")

_BRACKETS = re.compile(r"\[([^\[\]]*)\]")

VersionRange = Tuple[str, str]


def parse_key_value_file(text: str) -> Dict[str, str]:
    """``key=value`` lines → dict (the last of a repeated key wins, as a shell would read it)."""
    values: Dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        key, value = key.strip(), value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        if key:
            values[key] = value
    return values


def _none_if_empty(value: Optional[str]) -> Optional[str]:
    return value if value else None


def parse_bracket_lists(value: Optional[str]) -> Tuple[Tuple[str, ...], ...]:
    """Every bracketed group of an install file's list value, in order: one parser for that form.

    ``[6.4.0,6.4.99],[7.0.0,8.9.9]`` → ``(('6.4.0', '6.4.99'), ('7.0.0', '8.9.9'))``;
    ``[V100R001C13],[V100R001C15]`` → ``(('V100R001C13',), ('V100R001C15',))``.  Used for
    ``compatible_version``, ``compatible_version_fw`` and ``compatible_version_drv``.
    """
    return tuple(tuple(part.strip() for part in group.split(",")) for group in _BRACKETS.findall(value or ""))


def _versions_list(value: Optional[str]) -> Tuple[str, ...]:
    return tuple(part for group in parse_bracket_lists(value) for part in group if part)


def _ranges(value: Optional[str]) -> Tuple[VersionRange, ...]:
    # compatible_version_fw=[6.4.0,6.4.99],[7.0.0,8.9.9] (310P 25.3.rc1); compatible_version_drv (019)
    return tuple(
        (group[0], group[1]) for group in parse_bracket_lists(value) if len(group) == 2 and all(group)
    )


# ---------------------------------------------------------------- typed files


@dataclass(frozen=True)
class DriverVersionInfo:
    """``<driver>/version.info`` (018)."""

    version: Optional[str] = None
    ascendhal_version: Optional[str] = None
    inner_version: Optional[str] = None
    compatible_versions: Tuple[str, ...] = ()  # CANN inner versions this driver accepts
    #: Every (low, high) firmware range of ``compatible_version_fw``; a firmware in any one is accepted.
    compatible_firmware_ranges: Tuple[VersionRange, ...] = ()
    package_version: Optional[str] = None
    fields: Mapping[str, str] = field(default_factory=dict)
    warnings: Tuple[str, ...] = ()


def parse_driver_version_info(text: str) -> DriverVersionInfo:
    """Read the driver's ``version.info``."""
    values = parse_key_value_file(text)
    warnings = () if values.get("Version") else ("no Version= line",)
    return DriverVersionInfo(
        version=_none_if_empty(values.get("Version")),
        ascendhal_version=_none_if_empty(values.get("ascendhal_version")),
        inner_version=_none_if_empty(values.get("Innerversion")),
        compatible_versions=_versions_list(values.get("compatible_version")),
        compatible_firmware_ranges=_ranges(values.get("compatible_version_fw")),
        package_version=_none_if_empty(values.get("package_version")),
        fields=values,
        warnings=warnings,
    )


@dataclass(frozen=True)
class FirmwareVersionInfo:
    """``/usr/local/Ascend/firmware/version.info`` (019)."""

    version: Optional[str] = None
    package_version: Optional[str] = None
    compatible_driver_ranges: Tuple[VersionRange, ...] = ()
    fields: Mapping[str, str] = field(default_factory=dict)
    warnings: Tuple[str, ...] = ()


def parse_firmware_version_info(text: str) -> FirmwareVersionInfo:
    """Read the firmware's ``version.info``."""
    values = parse_key_value_file(text)
    return FirmwareVersionInfo(
        version=_none_if_empty(values.get("Version")),
        package_version=_none_if_empty(values.get("package_version")),
        compatible_driver_ranges=_ranges(values.get("compatible_version_drv")),
        fields=values,
        warnings=() if values.get("Version") else ("no Version= line",),
    )


@dataclass(frozen=True)
class AscendInstallInfo:
    """``/etc/ascend_install.info``, written by the driver and firmware installers."""

    user_name: Optional[str] = None
    user_group: Optional[str] = None
    driver_install_path: Optional[str] = None
    driver_install_type: Optional[str] = None
    driver_install_status: Optional[str] = None  # npu-smi warns unless "complete"
    driver_install_mode: Optional[str] = None
    driver_install_for_all: Optional[str] = None
    firmware_install_path: Optional[str] = None
    firmware_install_type: Optional[str] = None
    fields: Mapping[str, str] = field(default_factory=dict)


def parse_ascend_install_info(text: str) -> AscendInstallInfo:
    """Read ``/etc/ascend_install.info``."""
    values = parse_key_value_file(text)
    return AscendInstallInfo(
        user_name=_none_if_empty(values.get("UserName")),
        user_group=_none_if_empty(values.get("UserGroup")),
        driver_install_path=_none_if_empty(values.get("Driver_Install_Path_Param")),
        driver_install_type=_none_if_empty(values.get("Driver_Install_Type")),
        driver_install_status=_none_if_empty(values.get("Driver_Install_Status")),
        driver_install_mode=_none_if_empty(values.get("Driver_Install_Mode")),
        driver_install_for_all=_none_if_empty(values.get("Driver_Install_For_All")),
        firmware_install_path=_none_if_empty(values.get("Firmware_Install_Path_Param")),
        firmware_install_type=_none_if_empty(values.get("Firmware_Install_Type")),
        fields=values,
    )


@dataclass(frozen=True)
class ToolkitInstallInfo:
    """``<cann>/<arch>-linux/ascend_toolkit_install.info`` (020, 048)."""

    package_name: Optional[str] = None
    version: Optional[str] = None
    inner_version: Optional[str] = None
    compatible_versions: Tuple[str, ...] = ()  # driver inner versions this CANN accepts
    arch: Optional[str] = None
    os: Optional[str] = None
    path: Optional[str] = None
    fields: Mapping[str, str] = field(default_factory=dict)
    warnings: Tuple[str, ...] = ()


def parse_toolkit_install_info(text: str) -> ToolkitInstallInfo:
    """Read ``ascend_toolkit_install.info``."""
    values = parse_key_value_file(text)
    return ToolkitInstallInfo(
        package_name=_none_if_empty(values.get("package_name")),
        version=_none_if_empty(values.get("version")),
        inner_version=_none_if_empty(values.get("innerversion")),
        compatible_versions=_versions_list(values.get("compatible_version")),
        arch=_none_if_empty(values.get("arch")),
        os=_none_if_empty(values.get("os")),
        path=_none_if_empty(values.get("path")),
        fields=values,
        warnings=() if values.get("version") else ("no version= line",),
    )


@dataclass(frozen=True)
class VersionCfgEntry:
    """One ``<package>_<state>_version=[<inner>:<public>]`` line of ``version.cfg``."""

    package: str
    state: str  # running, upgrade, installed
    inner: Optional[str]
    public: Optional[str]


@dataclass(frozen=True)
class VersionCfg:
    """``ascend-toolkit/latest/version.cfg`` (runtime-and-doctor.md §6.2)."""

    entries: Tuple[VersionCfgEntry, ...] = ()
    warnings: Tuple[str, ...] = ()

    def public_version(self, package: str, state: str = "running") -> Optional[str]:
        """The public version (``8.0.RC2``) of ``package`` in ``state``, if listed."""
        for entry in self.entries:
            if entry.package == package and entry.state == state and entry.public:
                return entry.public
        return None


_CFG_KEY = re.compile(r"^(?P<package>.+?)_(?P<state>[a-z]+)_version$")


def parse_version_cfg(text: str) -> VersionCfg:
    """Read ``version.cfg``; lines of another shape are skipped with a warning."""
    entries: List[VersionCfgEntry] = []
    warnings: List[str] = []
    for key, value in parse_key_value_file(text).items():
        match = _CFG_KEY.match(key)
        groups = _BRACKETS.findall(value)
        if match is None or not groups:
            warnings.append(f"unrecognised version.cfg line {key}={value}")
            continue
        inner, _, public = groups[0].partition(":")
        entries.append(
            VersionCfgEntry(
                match.group("package"),
                match.group("state"),
                inner.strip() or None,
                public.strip() or None,
            )
        )
    return VersionCfg(tuple(entries), tuple(warnings))


# ---------------------------------------------------------------- discovery


def _machine_path(value: Optional[str]) -> Optional[PurePosixPath]:
    """A clean absolute machine path from a file or variable, or ``None`` when it is not one."""
    if not value or not value.strip().startswith("/") or "\x00" in value:
        return None
    return PurePosixPath(posixpath.normpath(value.strip()))


def read_install_info(sysroot: Sysroot) -> Optional[AscendInstallInfo]:
    """``/etc/ascend_install.info`` of the machine, or ``None`` when it is absent."""
    text = sysroot.read_text(INSTALL_INFO)
    return None if text is None else parse_ascend_install_info(text)


def find_driver_dir(sysroot: Sysroot) -> PurePosixPath:
    """``Driver_Install_Path_Param`` + ``/driver``, else ``/usr/local/Ascend/driver``."""
    info = read_install_info(sysroot)
    base = _machine_path(info.driver_install_path if info else None)
    return base / "driver" if base is not None else DEFAULT_DRIVER_DIR


def find_firmware_dir(sysroot: Sysroot) -> PurePosixPath:
    """``Firmware_Install_Path_Param`` + ``/firmware``, else ``/usr/local/Ascend/firmware``."""
    info = read_install_info(sysroot)
    base = _machine_path(info.firmware_install_path if info else None)
    return base / "firmware" if base is not None else DEFAULT_FIRMWARE_DIR


def _is_dir(sysroot: Sysroot, path: PurePosixPath) -> bool:
    # Path.is_dir() lets some errors through on 3.9 (ENAMETOOLONG, EACCES): a bad variable
    # must not take discovery down.
    try:
        return sysroot.path(path).is_dir()
    except (OSError, ValueError):
        return False


def cann_home_candidates(sysroot: Sysroot) -> Tuple[PurePosixPath, ...]:
    """Where a CANN home may be, in the order of runtime-and-doctor.md §6.3 (present or not)."""
    candidates: List[Optional[PurePosixPath]] = [
        _machine_path(sysroot.getenv("ASCEND_HOME_PATH")),
        _machine_path(sysroot.getenv("ASCEND_TOOLKIT_HOME")),
        PurePosixPath(DEFAULT_ASCEND_ROOT, "cann"),
        PurePosixPath(DEFAULT_ASCEND_ROOT, "ascend-toolkit", "latest"),
    ]
    home = _machine_path(sysroot.getenv("HOME"))
    if home is not None:
        candidates += [home / "Ascend" / "cann", home / "Ascend" / "ascend-toolkit" / "latest"]
    return tuple(candidate for candidate in candidates if candidate is not None)


def find_cann_homes(sysroot: Sysroot) -> Tuple[PurePosixPath, ...]:
    """Existing CANN homes in the order of runtime-and-doctor.md §6.3, duplicates removed.

    CANN 8.5+ links ``ascend-toolkit/latest`` to ``../cann``: homes that resolve to the same
    directory are listed once, under the first name found.
    """
    found: List[PurePosixPath] = []
    seen: Set[Path] = set()
    for candidate in cann_home_candidates(sysroot):
        if not _is_dir(sysroot, candidate):
            continue
        real = sysroot.realpath(candidate)
        if real in seen:
            continue
        seen.add(real)
        found.append(candidate)
    return tuple(found)


def read_cann_version(sysroot: Sysroot, home: PurePosixPath) -> Optional[str]:
    """CANN's version at ``home``: toolkit install info, then version.cfg, then runtime."""
    for entry in sysroot.listdir(home):
        if entry.endswith("-linux"):
            text = sysroot.read_text(home / entry / "ascend_toolkit_install.info")
            if text is not None:
                version = parse_toolkit_install_info(text).version
                if version:
                    return version
    text = sysroot.read_text(home / "version.cfg")
    if text is not None:
        cfg = parse_version_cfg(text)
        for package in ("toolkit", "runtime"):
            version = cfg.public_version(package)
            if version:
                return version
        publics = [entry.public for entry in cfg.entries if entry.public]
        if publics:
            return publics[0]
    text = sysroot.read_text(home / "runtime" / "version.info")
    if text is not None:
        return _none_if_empty(parse_key_value_file(text).get("Version"))
    return None


def read_versions(sysroot: Sysroot) -> Versions:
    """Driver, firmware and CANN versions from the install files (``npu_smi`` left ``None``)."""
    driver_text = sysroot.read_text(find_driver_dir(sysroot) / "version.info")
    firmware_text = sysroot.read_text(find_firmware_dir(sysroot) / "version.info")
    if firmware_text is None:
        firmware_text = sysroot.read_text(DEFAULT_FIRMWARE_DIR / "version.info")
    cann: Optional[str] = None
    for home in find_cann_homes(sysroot):
        cann = read_cann_version(sysroot, home)
        if cann:
            break
    return Versions(
        npu_smi=None,
        driver=parse_driver_version_info(driver_text).version if driver_text else None,
        firmware=parse_firmware_version_info(firmware_text).version if firmware_text else None,
        cann=cann,
    )
