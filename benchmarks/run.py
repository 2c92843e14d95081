"""Publishes npuwatch's own overhead: every benchmark in one run, one Markdown table with its targets.

Run: python benchmarks/run.py [--quick] [--skip dashboard,notebook,exporter] [--markdown FILE]

Sections (``--skip`` takes their names): ``core`` (parse cost at 1, 8, 16, 64 chips; one sampler
tick at 8 and 16 chips), ``startup`` (``npuwatch check`` against ``python -c pass``, imports),
``backends`` (``benchmarks/backends.py``: DCMI against npu-smi, whole-tree CPU and first screen),
``dashboard`` (60 s of ``--demo a3`` at 1 s in tmux), ``notebook`` (a Jupyter kernel with the live
view for 60 s, after 10 s idle) and ``exporter`` (``benchmarks/exporter.py``: 50 scrapers against
``npuwatch serve --demo a3``, run as a subprocess).  ``--quick`` shortens every phase to a few
seconds for a smoke run: its figures are not the published ones.  A section that cannot run says
"not measured: why" in its row; the script still exits 0.  Numbers are from this machine, this
run: the table names the machine, the date and the load average at start and end.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

HERE = Path(__file__).resolve().parent
SECTIONS = ("core", "startup", "backends", "dashboard", "notebook", "exporter")
EXPORTER_KEYS = ("requests", "errors", "p50_ms", "p99_ms", "server_cpu_percent", "server_rss_mb")


@dataclass(frozen=True)
class Row:
    """One line of the table; ``met`` is None where the figure has no target."""

    section: str
    figure: str
    value: str
    target: str = "—"
    met: Optional[bool] = None
    ratio: Optional[float] = None  # value ÷ target

    def cells(self) -> List[str]:
        if self.met is None:
            verdict = "—" if self.target == "—" else "not measured"
        else:
            verdict = "yes" if self.met else "**NO**"
            if self.ratio is not None:
                verdict += f" ({self.ratio:.2f}× target)"
        return [self.section, self.figure, self.value, self.target, verdict]


@dataclass(frozen=True)
class Durations:
    """How long each phase runs: the published figures, or a smoke run's."""

    startup_runs: int
    backend_s: float
    dashboard_s: float
    dashboard_warmup_s: float
    notebook_s: float
    notebook_idle_s: float
    notebook_warmup_s: float
    exporter_s: float

    @staticmethod
    def for_run(quick: bool) -> Durations:
        if quick:
            return Durations(5, 5.0, 5.0, 2.0, 5.0, 3.0, 2.0, 5.0)
        return Durations(21, 30.0, 60.0, 5.0, 60.0, 10.0, 5.0, 30.0)


def _below(section: str, figure: str, value: float, target: float, unit: str, digits: int = 1) -> Row:
    return Row(
        section, figure, f"{value:.{digits}f} {unit}", f"< {target:g} {unit}", value < target, value / target
    )


def core_rows(quick: bool, durations: Durations) -> List[Row]:
    from core import PARSE_TARGET_US, TICK_TARGET_US, measure_core

    figures = measure_core(quick)
    rows: List[Row] = []
    for parse in figures.parse:
        name = f"parse `npu-smi info`, {parse.label}"
        if parse.chips == 16:
            rows.append(_below("core", name, parse.us_per_table, PARSE_TARGET_US, "µs"))
        else:
            rows.append(Row("core", name, f"{parse.us_per_table:.1f} µs"))
    for tick in figures.ticks:
        name = f"sampler tick, CPU, {tick.label}, {tick.processes} processes (npu-smi excluded)"
        rows.append(_below("core", name, tick.cpu_us_per_tick, TICK_TARGET_US, "µs"))
    return rows


