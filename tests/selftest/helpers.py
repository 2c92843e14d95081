"""Helpers for self-test tests: a child environment with the fake runtimes, ledgers, process-group checks."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Dict, List

from tests.conftest import REPO

FAKES = REPO / "tests" / "fakes" / "runtime"

#: Resource kinds a clean run opens and must close (executors are consumed by the kernel itself).
BALANCED_KINDS = (
    "runtime",
    "device",
    "context",
    "stream",
    "event",
    "device_mem",
    "host_mem",
    "tensor",
    "scalar",
)


def fake_env(ledger_dir: Path, *, fakes: bool = True, **extra: str) -> Dict[str, str]:
    """This process's environment plus the fake runtimes on PYTHONPATH and a ledger folder."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NPUWATCH_FAKE_", "ASCEND_"))}
    env.pop("PYTHONPATH", None)
    if fakes:
        env["PYTHONPATH"] = str(FAKES)
    ledger_dir.mkdir(parents=True, exist_ok=True)
    env["NPUWATCH_FAKE_LEDGER_DIR"] = str(ledger_dir)
    env["XDG_RUNTIME_DIR"] = str(ledger_dir)  # pause markers stay inside the test's folder
    env.update(extra)
    return env


def ledgers(ledger_dir: Path) -> List[dict]:
    """Every ledger the fake runtimes wrote, in process order."""
    found = [json.loads(path.read_text()) for path in ledger_dir.glob("ledger-*.json")]
    return sorted(found, key=lambda ledger: ledger["pid"])


def unbalanced(ledger: dict, kinds=BALANCED_KINDS) -> Dict[str, List[str]]:
    """The resources a process left open, by kind ({} when cleanup was complete)."""
    return {kind: live for kind, live in ledger["live"].items() if live and kind in kinds}


def child_pids(ledger_dir: Path) -> List[int]:
    """The PIDs of the self-test children that imported a fake runtime (each leads its own group)."""
    return [int(path.name.split("-", 1)[1]) for path in ledger_dir.glob("pid-*")]


def live_members(pgid: int) -> List[int]:
    """Processes of group ``pgid`` that are still running (zombies are dead and do not count)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        state, group = fields[0], int(fields[2])
        if group == pgid and state not in ("Z", "X"):
            members.append(int(entry.name))
    return members
