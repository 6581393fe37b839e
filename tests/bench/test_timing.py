"""The timing harness: interleaved repeats, and cool-downs after sessions that keep spinning."""

from __future__ import annotations

import time

import pytest

from onnxbridge.bench import measure_many, spins_between_runs
from onnxbridge.runtime.settings import SessionSettings
from onnxbridge.tune import stage_one_candidates


def test_cooldown_pauses_after_the_named_calls_only() -> None:
    order: list[str] = []
    calls = {"spinner": lambda: order.append("spinner"), "next": lambda: order.append("next")}
    start = time.perf_counter()
    timings = measure_many(calls, repeat=3, min_time=1e-4, cooldown={"spinner": 0.05})
    elapsed = time.perf_counter() - start
    # One pause after the calibration and after each of the 3 repeats of "spinner".
    assert elapsed >= 4 * 0.05
    assert set(timings) == {"spinner", "next"}
    # The pause is not counted in the call's own time.
    assert timings["spinner"].median < 0.01
    with_none = time.perf_counter()
    measure_many(calls, repeat=3, min_time=1e-4)
    assert time.perf_counter() - with_none < elapsed


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
