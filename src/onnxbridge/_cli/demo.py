"""The reference workflow (`onnxbridge demo`), end to end, printing each step.

Iris, 70/30 split with ``random_state=42``, ``RandomForestClassifier(n_estimators=10,
random_state=42)``, one float32 input ``input[None, 4]``, no ZipMap, ``target_opset=15``; ONNX
Runtime must give the same labels and probabilities within 1e-6; then a 10 000-row timing of
scikit-learn ``predict`` against the ONNX Runtime session.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from onnxbridge.bundle import train_bundle
from onnxbridge.convert import convert_bundle
from onnxbridge.runtime import Predictor
from onnxbridge.validate import ValidationReport, validate_bundle

__all__ = ["DEMO_DATA", "DEMO_MODEL", "DEMO_OPSET", "run_demo"]

DEMO_DATA = "iris"
DEMO_MODEL = "RandomForestClassifier(n_estimators=10, random_state=42)"
DEMO_OPSET = 15
DEMO_BENCH_ROWS = 10_000
# The reference workflow asks for probabilities within 1e-6 (absolute), tighter than the default.
DEMO_ATOL = 1e-6


def _step(console: Console, number: int, title: str, command: str) -> None:
    console.rule(f"[bold]{number}. {title}[/bold]", align="left")
    # Indented under the step's heading: the command that does the step by hand, set apart from
    # the command that was typed (paths may hold [brackets]).
    console.print(f"[dim]  $ {escape(command)}[/dim]")


def run_demo(out: str | Path, console: Console | None = None) -> ValidationReport:
    """Run train → convert → inspect → predict → validate → time on Iris; returns the validation.

    Args:
        out: the bundle folder; replaced if it holds an earlier bundle, refused if it holds
            anything else (see :func:`onnxbridge.bundle.train_bundle`).
        console: where to print (a default rich console if None).
    """
    from onnxbridge._cli._inspect_view import format_opsets, render_inspection
    from onnxbridge._inspection import inspect_model
    from onnxbridge.bench import compare_speed

    console = console or Console()
    out = Path(out)
    shown = escape(str(out))  # as typed, not read as rich markup

    _step(console, 1, "train", f'onnxbridge train --data iris --model "{DEMO_MODEL}" --out {out}')
    bundle, result = train_bundle(DEMO_DATA, DEMO_MODEL, out, overwrite=True)
    console.print(
        f"{len(result.X_train)} train / {len(result.X_test)} test rows; "
        f"test accuracy: {result.metrics['accuracy']:.4f}"
    )

    _step(console, 2, "convert", f"onnxbridge convert {out} --opset {DEMO_OPSET}")
    conversion = convert_bundle(bundle, opset=DEMO_OPSET)
    check = conversion.check
    assert check is not None  # convert_bundle checks the model unless allowed not to
    console.print(
        f"wrote {escape(str(conversion.path))}: input float32[N,{bundle.schema.n_features}], "
        f"outputs {', '.join(conversion.metadata.outputs.values())}, "
        f"opsets {format_opsets(conversion.metadata.opsets)}, zipmap off; "
        f"checked: {check.summary()}"
    )

    _step(console, 3, "inspect", f"onnxbridge inspect {bundle.onnx_path}")
    render_inspection(inspect_model(bundle.onnx_path), console)

    _step(
        console,
        4,
        "predict",
        f"onnxbridge predict {bundle.onnx_path} --data {bundle.holdout_path}",
    )
    predictor = Predictor(bundle.onnx_path)
    X_test, y_test = bundle.load_holdout()
    predictions = predictor.predict(X_test).to_frame()
    predictions.insert(0, "true", y_test.to_numpy())
    table = Table(title=f"first 5 of {len(predictions)} held-out rows")
    for column in predictions.columns:
        table.add_column(str(column), justify="right")
    for row in predictions.head(5).itertuples(index=False):
        table.add_row(*(f"{v:.4f}" if isinstance(v, float) else str(v) for v in row))
    console.print(table)

    _step(console, 5, "validate", f"onnxbridge validate {out} --atol {DEMO_ATOL:g} --rtol 0")
    report = validate_bundle(bundle, atol=DEMO_ATOL, rtol=0.0)
    for c in report.outputs:
        detail = (
            f"{c.n_mismatched} of {c.n_rows} labels differ"
            if c.kind == "labels"
            else f"max |Δ| {c.max_abs_diff:.3g}, mean |Δ| {c.mean_abs_diff:.3g}"
        )
        console.print(f"{c.name}: {detail}")
    console.print(f"verdict: [bold]{report.verdict}[/bold]")

    console.rule("[bold]6. time[/bold]", align="left")
    console.print(
        f"[dim]{DEMO_BENCH_ROWS} rows of np.random.RandomState(0).rand({DEMO_BENCH_ROWS}, "
        f"{bundle.schema.n_features}) as float32: scikit-learn predict vs onnxruntime "
        "(medians of 5 repeats)[/dim]"
    )
    rows = np.random.RandomState(0).rand(DEMO_BENCH_ROWS, bundle.schema.n_features)
    speed = compare_speed(
        result.estimator, predictor, rows.astype(np.float32), repeat=5, min_time=0.05
    )
    for name, timing in (("scikit-learn", speed.sklearn), ("onnxruntime", speed.onnxruntime)):
        console.print(
            f"{name:>12}: {timing.median * 1e3:8.3f} ms per call "
            f"(IQR {timing.q1 * 1e3:.3f}-{timing.q3 * 1e3:.3f} ms, {timing.repeat}×{timing.number})"
        )
    if speed.speedup >= 1:
        console.print(f"onnxruntime is {speed.speedup:.1f}× faster than scikit-learn here")
    else:
        console.print(f"onnxruntime is {1 / speed.speedup:.1f}× slower than scikit-learn here")
    console.print(
        f"[dim]these are the untuned session's settings; `onnxbridge tune {shown}` measures this "
        f"machine's fastest and `onnxbridge bench {shown}` compares them[/dim]"
    )
    console.print(f"\nbundle left in {shown}: card.json, model.skops, holdout.parquet, model.onnx")
    return report
