"""Hostile ``libdcmi.so`` builds: a leak, a busy thread, a daemon that escapes with ``setsid``,
garbage counts and values.

One small C library, compiled here with ``cc``, misbehaves as ``HOSTILE_MODE`` says; the real
worker loads it through the real loader.  Bounds are asserted relative to the limits each test
configures (``bounds.Bounds``), never as wall-clock constants; waits are generous deadlines.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Dict, Iterator, List, Union

import psutil
import pytest

from npuwatch.probes.dcmi.bounds import Bounds, size_text
from npuwatch.probes.dcmi.source import DcmiSource
from npuwatch.probes.dcmi.worker import Worker, WorkerFailure, WorkerTick
from tests.dcmi.helpers import cc_library, gone

DEADLINE_S = 30.0
LEAK_MIB = 8  # per dcmi_get_device_health call: one a tick

HOSTILE = r"""
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

struct dcmi_hbm_info {
    unsigned long long memory_size;
    unsigned int freq;
    unsigned long long memory_usage;
    int temp;
    unsigned int bandwith_util_rate;
};

static int is(const char *wanted)
{
    const char *mode = getenv("HOSTILE_MODE");
    return mode != NULL && strstr(mode, wanted) != NULL;
}

/* fork; the child calls setsid() and forks the daemon, which closes every descriptor (so no
   pipe gives it away), adds its PID to $HOSTILE_MARK and sleeps for ever; the child exits. */
static void start_daemon(void)
{
    pid_t child = fork();
    if (child == 0) {
        setsid();
        if (fork() == 0) {
            for (int fd = 0; fd < 1024; fd++)
                close(fd);
            char text[32];
            int out = open(getenv("HOSTILE_MARK"), O_WRONLY | O_CREAT | O_APPEND, 0600);
            int n = snprintf(text, sizeof text, "%d\n", (int)getpid());
            if (out >= 0 && write(out, text, (size_t)n) == n)
                close(out);
            for (;;)
                pause();
        }
        _exit(0);
    }
    if (child > 0)
        waitpid(child, NULL, 0);
}

static void *spin(void *unused)
{
    volatile unsigned long turns = 0;
    (void)unused;
    for (;;)
        turns++;
    return NULL;
}

int dcmi_init(void)
{
    if (is("setsid"))
        start_daemon();
    if (is("busy")) {
        pthread_t thread;
        pthread_create(&thread, NULL, spin, NULL);
    }
    return 0;
}

int dcmi_get_card_list(int *card_num, int *card_list, int list_len)
{
    if (is("cards-negative")) {
        *card_num = -1;
        return 0;
    }
    if (is("cards-ff")) {  /* every byte 0xFF: the count and the IDs */
        memset(card_list, 0xFF, sizeof(int) * (size_t)list_len);
        *card_num = 0xFF;
        return 0;
    }
    card_list[0] = 0;
    *card_num = 1;
    return 0;
}

int dcmi_get_device_num_in_card(int card_id, int *device_num)
{
    (void)card_id;
    *device_num = is("devices-negative") ? -1 : is("devices-ff") ? 0x7FFFFFFF : 1;
    return 0;
}

int dcmi_get_device_health(int card_id, int device_id, unsigned int *health)
{
    (void)card_id;
    (void)device_id;
    if (is("leak")) {  /* touched, so resident, and never freed */
        size_t size = (size_t)atoi(getenv("HOSTILE_LEAK_MIB")) << 20;
        memset(malloc(size), 1, size);
    }
    if (is("hang"))
        for (;;)
            pause();
    if (is("crash"))
        raise(SIGSEGV);
    *health = 0;
    return 0;
}

int dcmi_get_device_hbm_info(int card_id, int device_id, struct dcmi_hbm_info *hbm)
{
    (void)card_id;
    (void)device_id;
    hbm->memory_size = is("garbage") ? 0x7FFFFFFFFFFFFFFFULL : 65536;
    hbm->memory_usage = is("garbage") ? 0xFFFFFFFFFFFFFFFFULL : 3000;
    hbm->freq = 1600;
    hbm->temp = 40;
    hbm->bandwith_util_rate = 5;
    return 0;
}
"""


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return cc_library(tmp_path_factory.mktemp("hostile"), "libdcmi.so", HOSTILE, "-pthread")


def _environ(tmp_path: Path, mode: str) -> Dict[str, str]:
    return {
        "HOSTILE_MODE": mode,
        "HOSTILE_MARK": str(tmp_path / "daemon.pid"),
        "HOSTILE_LEAK_MIB": str(LEAK_MIB),
    }


@contextlib.contextmanager
def _worker(
    library: Path, environ: Dict[str, str], bounds: Bounds, timeout_s: float = 10.0
) -> Iterator[Worker]:
    worker = Worker(str(library), "/", timeout_s, environ, bounds=bounds)
    try:
        yield worker
    finally:
        worker.close()


class _PeakRss:
    """The most resident memory any worker of ``worker`` held, polled from outside (psutil)."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.peak_bytes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> _PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _poll(self) -> None:
        while not self._stop.wait(0.005):
            pid = self.worker.pid
            if pid is None:
                continue
            with contextlib.suppress(psutil.Error):
                self.peak_bytes = max(self.peak_bytes, psutil.Process(pid).memory_info().rss)


