"""The alert tracker counts samples (distinct snapshot times), not calls (issue 28, Deliver 4).

The dashboard and the notebook call ``AlertTracker.update`` once per refresh; a replay slower
than its recording shows one sample on several refreshes.  The same recording must raise the
same alerts however often it is looked at.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import List, Sequence, Tuple

import pytest

from npuwatch.alerts import AlertTracker, Hysteresis
from npuwatch.model import Snapshot
from npuwatch.recording import RecordingWriter, read_recording
from npuwatch.replay import ReplaySampler
from tests.core.test_alerts import chip, snap

T0 = datetime(2026, 3, 1, 8, 0, tzinfo=timezone.utc)
#: One chip's temperature a second apart: a one-sample spike (never an alert), then a hot spell
#: of four samples (raised after two, held through two cool ones, cleared at the third).
TEMPERATURES = (45, 45, 95, 45, 45, 95, 95, 95, 95, 45, 45, 45, 45, 45)

Sequence_ = List[Tuple[str, Tuple[str, ...]]]


def samples(temperatures: Sequence[int] = TEMPERATURES, step_s: float = 1.0) -> List[Snapshot]:
    return [
        replace(snap([chip(0, temperature_c=t)]), taken_at=T0 + timedelta(seconds=i * step_s))
        for i, t in enumerate(temperatures)
    ]


def shown(tracker: AlertTracker, snapshot: Snapshot) -> Tuple[str, ...]:
    return tuple(a.message for a in tracker.update(snapshot))


def once_per_sample(snapshots: Sequence[Snapshot]) -> Sequence_:
    tracker = AlertTracker()
    return [(s.taken_at.isoformat(), shown(tracker, s)) for s in snapshots]


def test_a_sample_seen_twice_counts_once():
    tracker = AlertTracker()
    twice = []
    for snapshot in samples():
        shown(tracker, snapshot)  # a refresh before the next sample
        twice.append((snapshot.taken_at.isoformat(), shown(tracker, replace(snapshot, source="again"))))
    assert twice == once_per_sample(samples())


def test_the_spike_never_shows_and_the_spell_shows_for_its_samples_and_the_clear():
    messages = [alerts for _, alerts in once_per_sample(samples())]
    hot = [i for i, alerts in enumerate(messages) if alerts]
    assert hot == [6, 7, 8, 9, 10], messages  # raised at the spell's 2nd sample, cleared at the 3rd cool one
    assert all(m.startswith("NPU 0 ") and "95" in m for m in messages[6])


def replayed(path: Path, speed: float) -> Sequence_:
    """The alert line at each recorded sample, as the dashboard refreshing a replay shows it."""
    clock = [0.0]
    sampler = ReplaySampler(read_recording(path), speed=speed, clock=lambda: clock[0])
    tracker = AlertTracker()
    seen: Sequence_ = []
    refreshes = 0
    while True:
        snapshot = sampler.sample()
        alerts = shown(tracker, snapshot)
        refreshes += 1
        stamp = snapshot.taken_at.isoformat()
        if not seen or seen[-1][0] != stamp:
            seen.append((stamp, alerts))
        assert seen[-1] == (stamp, alerts), "a sample shown again shows what it showed"
        if sampler.finished:
            break
        clock[0] += sampler.interval_s
    assert refreshes >= len(seen)
    return seen


@pytest.mark.parametrize("speed", [0.5, 2.0])
def test_a_replay_raises_the_alerts_a_live_run_would_at_any_speed(tmp_path, speed):
    path = tmp_path / "spell.ndjson"
    with RecordingWriter(path) as writer:
        for snapshot in samples():
            writer.write(snapshot)
    live = once_per_sample(read_recording(path).snapshots)
    assert replayed(path, speed) == live


def test_time_going_back_starts_afresh():
    tracker = AlertTracker()
    spell = samples((95, 95, 95))
    for snapshot in spell:
        assert shown(tracker, snapshot) or snapshot is spell[0]
    earlier = replace(samples((45,))[0], taken_at=T0 - timedelta(seconds=10))
    assert shown(tracker, earlier) == (), "a replay seeking back does not keep the later alerts"


def test_hysteresis_in_seconds_of_samples():
    # Fast sampling: five samples 0.2 s apart are not two seconds of a condition.
    tracker = AlertTracker(hysteresis=Hysteresis(raise_after=2, raise_after_s=2.0))
    hot = [shown(tracker, s) for s in samples((95,) * 12, step_s=0.2)]
    assert next(i for i, alerts in enumerate(hot) if alerts) == 10  # 2.0 s after the first hot one
    cooling = samples((45,) * 12, step_s=0.2)
    tracker2 = AlertTracker(hysteresis=Hysteresis(clear_after=3, clear_after_s=1.0))
    for s in samples((95, 95), step_s=0.2):
        shown(tracker2, s)
    later = [shown(tracker2, replace(s, taken_at=s.taken_at + timedelta(seconds=1))) for s in cooling]
    assert [bool(a) for a in later].index(False) == 5  # 1.0 s of cool samples, not 0.4 s


@pytest.mark.parametrize("field", ["raise_after_s", "clear_after_s"])
@pytest.mark.parametrize("value", [-1.0, float("nan")])
def test_negative_or_nan_seconds_are_refused(field, value):
    with pytest.raises(ValueError, match="at least 0"):
        Hysteresis(**{field: value})
