"""Provides NpuSmi: runs npu-smi through the runner and turns its failures into typed, explained errors."""

from __future__ import annotations

import enum
import os
import re
import shutil
import signal
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Optional, Sequence

from npuwatch.chip_source import SourceFailure
from npuwatch.model import MetricStatus
from npuwatch.probes.runner import MAX_OUTPUT_BYTES, LaunchError, RunResult, run
from npuwatch.probes.sysroot import Sysroot, read_regular
from npuwatch.probes.tree_trust import SAVED_INFO, TRUST_HINT, runs_tree_code

DEFAULT_TIMEOUT_S = 5.0

#: Where the driver installs npu-smi (driver-interfaces.md §7: driver_atlas.xml installs both).
NPU_SMI_PATHS = ("/usr/local/bin/npu-smi", "/usr/local/sbin/npu-smi")


class FailureKind(enum.Enum):
    """The ways an npu-smi call goes wrong, each with its own advice."""

    NOT_FOUND = "not-found"
    PERMISSION = "permission"
    TIMEOUT = "timeout"
    DCMI = "dcmi"
    LIBRARY_MISSING = "library-missing"
    NOT_SUPPORTED = "not-supported"
    BAD_ARGUMENT = "bad-argument"
    NO_OUTPUT = "no-output"
    TOO_LARGE = "too-large"
    NOT_RUN = "not-run"  # an untrusted --root tree's npu-smi, never run (probes.tree_trust)
    FAILED = "failed"

    @property
    def metric_status(self) -> MetricStatus:
        """The per-metric status a failure of this kind gives every metric it blocks."""
        return _KIND_STATUS.get(self, MetricStatus.ERROR)


_KIND_STATUS = {
    FailureKind.TIMEOUT: MetricStatus.TIMEOUT,
    FailureKind.PERMISSION: MetricStatus.PERMISSION,
    FailureKind.NOT_SUPPORTED: MetricStatus.UNSUPPORTED,
}


@dataclass(frozen=True)
class NpuSmiFailure:
    """Why an npu-smi call gave no usable output: what happened, and what to do."""

    kind: FailureKind
    message: str
    hint: str
    exit_code: Optional[int] = None
    dcmi_code: Optional[int] = None
    output: str = ""  # what npu-smi printed, for --verbose and bug reports

    def __str__(self) -> str:
        return self.message

    def to_source_failure(self) -> SourceFailure:
        """This failure as the chip-source seam's backend-neutral record."""
        return SourceFailure(
            kind=self.kind.value,
            message=self.message,
            hint=self.hint,
            metric_status=self.kind.metric_status,
            exit_code=self.exit_code,
            error_code=self.dcmi_code,
            output=self.output,
        )

    @classmethod
    def from_source_failure(cls, failure: SourceFailure) -> NpuSmiFailure:
        """The npu-smi failure an ``NpuSmiSource`` reported through the seam (the doctor explains it)."""
        try:
            kind = FailureKind(failure.kind)
        except ValueError:
            kind = FailureKind.FAILED
        return cls(kind, failure.message, failure.hint, failure.exit_code, failure.error_code, failure.output)


class NpuSmiError(Exception):
    """Raised by the ``NpuSmi`` convenience methods; carries the explained failure."""

    def __init__(self, failure: NpuSmiFailure) -> None:
        super().__init__(failure.message)
        self.failure = failure


@dataclass(frozen=True)
class NpuSmiOutput:
    """What one successful npu-smi call printed and how long it took."""

    argv: tuple[str, ...]
    text: str
    duration_s: float
    #: Where the text came from when npu-smi did not print it now (a tree's saved output): a
    #: warning the chip source adds to its reading.
    note: str = ""