# --- a leak -------------------------------------------------------------------------------------


def test_a_leaking_library_gets_its_worker_restarted_at_the_memory_bound(
    hostile: Path, tmp_path: Path
) -> None:
    limit = 128 * 2**20
    leak = LEAK_MIB * 2**20
    environ = _environ(tmp_path, "leak")
    with _worker(hostile, environ, Bounds(memory_limit_bytes=limit, idle_cpu_share=None)) as worker:
        source = DcmiSource(worker)
        failure = None
        with _PeakRss(worker) as peak:
            for _ in range(3 * limit // leak):  # three times the bound, unbounded
                reading = source.read()
                if reading.failure is not None:
                    failure = reading
                    break
        assert failure is not None and failure.failure is not None, "the leak was never stopped"
        assert failure.failure.kind == "limit"
        assert f"(limit {size_text(limit)})" in failure.failure.message
        assert "killed and restarted" in failure.failure.message
        # Checked after each tick and while waiting: over the bound by at most about one call's leak.
        assert peak.peak_bytes <= limit + 2 * leak  # (the poller may miss the moment just past it)
        # A fresh worker serves the next read, and the source says how many were started.
        again = source.read()
        assert again.reading is not None and len(again.reading.chips) == 1
        assert again.restarts is not None and again.restarts >= 1


# --- a busy thread ------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["busy", "ok"])
def test_a_library_thread_burning_a_core_gets_its_worker_restarted(
    hostile: Path, tmp_path: Path, mode: str
) -> None:
    # A small share and window, so a spinning thread is caught even on a loaded machine; a quiet
    # library under the same bounds is never restarted.
    bounds = Bounds(memory_limit_bytes=None, idle_cpu_share=0.1, cpu_window_s=1.0)
    with _worker(hostile, _environ(tmp_path, mode), bounds) as worker:
        answers: List[object] = []
        began = time.monotonic()
        while time.monotonic() - began < 4 * bounds.cpu_window_s:
            answers.append(worker.tick())
            if isinstance(answers[-1], WorkerFailure):
                break
            time.sleep(bounds.cpu_window_s / 4)  # the sampler's interval: the worker idles
        last = answers[-1]
        if mode == "ok":
            assert all(isinstance(answer, WorkerTick) for answer in answers), last
            assert worker.restarts == 0
            return
        assert isinstance(last, WorkerFailure), "the busy thread was never noticed"
        assert last.kind == "limit" and "of a CPU core" in last.message, last.message
        assert "(limit 10%)" in last.message


# --- garbage ------------------------------------------------------------------------------------


def _snapshot(library: Path, environ: Dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "npuwatch",
            "snapshot",
            "--json",
            "--backend",
            "dcmi",
            "--dcmi-lib",
            str(library),
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **environ},
    )


@pytest.mark.parametrize("mode", ["cards-negative", "cards-ff", "devices-negative", "devices-ff"])
def test_impossible_counts_give_no_negative_and_no_phantom_chips(
    hostile: Path, tmp_path: Path, mode: str
) -> None:
    done = _snapshot(hostile, _environ(tmp_path, mode))
    data = json.loads(done.stdout)
    assert data["chips"] == [], [(chip["npu_id"], chip["chip_id"]) for chip in data["chips"]]
    said = " ".join(data["warnings"])
    assert "impossible value" in said, data["warnings"]