def startup_rows(quick: bool, durations: Durations) -> List[Row]:
    from check_startup import TARGET_MS, measure_startup

    figures = measure_startup(durations.startup_runs)
    runs = f"median of {figures.runs}"
    return [
        Row("startup", f"`python -c pass`, wall ({runs})", f"{figures.python_ms:.1f} ms"),
        Row("startup", f"`npuwatch check`, 8 chips, wall ({runs})", f"{figures.check_ms:.1f} ms"),
        Row("startup", "`npuwatch check` ÷ `python -c pass`", f"{figures.check_ms / figures.python_ms:.2f}×"),
        _below(
            "startup",
            f"`check` over the interpreter (check − python − fake npu-smi {figures.npu_smi_ms:.1f} ms)",
            figures.extra_ms,
            TARGET_MS,
            "ms",
        ),
        Row(
            "startup",
            "imports alone (`npuwatch.cli`, `check_command`) over the interpreter",
            f"{figures.imports_ms:.1f} ms",
        ),
        Row(
            "startup",
            "modules imported by `check` (npuwatch's own; `python -c pass`)",
            f"{figures.check_modules} ({figures.npuwatch_modules}; {figures.python_modules})",
        ),
    ]


def backend_rows(quick: bool, durations: Durations) -> List[Row]:
    from backends import BACKENDS, FIRST_SCREEN_TARGET_S, TREE_RATIO_TARGET, first_screen_s, measure_backend

    figures = {b: measure_backend(b, "a3", durations.backend_s) for b in BACKENDS}
    over = f"16 chips (`--demo a3`), 1 s, {durations.backend_s:g} s"
    rows: List[Row] = []
    for backend, f in figures.items():
        rows += [
            Row(
                "backends",
                f"{backend}: whole-tree CPU per tick (npuwatch + worker + npu-smi runs), {over}",
                f"{f.tree_cpu_ms_per_tick:.1f} ms ({f.tree_cpu_ms_per_tick * 60 / 1000:.2f} s per minute)",
            ),
            Row("backends", f"{backend}: the sampling thread's CPU per tick", f"{f.tick_cpu_ms:.2f} ms"),
        ]
    ratio = figures["dcmi"].tree_cpu_ms_per_tick / figures["npu-smi"].tree_cpu_ms_per_tick
    rows.append(
        Row(
            "backends",
            "DCMI whole tree ÷ npu-smi whole tree",
            f"{ratio:.3f}",
            f"≤ {TREE_RATIO_TARGET:g}",
            ratio <= TREE_RATIO_TARGET,
            ratio / TREE_RATIO_TARGET,
        )
    )
    for backend, f in figures.items():
        seconds = first_screen_s(backend, "a3", f.chips)
        rows.append(
            _below("backends", f"{backend}: the dashboard's first full screen (tmux 200×50)", seconds,
                   FIRST_SCREEN_TARGET_S, "s", 2)
        )  # fmt: skip
    return rows


def dashboard_rows(quick: bool, durations: Durations) -> List[Row]:
    from dashboard import CPU_TARGET_PERCENT, RSS_TARGET_MB, measure_dashboard

    figures = measure_dashboard(durations.dashboard_s, "a3", durations.dashboard_warmup_s)
    over = f"16 chips (`--demo a3`), 1 s, {figures.seconds:.0f} s"
    return [
        _below("dashboard", f"CPU, % of one core, {over}", figures.cpu_percent, CPU_TARGET_PERCENT, "%", 2),
        _below("dashboard", f"RSS peak, {over}", figures.rss_peak_mb, RSS_TARGET_MB, "MB"),
    ]


def notebook_rows(quick: bool, durations: Durations) -> List[Row]:
    from notebook_kernel import measure_notebook

    figures = measure_notebook(durations.notebook_s, durations.notebook_idle_s, durations.notebook_warmup_s)
    return [
        Row(
            "notebook",
            f"kernel CPU, % of one core, idle with the extension loaded, {figures.idle_seconds:.0f} s",
            f"{figures.idle_cpu_percent:.2f} %",
        ),
        Row(
            "notebook",
            f"kernel CPU, % of one core, `%npuwatch --demo a3 --interval 1`, {figures.seconds:.0f} s",
            f"{figures.view_cpu_percent:.2f} %",
        ),
        Row("notebook", "kernel RSS peak with the view", f"{figures.rss_peak_mb:.1f} MB"),
        Row("notebook", "IOPub messages to the frontend", f"{figures.iopub_messages_per_s:.1f} /s"),
    ]


