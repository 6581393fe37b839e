"""Benchmark: ONNX Runtime on tree ensembles as converted, and with the trees in blocks.

Models (docs/benchmarks.md, ``random_state=0``, fitted on the first 10 000 rows of
``make_classification(20000, 28, n_informative=15, random_state=0)``, scored on the rest, tiled
for larger batches): RandomForestClassifier with 10 and 100 trees, ExtraTreesClassifier(100),
GradientBoostingClassifier(n_estimators=300, max_depth=5) — and whatever of them has more than
one block of nodes. Each is converted by ``convert_estimator`` (float32) and opened twice per
thread count, as it is and with ``tree_block_nodes``
(``onnxbridge.runtime._rewrites.tree_blocks``); the two sessions' ``session.run`` are timed with
interleaved repeats (``onnxbridge.bench.measure_many``) and the outputs compared (labels equal,
probabilities within 1e-6).

    PYTHONPATH=src .venv/bin/python benchmarks/tree_blocks.py [--sizes 1,100,1000,10000,100000]
        [--threads 1,2] [--repeat 7] [--block-nodes 16384]
"""

from __future__ import annotations

import argparse
import os

import numpy as np

from onnxbridge import convert_estimator
from onnxbridge.bench import measure_many
from onnxbridge.runtime import SessionSettings
from onnxbridge.runtime._rewrites import blocked_model
from onnxbridge.runtime._rewrites.tree_blocks import DEFAULT_TREE_BLOCK_NODES
from onnxbridge.runtime._router import open_ort_session


def _models() -> dict[str, object]:
    from sklearn.ensemble import (
        ExtraTreesClassifier,
        GradientBoostingClassifier,
        RandomForestClassifier,
    )

    return {
        "rf10": RandomForestClassifier(n_estimators=10, random_state=0),
        "rf100": RandomForestClassifier(n_estimators=100, random_state=0),
        "et100": ExtraTreesClassifier(n_estimators=100, random_state=0),
        "gb300": GradientBoostingClassifier(n_estimators=300, max_depth=5, random_state=0),
    }


def main() -> None:
    from sklearn.datasets import make_classification

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,100,1000,10000,100000")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--min-time", type=float, default=0.05)
    parser.add_argument("--block-nodes", type=int, default=DEFAULT_TREE_BLOCK_NODES)
    parser.add_argument("--models", default=",".join(_models()))
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    threads = [int(t) for t in args.threads.split(",")]
    X, y = make_classification(
        n_samples=20_000, n_features=28, n_informative=15, n_classes=2, random_state=0
    )
    X = X.astype(np.float32)
    print(
        f"trees as converted vs in blocks of {args.block_nodes} nodes; session.run, interleaved "
        f"x{args.repeat}; cores {len(os.sched_getaffinity(0))}, load {os.getloadavg()[0]:.2f}"
    )
    print(f"{'model':<8}{'nodes':>8}{'blocks':>7}{'thr':>4}{'rows':>8}{'as is':>12}"
          f"{'blocks':>12}{'speed-up':>10}  IQR as is / blocks")  # fmt: skip
    wanted = [m for m in args.models.split(",") if m]
    for name, estimator in _models().items():
        if name not in wanted:
            continue
        estimator.fit(X[:10_000], y[:10_000])  # type: ignore[attr-defined]
        model = convert_estimator(estimator, X[:100], precision="float").model
        plain = model.SerializeToString()
        blocked = blocked_model(plain, args.block_nodes)
        nodes = sum(
            len(a.ints)
            for n in model.graph.node
            for a in n.attribute
            if "TreeEnsemble" in n.op_type and a.name == "nodes_treeids"
        )
        if blocked is None:
            print(f"{name:<8}{nodes:>8}      1  (one block: nothing to compare)")
            continue
        import onnx

        n_blocks = sum(
            n.op_type == "TreeEnsembleRegressor" for n in onnx.load_from_string(blocked).graph.node
        )
        for t in threads:
            as_is = open_ort_session(plain, SessionSettings(t, allow_spinning=False))
            split = open_ort_session(
                plain, SessionSettings(t, allow_spinning=False, tree_block_nodes=args.block_nodes)
            )
            feed = as_is.get_inputs()[0].name
            check = {feed: X[10_000:]}
            a, b = as_is.run(None, check), split.run(None, check)
            assert (a[0] == b[0]).all() and np.abs(a[1] - b[1]).max() <= 1e-6, name
            for rows in sizes:
                batch = {feed: np.ascontiguousarray(X[10_000 + np.arange(rows) % 10_000])}
                timings = measure_many(
                    {
                        "as is": lambda s=as_is, f=batch: s.run(None, f),
                        "blocks": lambda s=split, f=batch: s.run(None, f),
                    },
                    repeat=args.repeat,
                    min_time=args.min_time,
                )
                p, q = timings["as is"], timings["blocks"]
                print(
                    f"{name:<8}{nodes:>8}{n_blocks:>7}{t:>4}{rows:>8}"
                    f"{p.median * 1e3:>10.3f}ms{q.median * 1e3:>10.3f}ms"
                    f"{p.median / q.median:>9.2f}x  "
                    f"{p.spread:.0%} / {q.spread:.0%}"
                )
    print("speed-up above 1: the blocked graph is faster")


if __name__ == "__main__":
    main()
