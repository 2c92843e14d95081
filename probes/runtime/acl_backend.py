"""Provides run_acl(): the self-test through pyACL; every resource released in reverse order, failure or not.

The steps are AclSession's (set-up and cleanup, ``acl_session``) and the measurements'
(``acl_measure``); this module only runs them in order: backend → measure → session.
"""

from __future__ import annotations

from typing import Any, Mapping

from npuwatch.probes.runtime.acl_measure import copy_d2d, copy_d2h, copy_h2d, event_timing, kernel_add
from npuwatch.probes.runtime.acl_session import AclSession
from npuwatch.probes.runtime.plan import Plan
from npuwatch.probes.runtime.protocol import MAIN_STEPS, Step
from npuwatch.probes.runtime.recorder import Recorder, RunAbortedError


def run_acl(acl: Any, device: int, plan: Plan, rec: Recorder, environ: Mapping[str, str]) -> None:
    """Every step after import on ``device``; cleanup always runs last."""
    session = AclSession(acl, rec, plan, environ)
    soc = getattr(acl, "get_soc_name", None)
    session.soc_name = soc() if soc is not None else None
    try:
        with rec.step(Step.INIT) as out:
            session.init(out)
        with rec.step(Step.DEVICE_COUNT) as out:
            session.device_count(device, out)
        with rec.step(Step.SET_DEVICE) as out:
            session.set_device(device, out)
        with rec.step(Step.CONTEXT_STREAM) as out:
            session.context_stream(device, out)
        free = 0
        with rec.step(Step.MEMORY_INFO) as out:
            free = session.memory_info(out)
        with rec.step(Step.ALLOCATE) as out:
            session.allocate(free, out)
        with rec.step(Step.COPY_H2D) as out:
            copy_h2d(session, out)
        with rec.step(Step.COPY_D2H) as out:
            copy_d2h(session, out)
        with rec.step(Step.COPY_D2D) as out:
            copy_d2d(session, out)
        with rec.step(Step.KERNEL, fatal=False) as out:
            kernel_add(session, out)
        with rec.step(Step.EVENTS, fatal=False) as out:
            event_timing(session, out)
    except RunAbortedError as stop:
        rec.not_run(MAIN_STEPS, because=stop.step)
    finally:
        with rec.step(Step.CLEANUP, fatal=False) as out:
            session.cleanup(out)