def test_garbage_memory_values_are_null_with_a_reason_and_a_warning(hostile: Path, tmp_path: Path) -> None:
    done = _snapshot(hostile, _environ(tmp_path, "garbage"))
    data = json.loads(done.stdout)
    (chip,) = data["chips"]
    assert chip["hbm_total_mib"] is None and chip["hbm_used_mib"] is None
    assert "implausible" in chip["unavailable"]["hbm_total_mib"]
    assert chip["metric_status"]["hbm_total_mib"] == "implausible"
    assert "implausible" in chip["unavailable"]["hbm_used_mib"]
    assert any("implausible" in warning and "hbm_total_mib" in warning for warning in data["warnings"])


# --- a setsid daemon ----------------------------------------------------------------------------


def _daemons(tmp_path: Path) -> List[Union[int, psutil.Process]]:
    """Every daemon the library started (one per worker that called dcmi_init), pinned by its
    start time as soon as it wrote its PID (it pauses until killed, so it runs then): a PID
    reused later on a busy machine is not taken for it."""
    mark = tmp_path / "daemon.pid"
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, ValueError):
            lines = mark.read_text().splitlines()
            if lines and all(line.strip().isdigit() for line in lines):
                return [_pinned(int(line)) for line in lines]
        time.sleep(0.02)
    raise AssertionError("the library's daemon never started")


def _pinned(pid: int) -> Union[int, psutil.Process]:
    try:
        return psutil.Process(pid)
    except psutil.NoSuchProcess:
        return pid  # already gone


def _all_gone(daemons: List[Union[int, psutil.Process]]) -> List[int]:
    """The PIDs still there after a generous deadline (``[]`` when all are gone)."""
    return [d if isinstance(d, int) else d.pid for d in daemons if not gone(d, within_s=DEADLINE_S)]


def _kill(tmp_path: Path) -> None:
    """End the daemons a failed case left behind (those that carry this test's mark file)."""
    with contextlib.suppress(OSError, ValueError):
        for line in (tmp_path / "daemon.pid").read_text().split():
            with contextlib.suppress(psutil.Error, OSError):
                environ = psutil.Process(int(line)).environ()
                if environ.get("HOSTILE_MARK") == str(tmp_path / "daemon.pid"):
                    os.kill(int(line), signal.SIGKILL)


@pytest.mark.parametrize(
    ("command", "mode"),
    [
        (["snapshot", "--json"], "setsid"),
        (["snapshot", "--json", "--timeout", "1"], "setsid-hang"),  # its worker killed on the deadline
        (["check"], "setsid"),
    ],
)
def test_a_setsid_daemon_of_the_library_does_not_outlive_the_command(
    hostile: Path, tmp_path: Path, command: List[str], mode: str
) -> None:
    try:
        subprocess.run(
            [sys.executable, "-m", "npuwatch", *command, "--backend", "dcmi", "--dcmi-lib", str(hostile)],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, **_environ(tmp_path, mode)},
        )
        left = _all_gone(_daemons(tmp_path))
        assert not left, f"the library's setsid daemons {left} outlived npuwatch"
    finally:
        _kill(tmp_path)


@pytest.mark.parametrize("mode", ["setsid-hang", "setsid-crash"])
def test_a_setsid_daemon_dies_with_its_worker_while_npuwatch_runs(
    hostile: Path, tmp_path: Path, mode: str
) -> None:
    try:
        with _worker(hostile, _environ(tmp_path, mode), Bounds(), timeout_s=1.0) as worker:
            answer = worker.tick()  # hangs past the deadline (killed), or the library crashes
            assert isinstance(answer, WorkerFailure) and answer.kind in ("timeout", "crash"), answer
            first = _daemons(tmp_path)[0]  # the failed worker's (a fresh worker starts its own)
            assert gone(first, within_s=DEADLINE_S), f"the daemon {first} outlived its {answer.kind} worker"
        left = _all_gone(_daemons(tmp_path))
        assert not left, f"the daemons {left} outlived the closed worker"
    finally:
        _kill(tmp_path)


_PARENT = """
import sys
from npuwatch.probes.dcmi.worker import Worker
worker = Worker(sys.argv[1], "/", 60.0)
worker.tick()
"""


def test_a_setsid_daemon_dies_when_npuwatch_is_killed(hostile: Path, tmp_path: Path) -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", _PARENT, str(hostile)],
        env={**os.environ, **_environ(tmp_path, "setsid-hang")},
        start_new_session=True,
    )
    try:
        pids = _daemons(tmp_path)  # the worker is in dcmi_get_device_health, for ever
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=DEADLINE_S)
        left = _all_gone(pids)
        assert not left, f"the daemons {left} outlived a killed npuwatch"
    finally:
        if parent.poll() is None:
            parent.kill()
        parent.wait()
        _kill(tmp_path)
