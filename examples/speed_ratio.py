"""Exercise 2 of the reference workflow: how the speed ratio changes with the number of trees.

For ``RandomForestClassifier(n_estimators=N, random_state=42)`` with N = 10, 50 and 100, trained on
Iris as in the reference workflow and exported to ONNX, time scikit-learn ``predict`` against the
ONNX Runtime session on the reference workflow's scoring data (the rows ``onnxbridge demo`` times):
10 000 rows of ``np.random.RandomState(0).rand(10000, 4)`` as float32.

Times are per call (one call scores all 10 000 rows): the median over ``--repeat`` repeats, with
the interquartile range (IQR) as the spread. The ratio is scikit-learn's median over ONNX
Runtime's: above 1 ONNX Runtime was faster in this run, below 1 slower. It is a measurement on this
machine, not a promise; scikit-learn's forest predicts on one thread here (``n_jobs=None``), ONNX
Runtime uses its default thread pool.

    python examples/speed_ratio.py --out runs/examples [--repeat 5] [--json]

Exit code: 0 when every exported forest is EQUIVALENT to its source, 1 if one is not, 2 on an error.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from onnxbridge import OnnxbridgeError, Predictor, convert_bundle, train_bundle, validate_bundle
from onnxbridge.bench import compare_speed

TREE_COUNTS = (10, 50, 100)
OPSET = 15  # the reference workflow's target_opset
SCORING_ROWS = 10_000


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def measure_forest(n_trees: int, out: Path, rows: np.ndarray, repeat: int) -> dict[str, Any]:
    """Train, convert, validate and time one forest; returns its JSON-ready result."""
    model = f"RandomForestClassifier(n_estimators={n_trees}, random_state=42)"
    bundle_dir = out / f"iris-rf{n_trees}"
    # Re-running with the same --out replaces this example's own bundles, nothing else.
    bundle, _ = train_bundle("iris", model, bundle_dir, overwrite=True)
    convert_bundle(bundle, opset=OPSET)
    # A speed ratio only means something if the ONNX model computes the same thing.
    verdict = validate_bundle(bundle).verdict
    speed = compare_speed(bundle.load_estimator(), Predictor(bundle.onnx_path), rows, repeat=repeat)
    return {
        "trees": n_trees,
        "model": model,
        "bundle": str(bundle.path),
        "verdict": verdict,
        "rows": speed.rows,
        # Seconds per call: median, quartiles, min, max, repeats and calls per repeat.
        "sklearn": speed.sklearn.to_dict(),
        "onnxruntime": speed.onnxruntime.to_dict(),
        "ratio": speed.speedup,  # sklearn median / onnxruntime median
    }


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f}"


def print_table(results: list[dict[str, Any]], repeat: int) -> None:
    print(f"\nper call on {SCORING_ROWS} rows, median of {repeat} repeats [IQR], in ms:")
    header = f"{'trees':>5}  {'sklearn ms/call':>26}  {'onnxruntime ms/call':>26}  {'ratio':>6}"
    print(header + "  verdict")
    print("-" * (len(header) + 9))
    for r in results:
        cells = []
        for side in ("sklearn", "onnxruntime"):
            t = r[side]
            cells.append(f"{ms(t['median'])} [{ms(t['q1'])}-{ms(t['q3'])}]")
        print(
            f"{r['trees']:>5}  {cells[0]:>26}  {cells[1]:>26}  {r['ratio']:>6.2f}  {r['verdict']}"
        )
    print("ratio = sklearn median / onnxruntime median (above 1: onnxruntime faster in this run)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out", type=Path, default=None, help="folder for the bundles (default: a new temp folder)"
    )
    parser.add_argument("--repeat", type=positive_int, default=5, help="timing repeats (default 5)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON only")
    args = parser.parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="onnxbridge-example-"))

    # The reference-model scoring data: the same 10 000 rows for every forest.
    rows = np.random.RandomState(0).rand(SCORING_ROWS, 4).astype(np.float32)

    results = []
    try:
        for n_trees in TREE_COUNTS:
            if not args.json:
                print(f"training, converting and timing {n_trees} trees ...", flush=True)
            results.append(measure_forest(n_trees, out, rows, args.repeat))
    except OnnxbridgeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    if args.json:
        print(json.dumps({"repeat": args.repeat, "results": results}, indent=2))
    else:
        print_table(results, args.repeat)
        print(f"bundles in {out}")
    return 0 if all(r["verdict"] == "EQUIVALENT" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
