"""Benchmark: the reference model (Iris forest, 10 trees) — scikit-learn predict vs ONNX Runtime.

Benchmark model: "the reference model" of shared/DESIGN.md, scored on
``np.random.RandomState(0).rand(10000, 4)`` as float32. The baseline (scikit-learn ``predict``) is
measured in the same run, interleaved with ONNX Runtime, and the ratio is printed.

    .venv/bin/python benchmarks/reference_model.py [--repeat 15] [--rounds 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
from pathlib import Path

import numpy as np

from onnxbridge import Predictor, compare_speed, convert_bundle, train_bundle

SPEC = "RandomForestClassifier(n_estimators=10, random_state=42)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15, help="repeats per round")
    parser.add_argument("--rounds", type=int, default=3, help="independent rounds")
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        bundle, result = train_bundle("iris", SPEC, Path(tmp) / "iris-rf")
        convert_bundle(bundle, opset=15)
        predictor = Predictor(bundle.onnx_path)
        rows = np.random.RandomState(0).rand(args.rows, 4).astype(np.float32)
        rounds = [
            compare_speed(result.estimator, predictor, rows, repeat=args.repeat, min_time=0.1)
            for _ in range(args.rounds)
        ]
    ratios = [r.speedup for r in rounds]
    payload = {
        "benchmark": "reference model, sklearn predict vs onnxruntime",
        "rows": args.rows,
        "machine": f"{platform.machine()}, {platform.python_version()}",
        "rounds": [r.to_dict() for r in rounds],
        "speedup_median": statistics.median(ratios),
        "speedup_min": min(ratios),
        "speedup_max": max(ratios),
    }
    if args.json:
        print(json.dumps(payload, indent=2))
        return
    header = ("round", "sklearn ms", "IQR", "onnxruntime ms", "IQR", "ratio")
    print("{:>5} {:>11} {:>15} {:>15} {:>15} {:>6}".format(*header))
    for i, r in enumerate(rounds, 1):
        sk, ox = r.sklearn, r.onnxruntime
        print(
            f"{i:>5} {sk.median * 1e3:>11.3f} {sk.q1 * 1e3:>7.3f}-{sk.q3 * 1e3:<7.3f} "
            f"{ox.median * 1e3:>15.3f} {ox.q1 * 1e3:>7.3f}-{ox.q3 * 1e3:<7.3f} {r.speedup:>6.2f}"
        )
    print(
        f"speedup (sklearn / onnxruntime, median of rounds): {payload['speedup_median']:.2f}× "
        f"(range {payload['speedup_min']:.2f}-{payload['speedup_max']:.2f})"
    )


if __name__ == "__main__":
    main()
