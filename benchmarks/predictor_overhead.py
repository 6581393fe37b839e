"""Benchmark: ``Predictor.predict`` against a plain ``session.run`` on the same session.

Targets: on one row, ``Predictor.predict`` takes at least 25 % less time than
``session.run(None, feeds)``; at 10 000 rows it is within 3 % of it.

Benchmark models (docs/benchmarks.md): the reference model (Iris forest, 10 trees; rows from
``np.random.RandomState(0).rand(N, 4)`` as float32) and the benchmark forest (100 trees on the
benchmark data, scored on its second half). Both sides use the same session (one thread, no
spinning, so that the comparison is of the Python path, not of thread scheduling): ``run`` is
``session.run(None, {"input": X})`` on a ready float32 array, ``predict`` is
``predictor.predict(X)`` on the same array — which includes input checks and building the
``PredictionResult``. Repeats are interleaved (``onnxbridge.bench.measure_many``), over several
rounds; the summary is the median over rounds of the per-round ratio predict / run.

    PYTHONPATH=src .venv/bin/python benchmarks/predictor_overhead.py [--rounds 5] [--repeat 11]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from pathlib import Path

import numpy as np

from onnxbridge import Predictor, convert_estimator, train_bundle
from onnxbridge.bench import measure_many
from onnxbridge.runtime import SessionSettings


def _models(tmp: Path) -> dict[str, tuple[Path, np.ndarray]]:
    from sklearn.datasets import make_classification
    from sklearn.ensemble import RandomForestClassifier

    from onnxbridge import convert_bundle

    bundle, _ = train_bundle(
        "iris", "RandomForestClassifier(n_estimators=10, random_state=42)", tmp / "iris"
    )
    convert_bundle(bundle, opset=15)
    iris_rows = np.random.RandomState(0).rand(10_000, 4).astype(np.float32)
    X, y = make_classification(
        n_samples=20_000, n_features=28, n_informative=15, n_classes=2, random_state=0
    )
    forest = RandomForestClassifier(n_estimators=100, random_state=0).fit(X[:10_000], y[:10_000])
    path = convert_estimator(forest, X[:100]).save(tmp / "forest.onnx")
    return {
        "reference model (10 trees)": (bundle.onnx_path, iris_rows),
        "benchmark forest (100 trees)": (path, X[10_000:].astype(np.float32)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=11)
    parser.add_argument("--min-time", type=float, default=0.05)
    parser.add_argument("--sizes", default="1,10,100,10000")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(
        f"Predictor.predict vs session.run on the same session (1 thread, no spin); "
        f"{args.rounds} rounds x {args.repeat} interleaved repeats; "
        f"cores {len(os.sched_getaffinity(0))}, load {os.getloadavg()[0]:.2f}"
    )
    print(f"{'model':<30}{'rows':>7}{'run':>12}{'predict':>12}{'predict/run':>14}  range")
    with tempfile.TemporaryDirectory() as tmp:
        for name, (path, rows) in _models(Path(tmp)).items():
            predictor = Predictor(path, settings=SessionSettings(1, allow_spinning=False))
            session = predictor.session
            for n in sizes:
                X = np.ascontiguousarray(rows[np.arange(n) % len(rows)])
                feeds = {session.get_inputs()[0].name: X}
                calls = {
                    "run": lambda s=session, f=feeds: s.run(None, f),
                    "predict": lambda p=predictor, X=X: p.predict(X),
                }
                rounds = [
                    measure_many(calls, repeat=args.repeat, min_time=args.min_time)
                    for _ in range(args.rounds)
                ]
                ratios = [r["predict"].median / r["run"].median for r in rounds]
                run = statistics.median(r["run"].median for r in rounds)
                ours = statistics.median(r["predict"].median for r in rounds)
                print(
                    f"{name:<30}{n:>7}{run * 1e6:>10.2f}µs{ours * 1e6:>10.2f}µs"
                    f"{statistics.median(ratios):>14.3f}  {min(ratios):.3f}-{max(ratios):.3f}"
                )
    print("predict/run below 1: Predictor.predict is faster than a plain session.run")


if __name__ == "__main__":
    main()
