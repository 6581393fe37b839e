"""Benchmark: the reference model — scikit-learn predict vs ONNX Runtime, by thread setting.

Benchmark model: "the reference model" of docs/benchmarks.md (Iris, RandomForestClassifier with 10
trees, random_state=42; ``--trees`` changes the forest size), scored on
``np.random.RandomState(0).rand(10000, 4)`` as float32. The baseline, scikit-learn ``predict``, is
measured in the same run, its repeats interleaved with those of three ONNX Runtime sessions:

- ``ort-predictor``: what ``onnxbridge.Predictor`` uses: one intra-op thread per available core,
  idle threads do not spin;
- ``ort-1``: one thread;
- ``ort-default``: ONNX Runtime's own defaults (``intra_op_num_threads = 0``, spinning on).

Each round prints per-call medians with their IQR and the ratio sklearn / ONNX Runtime; the summary
is the median ratio over rounds with its range.

    .venv/bin/python benchmarks/reference_model.py [--trees 10] [--repeat 15] [--rounds 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from onnxbridge import Predictor, convert_bundle, train_bundle
from onnxbridge.bench import measure_many


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trees", type=int, default=10, help="n_estimators of the forest")
    parser.add_argument("--repeat", type=int, default=15, help="repeats per round")
    parser.add_argument("--rounds", type=int, default=5, help="independent rounds")
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args()

    spec = f"RandomForestClassifier(n_estimators={args.trees}, random_state=42)"
    with tempfile.TemporaryDirectory() as tmp:
        bundle, result = train_bundle("iris", spec, Path(tmp) / "iris-rf")
        convert_bundle(bundle, opset=15)
        sessions = {
            "ort-predictor": Predictor(bundle.onnx_path),
            "ort-1": Predictor(bundle.onnx_path, intra_op_num_threads=1),
            "ort-default": Predictor(bundle.onnx_path, intra_op_num_threads=0, allow_spinning=True),
        }
        rows = np.random.RandomState(0).rand(args.rows, 4).astype(np.float32)
        frame = pd.DataFrame(rows, columns=list(result.estimator.feature_names_in_))
        feeds = sessions["ort-predictor"].prepare(frame)
        calls = {"sklearn": lambda: result.estimator.predict(frame)}
        for name, predictor in sessions.items():
            calls[name] = lambda s=predictor.session: s.run(None, feeds)
        rounds = [measure_many(calls, repeat=args.repeat, min_time=0.1) for _ in range(args.rounds)]

    names = [n for n in calls if n != "sklearn"]
    ratios = {n: [r["sklearn"].median / r[n].median for r in rounds] for n in names}
    payload = {
        "benchmark": f"reference model ({args.trees} trees), sklearn predict vs onnxruntime",
        "rows": args.rows,
        "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "python": platform.python_version(),
        "rounds": [{k: v.to_dict() for k, v in r.items()} for r in rounds],
        "speedup": {
            n: {"median": statistics.median(v), "min": min(v), "max": max(v)}
            for n, v in ratios.items()
        },
    }
    if args.json:
        print(json.dumps(payload, indent=2))
        return
    print(f"{payload['benchmark']}, {args.rows} rows, {payload['cores']} cores")
    print(f"{'round':>5} " + " ".join(f"{n + ' ms':>22}" for n in calls))
    for i, r in enumerate(rounds, 1):
        cells = [f"{t.median * 1e3:7.3f} [{t.q1 * 1e3:.3f}-{t.q3 * 1e3:.3f}]" for t in r.values()]
        print(f"{i:>5} " + " ".join(f"{c:>22}" for c in cells))
    for n, s in payload["speedup"].items():
        print(
            f"speedup sklearn/{n}: {s['median']:.2f}× median of {args.rounds} rounds "
            f"(range {s['min']:.2f}-{s['max']:.2f})"
        )


if __name__ == "__main__":
    main()