_DCMI_RE = re.compile(r"\bret\s*(?:is|=|:)\s*(-\d+)")
_LIB_RE = re.compile(r"error while loading shared libraries:\s*([^\s:]+)")
_UNSUPPORTED_RE = re.compile(r"This device does not support querying ([\w-]+)")
_BAD_PARAM_RE = re.compile(r"Error parameter of (-\w+)")
_TABLE_RE = re.compile(r"^\s*[+|]", re.MULTILINE)
_KEY_VALUE_RE = re.compile(r"^\s*[A-Za-z][\w ()%/.-]*?\s:\s", re.MULTILINE)


def classify(result: RunResult) -> Optional[NpuSmiFailure]:
    """Return the failure ``result`` shows, or ``None`` when its output is usable.

    Texts are matched whatever the exit code: npu-smi prints some errors and still
    exits 0, and prints a benign ``DrvMngGetConsoleLogLevel failed`` line before good
    tables (capture 034/035).
    """
    text = (result.stdout + "\n" + result.stderr).strip()
    if result.timed_out:
        return NpuSmiFailure(
            FailureKind.TIMEOUT,
            f"npu-smi did not answer within {result.timeout_s or result.duration_s:.1f} s and was killed",
            "the driver may be hung or busy: check `dmesg` for davinci/devdrv errors and "
            "whether another npu-smi is stuck (`ps -ef | grep npu-smi`)",
            output=text,
        )
    if result.too_large:
        return NpuSmiFailure(
            FailureKind.TOO_LARGE,
            f"npu-smi printed too much output (more than {MAX_OUTPUT_BYTES // (1024 * 1024)} MiB) "
            "and was stopped",
            "a working npu-smi prints a few KiB: check that the file is the driver's program "
            "(`file` and `ls -l` on it), run the same npu-smi command by hand, then `npuwatch doctor`",
            output=text[:4096],
        )
    found = _explain_text(text, result.exit_code)
    if found is not None:
        return found
    if result.exit_code not in (0, None):
        return NpuSmiFailure(
            FailureKind.FAILED,
            f"npu-smi {_ended(result.exit_code)}" + (f": {_first_line(text)}" if text else ""),
            "run the same npu-smi command by hand to see the full message; then `npuwatch doctor`",
            exit_code=result.exit_code,
            output=text,
        )
    if not result.stdout.strip():
        said = result.stderr.strip()
        return NpuSmiFailure(
            FailureKind.NO_OUTPUT,
            f"npu-smi printed only on stderr: {_first_line(said)}" if said else "npu-smi printed nothing",
            "a working npu-smi always prints a table or an error: check that the file is the "
            "driver's program (`file` and `ls -l` on it; in a container, that the host's "
            "/usr/local/bin/npu-smi is mounted, not an empty placeholder), else reinstall the driver",
            exit_code=result.exit_code,
            output=said,
        )
    return None


def _ended(exit_code: int) -> str:
    """``exited with code 2``, or ``was killed by SIGSEGV`` (a negative code is a signal's number)."""
    if exit_code >= 0:
        return f"exited with code {exit_code}"
    try:
        return f"was killed by {signal.Signals(-exit_code).name}"
    except ValueError:
        return f"was killed by signal {-exit_code}"


