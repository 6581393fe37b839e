"""Exercise 3 of the reference workflow: a pipeline, and the ONNX operators it becomes.

Train ``StandardScaler() | LogisticRegression(max_iter=200)`` on Iris (the reference 70/30 split,
``random_state=42``), export the whole pipeline to one ONNX graph, list the operators in that graph
with their counts, point out what the StandardScaler became, and check that ONNX Runtime gives
the same results as scikit-learn on the held-out rows.

skl2onnx writes the StandardScaler as an ``ai.onnx.ml.Scaler`` node; onnxbridge then folds that
scaling into the ``LinearClassifier``'s coefficients (one pass over the rows less per call, see
docs/convert.md "Scalers folded into linear models") and says so in the conversion's notes, so
the graph has no Scaler node (``convert_bundle(..., fold=False)`` or ``onnxbridge convert
--no-fold`` keeps it). The example reports whichever happened.

    python examples/pipeline_operators.py --out runs/examples

Exit code: 0 when the StandardScaler is accounted for (a Scaler node, or folded into the linear
model) and the verdict is EQUIVALENT, 1 otherwise, 2 on an error.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from onnxbridge import (
    OnnxbridgeError,
    convert_bundle,
    inspect_model,
    train_bundle,
    validate_bundle,
)

MODEL = "StandardScaler() | LogisticRegression(max_iter=200)"
OPSET = 15  # the reference workflow's target_opset
# skl2onnx turns a StandardScaler into the Scaler operator of the ai.onnx.ml domain
# (y = (x - offset) * scale); inspect_model names operators "<domain>.<op_type>".
SCALER_OP = "ai.onnx.ml.Scaler"
LINEAR_OP = "ai.onnx.ml.LinearClassifier"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out", type=Path, default=None, help="folder for the bundle (default: a new temp folder)"
    )
    args = parser.parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="onnxbridge-example-"))
    bundle_dir = out / "iris-scaler-logreg"

    try:
        # Train and convert exactly as for a single estimator: the pipeline is one model.
        # Re-running with the same --out replaces this example's own bundle, nothing else.
        bundle, result = train_bundle("iris", MODEL, bundle_dir, overwrite=True)
        print(f"trained {MODEL}: test accuracy {result.metrics['accuracy']:.4f}")
        conversion = convert_bundle(bundle, opset=OPSET)
        print(f"converted to {conversion.path}")

        # Inspect the .onnx file itself: what a deployment would actually run.
        summary = inspect_model(bundle.onnx_path)
        report = validate_bundle(bundle)
    except OnnxbridgeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    inputs = ", ".join(f"{v.name}: {v.type}" for v in summary.inputs)
    outputs = ", ".join(f"{v.name}: {v.type}" for v in summary.outputs)
    opsets = ", ".join(f"{domain} {version}" for domain, version in summary.opsets.items())
    print(f"\ninputs:  {inputs}\noutputs: {outputs}\nopsets:  {opsets}")

    folded = [note for note in conversion.notes if note.startswith("folded the scaling")]
    print(f"\n{summary.node_count} nodes, by operator (op type, count):")
    for op, count in summary.operators.items():
        note = ""
        if op == SCALER_OP:
            note = "   <- the StandardScaler step"
        elif op == LINEAR_OP and folded:
            note = "   <- LogisticRegression, with the StandardScaler folded into its coefficients"
        print(f"  {op:<36} {count}{note}")
    has_scaler = SCALER_OP in summary.operators or (bool(folded) and LINEAR_OP in summary.operators)
    if folded:
        print(f"conversion note: {folded[0]}")
    elif not has_scaler:
        print(f"no {SCALER_OP} node: the StandardScaler step was exported another way")

    print(f"\ncompared on {report.n_rows} held-out rows:")
    for output in report.outputs:
        if output.kind == "labels":
            detail = f"{output.n_mismatched} of {output.n_rows} labels differ"
        else:
            detail = f"max |diff| {output.max_abs_diff:.3g}"
        print(f"  {output.name:<13} {detail}")
    print(f"verdict: {report.verdict}")
    return 0 if has_scaler and report.equivalent else 1


if __name__ == "__main__":
    sys.exit(main())
