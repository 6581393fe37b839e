"""The timing harness: interleaved repeats, and cool-downs after sessions that keep spinning."""

from __future__ import annotations

import time

import pytest

from onnxbridge.bench import measure, measure_many, spins_between_runs
from onnxbridge.runtime._settings import SessionSettings
from onnxbridge.tune import stage_one_candidates


def test_cooldown_pauses_after_the_named_calls_only(monkeypatch: pytest.MonkeyPatch) -> None:
    order: list[str] = []
    # The pauses are recorded in call order instead of slept: what is asserted is where they
    # fall, not how long anything took.
    monkeypatch.setattr(time, "sleep", lambda seconds: order.append(f"pause {seconds}"))
    calls = {"spinner": lambda: order.append("spinner"), "next": lambda: order.append("next")}
    timings = measure_many(calls, repeat=3, min_time=1e-4, cooldown={"spinner": 0.05})
    assert set(timings) == {"spinner", "next"}
    pauses = [i for i, entry in enumerate(order) if entry.startswith("pause")]
    # One pause after the calibration and after each of the 3 repeats of "spinner".
    assert len(pauses) == 4
    assert all(order[i] == "pause 0.05" and order[i - 1] == "spinner" for i in pauses)
    order.clear()
    measure_many(calls, repeat=3, min_time=1e-4)
    assert not [entry for entry in order if entry.startswith("pause")]


def test_measure_runs_the_call_number_times_per_repeat() -> None:
    count = 0

    def call() -> None:
        nonlocal count
        count += 1

    timing = measure(call, repeat=5, number=3)
    assert count == 1 + 5 * 3  # one warm-up call, then 5 repeats of 3 calls
    assert (timing.repeat, timing.number) == (5, 3)
    assert timing.minimum <= timing.q1 <= timing.median <= timing.q3 <= timing.maximum
    assert timing.spread >= 0
    with pytest.raises(ValueError, match="repeat must be >= 1"):
        measure(call, repeat=0)


def test_measure_many_times_every_call_the_repeats_asked() -> None:
    counts = {"a": 0, "b": 0, "c": 0}
    progress: list[None] = []

    def counter(name: str):
        def call() -> None:
            counts[name] += 1

        return call

    timings = measure_many(
        {name: counter(name) for name in counts},
        repeat=4,
        min_time=1e-4,
        progress=lambda: progress.append(None),
    )
    assert list(timings) == ["a", "b", "c"]
    assert len(progress) == 3 * (4 + 1)  # each calibration and each repeat
    for name, timing in timings.items():
        assert timing.repeat == 4 and timing.number >= 1
        # A warm-up call, the calibration's calls, then 4 repeats of ``number`` calls.
        assert counts[name] >= 1 + 4 * timing.number + timing.number
        assert timing.minimum <= timing.median <= timing.maximum


@pytest.mark.parametrize(
    ("settings", "spins"),
    [
        (SessionSettings(), True),  # ONNX Runtime's defaults: a pool per core, spinning
        (SessionSettings(intra_op_num_threads=2), True),
        (SessionSettings(intra_op_num_threads=2, spin_in_runs_only=True), False),
        (SessionSettings(intra_op_num_threads=2, allow_spinning=False), False),
        (SessionSettings(intra_op_num_threads=1), False),  # no pool, nothing spins
        (
            SessionSettings(
                intra_op_num_threads=1, execution_mode="parallel", inter_op_num_threads=2
            ),
            True,
        ),
    ],
)
def test_which_sessions_spin_between_runs(settings: SessionSettings, spins: bool) -> None:
    assert spins_between_runs(settings) is spins


def test_tune_tries_spinning_only_where_there_are_threads_to_spin() -> None:
    labels = [s.label() for s in stage_one_candidates(2)]
    assert labels == [
        "1 thread, no spin, sequential, opt all",
        "2 threads, no spin, sequential, opt all",
        "2 threads, spin in runs, sequential, opt all",
        "2 threads, spin, sequential, opt all",
        "auto threads, spin, sequential, opt all",
    ]
    assert [s.label() for s in stage_one_candidates(1)] == [
        "1 thread, no spin, sequential, opt all",
        "auto threads, spin, sequential, opt all",
    ]


def test_cooldowns_name_only_the_sessions_that_spin_on() -> None:
    from onnxbridge.bench import SPIN_COOLDOWN, spin_cooldowns

    settings = {
        "default": SessionSettings(),
        "in-runs": SessionSettings(intra_op_num_threads=2, spin_in_runs_only=True),
        "one": SessionSettings(intra_op_num_threads=1),
    }
    assert spin_cooldowns(settings) == {"default": SPIN_COOLDOWN}