def _explain_text(text: str, exit_code: Optional[int]) -> Optional[NpuSmiFailure]:
    has_data = bool(_TABLE_RE.search(text)) or bool(_KEY_VALUE_RE.search(text))
    lib = _LIB_RE.search(text)
    if lib:
        return NpuSmiFailure(
            FailureKind.LIBRARY_MISSING,
            f"npu-smi cannot load {lib.group(1)}: the driver's libraries are not visible",
            "mount the driver userland from the host (-v /usr/local/Ascend/driver/lib64:"
            "/usr/local/Ascend/driver/lib64 -v /usr/local/dcmi:/usr/local/dcmi) or add "
            "/usr/local/Ascend/driver/lib64/driver and .../common to LD_LIBRARY_PATH",
            exit_code=exit_code,
            output=text,
        )
    # The pattern starts with \b, so re tries it at every position of a table (~0.3 ms a tick):
    # look for its literal "ret" first.
    dcmi = _DCMI_RE.search(text) if "ret" in text else None
    if dcmi and not has_data:
        return _dcmi_failure(int(dcmi.group(1)), exit_code, text)
    unsupported = _UNSUPPORTED_RE.search(text)
    if unsupported:
        return NpuSmiFailure(
            FailureKind.NOT_SUPPORTED,
            f"this device does not support querying {unsupported.group(1)}",
            "nothing to fix: this query is not available on this chip or driver",
            exit_code=exit_code,
            output=text,
        )
    bad = _BAD_PARAM_RE.search(text)
    if bad:
        return NpuSmiFailure(
            FailureKind.BAD_ARGUMENT,
            f"this npu-smi does not accept that {bad.group(1)} argument (older or newer driver)",
            "check `npu-smi info -h` for the query types this driver supports",
            exit_code=exit_code,
            output=text,
        )
    if not has_data and "permission denied" in text.lower():
        return NpuSmiFailure(
            FailureKind.PERMISSION,
            f"npu-smi was refused access: {_first_line(text)}",
            "run as root or join the HwHiAiUser group "
            "(`sudo usermod -aG HwHiAiUser $USER`, then log in again)",
            exit_code=exit_code,
            output=text,
        )
    if not has_data and "no such file or directory" in text.lower() and exit_code == 127:
        return NpuSmiFailure(
            FailureKind.NOT_FOUND,
            f"npu-smi is not installed here: {_first_line(text)}",
            _NOT_FOUND_HINT,
            exit_code=exit_code,
            output=text,
        )
    return None


def _dcmi_failure(code: int, exit_code: Optional[int], text: str) -> NpuSmiFailure:
    from npuwatch.probes import dcmi_codes  # the error table: loaded only when npu-smi prints a DCMI code

    known = dcmi_codes.describe(code)
    if known is None:
        return NpuSmiFailure(
            FailureKind.DCMI,
            f"npu-smi failed with DCMI error {code} (not a code npuwatch knows)",
            "run `npuwatch doctor` and check `dmesg`",
            exit_code=exit_code,
            dcmi_code=code,
            output=text,
        )
    kind = FailureKind.PERMISSION if code == -8002 else FailureKind.DCMI
    return NpuSmiFailure(
        kind,
        f"npu-smi failed with DCMI error {code} ({known.name}): {known.meaning}",
        known.hint,
        exit_code=exit_code,
        dcmi_code=code,
        output=text,
    )


_NOT_FOUND_HINT = (
    "install the Ascend driver (it provides npu-smi), or in a container mount it: "
    "-v /usr/local/bin/npu-smi:/usr/local/bin/npu-smi; point npuwatch at another copy with "
    "--npu-smi PATH; try `npuwatch --demo` to see npuwatch without hardware"
)


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    meaningful = [line for line in lines if not line.startswith("DrvMngGetConsoleLogLevel")]
    return (meaningful or lines or [""])[0]


def find_npu_smi(sysroot: Sysroot, explicit: Optional[str] = None) -> Optional[Path]:
    """Locate npu-smi: ``explicit``, then the driver's install paths under the root, then PATH.

    PATH is searched only when the root is ``/``: a sysroot tree is a whole machine.  An
    ``explicit`` path is the user's, never the tree's: a relative one means the current directory
    (a bare name there, else on PATH, as a shell finds it).  A tree's own npu-smi is found only
    when the tree is trusted (``probes.tree_trust``; ``withheld_npu_smi`` says what was not run).
    """
    if explicit:
        return _explicit_npu_smi(explicit)
    if not runs_tree_code(sysroot.root, sysroot.environ):
        return None
    for candidate in NPU_SMI_PATHS:
        # A dangling link counts: running it then explains the broken mount.
        if sysroot.lexists(candidate):
            return sysroot.path(candidate)
    if not sysroot.is_live:
        return None
    found = shutil.which("npu-smi", path=sysroot.getenv("PATH"))
    return Path(found) if found else None


