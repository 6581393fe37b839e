"""Benchmark: how a spinning ONNX Runtime session slows the next session timed on the same cores.

Benchmark model: the benchmark forest of docs/benchmarks.md (``RandomForestClassifier(
n_estimators=100, random_state=0)`` fitted on the first 10 000 rows of the benchmark data), scored
on 100 of the other rows per call (the size at which threads spin most between calls).

Sessions of the same file, all with two intra-op threads unless said otherwise: ``spin`` and
``spin-b`` (identical: ONNX Runtime's default spinning), ``spin-in-runs``
(``session.force_spinning_stop``: onnxbridge's ``spin_in_runs_only``), ``no-spin``, and
``1-thread``. Each is timed alone first (``measure_many`` with that session only, a pause after
it); then all of them interleaved in that order with no pause, and with
``onnxbridge.bench.SPIN_COOLDOWN`` seconds after each spinning one (``cooldown``, what ``tune``
and the benchmarks do). Medians per call over ``--repeat``
repeats; the ratio is interleaved / alone (above 1: slowed by its neighbour).

    PYTHONPATH=src .venv/bin/python benchmarks/spin_neighbours.py [--repeat 7] [--rows 100]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from onnxbridge import convert_estimator
from onnxbridge.bench import SPIN_COOLDOWN, measure_many, spin_cooldowns
from onnxbridge.runtime import SessionSettings
from onnxbridge.runtime._router import open_ort_session

SESSIONS = {
    "spin": SessionSettings(intra_op_num_threads=2),
    "spin-b": SessionSettings(intra_op_num_threads=2),
    "spin-in-runs": SessionSettings(intra_op_num_threads=2, spin_in_runs_only=True),
    "no-spin": SessionSettings(intra_op_num_threads=2, allow_spinning=False),
    "1-thread": SessionSettings(intra_op_num_threads=1, allow_spinning=False),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--rows", type=int, default=100)
    parser.add_argument("--min-time", type=float, default=0.05)
    args = parser.parse_args()
    from sklearn.datasets import make_classification
    from sklearn.ensemble import RandomForestClassifier

    X, y = make_classification(
        n_samples=20_000, n_features=28, n_informative=15, n_classes=2, random_state=0
    )
    forest = RandomForestClassifier(n_estimators=100, random_state=0).fit(X[:10_000], y[:10_000])
    feeds = {"input": np.ascontiguousarray(X[10_000 : 10_000 + args.rows], dtype=np.float32)}
    with tempfile.TemporaryDirectory() as tmp:
        path = convert_estimator(forest, X[:100]).save(Path(tmp) / "forest.onnx")
        sessions = {k: open_ort_session(path, s) for k, s in SESSIONS.items()}
        calls = {k: (lambda s=s: s.run(None, feeds)) for k, s in sessions.items()}
        alone = {}
        for k, fn in calls.items():
            alone[k] = measure_many({k: fn}, repeat=args.repeat, min_time=args.min_time)[k]
            time.sleep(SPIN_COOLDOWN)  # its threads may spin on: let them stop first
        together = measure_many(calls, repeat=args.repeat, min_time=args.min_time)
        cooled = measure_many(
            calls, repeat=args.repeat, min_time=args.min_time, cooldown=spin_cooldowns(SESSIONS)
        )
    print(
        f"benchmark forest, {args.rows} rows per call, {args.repeat} repeats; "
        f"cores {len(os.sched_getaffinity(0))}, load {os.getloadavg()[0]:.2f}"
    )
    head = f"{'session':<14}{'alone':>10}{'interleaved':>14}{'ratio':>7}"
    print(f"{head}{'cooled down':>14}{'ratio':>7}")
    for k in calls:
        a, t, c = alone[k].median, together[k].median, cooled[k].median
        line = f"{k:<14}{a * 1e3:>8.3f}ms{t * 1e3:>12.3f}ms{t / a:>7.2f}"
        print(f"{line}{c * 1e3:>12.3f}ms{c / a:>7.2f}")
    print("ratio above 1: slower than alone, i.e. slowed by the session timed before it")


if __name__ == "__main__":
    main()
