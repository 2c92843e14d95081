"""collect(): how a child's events and exit become a DeviceRun, for every way a child can end."""

from __future__ import annotations

import signal

from npuwatch.probes.runtime.protocol import EventKind, StepStatus, decode_events, encode_event
from npuwatch.selftest.collect import collect


def _lines(*events):
    return "".join(encode_event(EventKind(kind), fields) for kind, fields in events)


HELLO = ("hello", {"protocol": 1, "pid": 7})
END_IMPORT = (
    "end",
    {"step": "import", "status": "pass", "duration_s": 0.01, "detail": "pyACL", "metrics": {}},
)


def _run(text, **how):
    options = {"exit_code": 0, "timed_out": False, "duration_s": 5.0, "timeout_s": 60.0, "stderr": ""}
    options.update(how)
    return collect(0, decode_events(text), **options)


def test_noise_and_a_line_cut_by_the_kill_are_ignored():
    text = "CANN says hello\n" + _lines(HELLO, END_IMPORT) + '@npuwatch-selftest {"event":"start","st'
    events = decode_events(text)
    assert [event["event"] for event in events] == ["hello", "end"]


def test_crash_inside_a_step_fails_that_step():
    text = _lines(HELLO, END_IMPORT, ("start", {"step": "init", "t": 1.0}), ("call", {"name": "acl.init"}))
    run = _run(text, exit_code=-signal.SIGSEGV, stderr="Fatal Python error: Segmentation fault\n")
    result = run.steps[-1]
    assert result.status is StepStatus.FAIL
    assert result.detail == "the self-test process died (signal SIGSEGV) in acl.init during this step"
    assert run.hung_in is None and "Segmentation fault" in run.stderr_tail


def test_a_child_that_never_started_is_an_npuwatch_error():
    run = _run("", exit_code=1, stderr="Traceback …\nModuleNotFoundError: No module named 'npuwatch'\n")
    assert run.status is StepStatus.ERROR
    assert "did not start (exit status 1): ModuleNotFoundError" in run.problem


def test_timeout_before_any_step():
    run = _run(_lines(HELLO), exit_code=None, timed_out=True)
    assert run.status is StepStatus.FAIL and "no answer within 60 s between steps" in run.problem


def test_crash_after_the_last_step_only_warns():
    text = _lines(HELLO, END_IMPORT, ("done", {}))
    run = _run(text, exit_code=-signal.SIGABRT)
    assert run.status is StepStatus.WARN and "SIGABRT" in run.problem


def test_another_protocol_version_is_refused():
    run = _run(_lines(("hello", {"protocol": 99}), END_IMPORT, ("done", {})))
    assert run.status is StepStatus.ERROR and "protocol 99" in run.problem


def test_error_without_code_keeps_the_hint_and_torch_id():
    end = {
        "step": "allocate",
        "status": "fail",
        "duration_s": 0.1,
        "detail": "x",
        "error": {
            "code": None,
            "call": "torch.empty",
            "message": "ERR00006 PTA memory error",
            "hint": "free it",
        },
    }
    run = _run(_lines(HELLO, END_IMPORT, ("end", end), ("done", {})))
    error = run.steps[-1].error
    assert error.fix == "free it" and error.meaning == "ERR00006: PTA: memory error"