@dataclass(frozen=True)
class Withheld:
    """The npu-smi of an untrusted ``--root`` tree, not run, and its saved ``npu-smi info`` output.

    ``program``: the tree's npu-smi as a machine path (``/usr/local/bin/npu-smi``), ``None`` when
    the tree has none; ``saved``: the real path of ``SAVED_INFO`` in the tree, ``None`` when absent.
    ``answer`` is what ``NpuSmi.call`` gives instead of running anything.
    """

    program: Optional[str]
    saved: Optional[Path]

    def answer(self, args: Sequence[str]) -> NpuSmiOutput:
        """``npu-smi info``: the saved output (explained as live when it is an error text);
        any other query: ``NpuSmiError`` saying the tree's npu-smi was not run."""
        if self.saved is not None and tuple(args) == ("info",):
            return self._saved_info(self.saved)
        held = f"the tree's {self.program} is not run: " if self.program else ""
        raise NpuSmiError(
            NpuSmiFailure(
                FailureKind.NOT_RUN,
                "the tree's npu-smi was not run: pass --trust-root to run it",
                f"{held}{TRUST_HINT}; or save its `npu-smi info` output in the tree as {SAVED_INFO}",
            )
        )

    def _saved_info(self, path: Path) -> NpuSmiOutput:
        data = read_regular(path, MAX_OUTPUT_BYTES + 1)
        if data is None:
            raise NpuSmiError(
                NpuSmiFailure(
                    FailureKind.FAILED,
                    f"the tree's saved npu-smi output {SAVED_INFO} cannot be read",
                    "it must be a regular file readable by this user",
                )
            )
        too_large = len(data) > MAX_OUTPUT_BYTES
        text = data[:MAX_OUTPUT_BYTES].decode("utf-8", errors="replace")
        run = f" ({self.program})" if self.program else ""
        note = (
            f"chips from the tree's saved npu-smi output {SAVED_INFO}: its npu-smi{run} was not run "
            f"(the tree is not trusted: {TRUST_HINT})"
        )
        explained = classify(RunResult(("npu-smi", "info"), 0, text, "", 0.0, too_large=too_large))
        if explained is not None:
            raise NpuSmiError(replace(explained, message=f"{explained.message} (saved in {SAVED_INFO})"))
        return NpuSmiOutput(argv=(str(path),), text=text, duration_s=0.0, note=note)


def withheld_npu_smi(sysroot: Sysroot) -> Optional[Withheld]:
    """What an untrusted tree's npu-smi would have been and its saved output, when it has either;
    ``None`` on a trusted machine (its npu-smi runs) or a tree with neither."""
    if runs_tree_code(sysroot.root, sysroot.environ):
        return None
    program = next((path for path in NPU_SMI_PATHS if sysroot.lexists(path)), None)
    saved = sysroot.path(SAVED_INFO) if sysroot.lexists(SAVED_INFO) else None
    if program is None and saved is None:
        return None
    return Withheld(program, saved)


def _explicit_npu_smi(given: str) -> Path:
    """``--npu-smi``/``NPUWATCH_NPU_SMI`` as an absolute path, relative to the current directory."""
    if os.sep not in given and not os.path.lexists(given):
        found = shutil.which(given)
        if found:
            return Path(found)
    return Path(os.path.abspath(given))


#: The least time worth giving an npu-smi call before a one-shot's deadline (``NpuSmi.deadline``).
_LEAST_CALL_S = 0.1