def exporter_rows(quick: bool, durations: Durations) -> List[Row]:
    script = HERE / "exporter.py"
    if not script.exists():
        raise RuntimeError(f"{script.relative_to(HERE.parent)} is missing")
    seconds = durations.exporter_s
    argv = [sys.executable, str(script), "--seconds", f"{seconds:g}", "--json"]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 180, check=False)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"exporter.py ran past {seconds + 180:.0f} s") from None
    if "unrecognized arguments: --json" in proc.stderr:
        raise RuntimeError("exporter.py has no --json flag yet")
    lines = proc.stdout.strip().splitlines()
    try:
        document = json.loads(lines[-1]) if lines else None
    except json.JSONDecodeError:
        document = None
    if not isinstance(document, dict) or any(key not in document for key in EXPORTER_KEYS):
        tail = (proc.stderr.strip().splitlines() or lines or ["no output"])[-1]
        raise RuntimeError(f"exporter.py printed no JSON figures (exit {proc.returncode}: {tail})")
    load = f"50 scrapers, {seconds:g} s"
    errors = int(document["errors"])
    return [
        Row(
            "exporter",
            f"requests served, {load}",
            f"{document['requests']} ({errors} errors)",
            "0 errors",
            errors == 0,
        ),
        Row("exporter", "latency p50", f"{float(document['p50_ms']):.2f} ms"),
        Row("exporter", "latency p99", f"{float(document['p99_ms']):.2f} ms"),
        Row(
            "exporter",
            "server CPU, % of one core, under load",
            f"{float(document['server_cpu_percent']):.1f} %",
        ),
        Row("exporter", "server RSS", f"{float(document['server_rss_mb']):.1f} MB"),
    ]


MEASURES: Dict[str, Callable[[bool, Durations], List[Row]]] = {
    "core": core_rows,
    "startup": startup_rows,
    "backends": backend_rows,
    "dashboard": dashboard_rows,
    "notebook": notebook_rows,
    "exporter": exporter_rows,
}


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def load_average() -> str:
    try:
        return " ".join(f"{value:.2f}" for value in os.getloadavg())
    except OSError:
        return "unknown"


def markdown(rows: Sequence[Row], header: Sequence[str]) -> str:
    lines = [*header, "", "| section | figure | value | target | met? |", "|---|---|---|---|---|"]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row.cells()) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def parse_skip(text: str) -> List[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in SECTIONS]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown section(s) {', '.join(unknown)}; choose from {', '.join(SECTIONS)}"
        )
    return names


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few seconds per phase (a smoke run)")
    parser.add_argument(
        "--skip", type=parse_skip, default=[], help=f"sections to leave out: {','.join(SECTIONS)}"
    )
    parser.add_argument("--markdown", type=Path, help="also write the table to this file")
    args = parser.parse_args(argv)
    options = list(argv if argv is not None else sys.argv[1:])
    durations = Durations.for_run(args.quick)
    started = datetime.datetime.now(datetime.timezone.utc)
    load_start = load_average()
    rows: List[Row] = []
    for section, measure in MEASURES.items():
        if section in args.skip:
            rows.append(Row(section, "(all figures)", "not measured: skipped (--skip)"))
            continue
        began = time.monotonic()
        print(f"measuring {section} …", file=sys.stderr, flush=True)
        try:
            rows += measure(args.quick, durations)
        except Exception as exc:  # one section failing must not lose the others' figures
            rows.append(Row(section, "(all figures)", f"not measured: {type(exc).__name__}: {exc}"))
        print(f"  {section} took {time.monotonic() - began:.0f} s", file=sys.stderr, flush=True)
    header = [
        f"# npuwatch overhead{' (--quick smoke run: not the published figures)' if args.quick else ''}",
        "",
        f"- date: {started.strftime('%Y-%m-%d %H:%M UTC')}",
        f"- machine: {cpu_model()}, {os.cpu_count()} cores, {platform.system()} {platform.release()}",
        f"- Python {platform.python_version()} ({sys.executable})",
        f"- load average (1, 5, 15 min): {load_start} at start, {load_average()} at end",
        f"- command: `{' '.join(['python benchmarks/run.py', *options])}`",
    ]
    text = markdown(rows, header)
    print(text, end="")
    if args.markdown is not None:
        args.markdown.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
