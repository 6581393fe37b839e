"""Exercise 1 of the reference workflow: a LogisticRegression instead of the forest.

Train ``LogisticRegression(max_iter=200)`` on Iris (the reference 70/30 split, ``random_state=42``),
export it to ONNX and check that ONNX Runtime gives the same labels and, within tolerance, the same
probabilities as scikit-learn on the held-out rows.

    python examples/logistic_regression.py --out runs/examples

Exit code: 0 when the verdict is EQUIVALENT, 1 when it is DIVERGENT, 2 on an error.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from onnxbridge import OnnxbridgeError, convert_bundle, train_bundle, validate_bundle

MODEL = "LogisticRegression(max_iter=200)"
# The reference workflow exports with target_opset=15; keep it so results compare with the demo.
OPSET = 15


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out", type=Path, default=None, help="folder for the bundle (default: a new temp folder)"
    )
    args = parser.parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="onnxbridge-example-"))
    bundle_dir = out / "iris-logreg"

    try:
        # 1. Train: fit on 70 % of Iris and write the bundle (model.skops, holdout.parquet, card).
        #    Re-running with the same --out replaces this example's own bundle, nothing else.
        bundle, result = train_bundle("iris", MODEL, bundle_dir, overwrite=True)
        print(f"trained {MODEL}: test accuracy {result.metrics['accuracy']:.4f}")

        # 2. Convert: one float32 input "input" [N, 4], no ZipMap, checked and loaded in ORT.
        conversion = convert_bundle(bundle, opset=OPSET)
        opsets = ", ".join(f"{d or 'ai.onnx'} {v}" for d, v in conversion.metadata.opsets.items())
        print(f"converted to {conversion.path} (opsets: {opsets})")

        # 3. Validate: scikit-learn vs ONNX Runtime on the held-out rows.
        report = validate_bundle(bundle)
    except OnnxbridgeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    print(f"\ncompared on {report.n_rows} held-out rows (atol={report.atol}, rtol={report.rtol}):")
    for output in report.outputs:
        if output.kind == "labels":
            detail = f"{output.n_mismatched} of {output.n_rows} labels differ"
        else:
            detail = (
                f"max |diff| {output.max_abs_diff:.3g}, mean |diff| {output.mean_abs_diff:.3g}, "
                f"max rel diff {output.max_rel_diff:.3g}"
            )
        print(f"  {output.name:<13} {'ok' if output.ok else 'MISMATCH':<8} {detail}")
    print(f"verdict: {report.verdict}")
    print(f"bundle: {bundle.path} (report in {bundle.reports_dir / 'validation.json'})")
    return 0 if report.equivalent else 1


if __name__ == "__main__":
    sys.exit(main())