class NpuSmi:
    """Runs npu-smi sub-commands with a timeout and returns their text or an explained failure."""

    def __init__(
        self,
        path: Optional[Path],
        timeout_s: float = DEFAULT_TIMEOUT_S,
        deadline: Optional[float] = None,
        *,
        withheld: Optional[Withheld] = None,
    ) -> None:
        self.path = path
        self.timeout_s = timeout_s
        #: A one-shot command's end (``time.monotonic()``): no call runs past it, whatever its
        #: own timeout (``npuwatch check`` ends within its budget however many calls it makes).
        self.deadline = deadline
        #: An untrusted tree's npu-smi: never run, its saved output answers ``info`` (``path`` is None).
        self.withheld = withheld

    def with_timeout(self, timeout_s: float) -> NpuSmi:
        """The same npu-smi (and deadline) with another limit per call."""
        return NpuSmi(self.path, timeout_s, self.deadline, withheld=self.withheld)

    def call(self, args: Sequence[str]) -> NpuSmiOutput:
        """Run ``npu-smi <args>``; raise ``NpuSmiError`` with the explained failure."""
        if self.path is None and self.withheld is not None:
            return self.withheld.answer(args)
        if self.path is None:
            raise NpuSmiError(NpuSmiFailure(FailureKind.NOT_FOUND, "npu-smi was not found", _NOT_FOUND_HINT))
        argv = (str(self.path), *args)
        timeout_s = self.timeout_s
        if self.deadline is not None:
            left_s = self.deadline - time.monotonic()
            if left_s < _LEAST_CALL_S:  # the command's budget is spent: not npu-smi's fault
                raise NpuSmiError(
                    NpuSmiFailure(
                        FailureKind.TIMEOUT,
                        f"npu-smi {' '.join(args)} was not run: the command's --timeout budget was spent",
                        "raise --timeout; `npuwatch doctor` times each source on its own",
                    )
                )
            timeout_s = min(timeout_s, left_s)
        try:
            result = run(argv, timeout_s, env=_child_env())
        except LaunchError as exc:
            raise NpuSmiError(_launch_failure(exc)) from exc
        failure = classify(result)
        if failure is not None:
            raise NpuSmiError(failure)
        return NpuSmiOutput(argv=argv, text=result.stdout, duration_s=result.duration_s)

    def info(self) -> NpuSmiOutput:
        """``npu-smi info``: the summary table of every chip and process."""
        return self.call(("info",))

    def query(self, kind: str, npu_id: int, chip_id: Optional[int] = None) -> NpuSmiOutput:
        """``npu-smi info -t KIND -i NPU [-c CHIP]``: one key/value report (board, usages, …)."""
        args = ["info", "-t", kind, "-i", str(npu_id)]
        if chip_id is not None:
            args += ["-c", str(chip_id)]
        return self.call(args)


def _launch_failure(exc: LaunchError) -> NpuSmiFailure:
    if exc.errno_name == "ENOENT":
        return NpuSmiFailure(FailureKind.NOT_FOUND, f"npu-smi not found at {exc.argv[0]}", _NOT_FOUND_HINT)
    if exc.errno_name == "EACCES":
        if _has_no_execute_bit(exc.argv[0]):
            # Not even root can run a file without an x bit: a copy or mount lost its mode.
            return NpuSmiFailure(
                FailureKind.PERMISSION,
                f"npu-smi at {exc.argv[0]} has no execute permission",
                f"restore its mode: `sudo chmod 755 {exc.argv[0]}` (or remount it without noexec)",
            )
        return NpuSmiFailure(
            FailureKind.PERMISSION,
            f"npu-smi at {exc.argv[0]} is not executable by this user",
            "check its mode (`ls -l`) and mount (`findmnt -T` it: noexec?), run it as root, "
            "or join the HwHiAiUser group",
        )
    return NpuSmiFailure(
        FailureKind.FAILED,
        f"npu-smi at {exc.argv[0]} could not start: {exc.reason}",
        "the file is not a program for this machine; reinstall the driver or fix the mount",
    )


def _has_no_execute_bit(path: str) -> bool:
    try:
        return not os.stat(path).st_mode & 0o111
    except OSError:
        return False


def _child_env() -> dict[str, str]:
    # npu-smi prints English, fixed-layout tables only in the C locale on some builds.
    env = dict(os.environ)
    env["LC_ALL"] = "C"
    return env
