"""HTML views of the bench results, for a Jupyter notebook (``_repr_html_``).

The tables hold the same columns as ``onnxbridge bench`` prints; the
bench plots are embedded as base64 PNG, so the HTML needs no file beside it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from onnxbridge._html import Html, escape, table
from onnxbridge.bench._format import (
    format_bytes,
    format_per_call,
    format_rate,
    format_ratio,
    format_seconds,
)

__all__ = ["bench_html", "speed_html"]


def _table(headers: list[str], rows: list[list[Any]], *, text: tuple[int, ...] = ()) -> str:
    """A table whose columns numbered in ``text`` are left-aligned, the others (numbers
    formatted as text) right-aligned."""
    return table(headers, rows, right=[i for i in range(len(headers)) if i not in text])


def _bold(value: Any) -> Html:
    return Html(f"<b>{escape(value)}</b>")


def _img(figure: Any, alt: str) -> str:
    from onnxbridge.bench._plot import png_base64

    return (
        f'<img alt="{escape(alt)}" style="max-width:100%" '
        f'src="data:image/png;base64,{png_base64(figure)}"/>'
    )


def bench_html(report: Any) -> str:
    """``report`` (a :class:`~onnxbridge.bench.BenchReport`) as HTML: the results table, the
    engines, the model's facts, the sweep's tables and the plots."""
    from onnxbridge.bench._plot import bench_figure, sweep_figure

    model = Path(report.model)
    has_sklearn = "sklearn" in report.engines
    headers = ["rows", "engine", "per call ±IQR/2", "per row", "rows/s"]
    if has_sklearn:
        headers.append("×sklearn")
    rows: list[list[Any]] = []
    for batch in report.batch_sizes:
        group = [r for r in report.results if r.batch == batch]
        fastest = min(group, key=lambda r: r.timing.median)
        for i, r in enumerate(group):
            row = [
                f"{batch:,}" if i == 0 else "",
                _bold(r.engine) if r is fastest else r.engine,
                format_per_call(r.timing),
                format_seconds(r.per_row),
                format_rate(r.rows_per_second),
            ]
            if has_sklearn:
                row.append(format_ratio(r.speedup))
            rows.append(row)
    parts = [
        f"<p><b>{escape(model.parent.name)}/{escape(model.name)}</b>: median per call of "
        f"{report.repeat} interleaved repeats (rows from {escape(report.rows_from)}; bold: "
        "fastest)</p>",
        _table(headers, rows, text=(1,)),
        "<ul>"
        + "".join(f"<li><b>{escape(n)}</b>: {escape(t)}</li>" for n, t in report.engines.items())
        + "</ul>",
    ]
    facts = report.facts
    line = f"{facts.onnx_bytes:,} bytes .onnx, session load {format_seconds(facts.load.median)}"
    if facts.skops_bytes is not None:
        line += f"; {facts.skops_bytes:,} bytes .skops"
    if facts.conversion is not None:
        line += f"; conversion {format_seconds(facts.conversion.median)}"
    parts.append(f"<p>model: {escape(line)}</p>")
    parts.append(_img(bench_figure(report), "time per row against batch size"))
    if report.sweep:
        parts.append(_sweep_html(report.sweep))
        parts.append(_img(sweep_figure(report.sweep), "speed-up against the swept parameter"))
    return "<div>" + "".join(parts) + "</div>"


def _sweep_html(sweep: dict[str, Any]) -> str:
    parameter = sweep["parameter"]
    facts_rows = []
    timing_rows = []
    for variant in sweep["variants"]:
        facts = variant["facts"]
        value = repr(variant["value"])
        facts_rows.append(
            [
                value,
                format_bytes(facts["onnx_bytes"]),
                format_seconds(facts.get("load_seconds")),
                format_seconds(facts.get("conversion_seconds")),
            ]
        )
        by_batch: dict[int, dict[str, Any]] = {}
        for r in variant["results"]:
            by_batch.setdefault(r["batch"], {})[r["engine"]] = r
        for i, (batch, engines) in enumerate(by_batch.items()):
            ours = engines.get("onnxbridge", {})
            timing_rows.append(
                [
                    value if i == 0 else "",
                    f"{batch:,}",
                    *(
                        format_seconds(engines.get(e, {}).get("median"))
                        for e in ("sklearn", "ort-default", "onnxbridge")
                    ),
                    format_ratio(ours.get("speedup_vs_sklearn")),
                ]
            )
    return (
        f"<p>sweep over <b>{escape(parameter)}</b>: each variant retrained, converted, untuned</p>"
        + _table([parameter, ".onnx", "load", "convert"], facts_rows)
        + f"<p>sweep over <b>{escape(parameter)}</b>: median per call</p>"
        + _table(
            [parameter, "rows", "sklearn", "ort-default", "onnxbridge", "×sklearn"], timing_rows
        )
    )


def speed_html(comparison: Any) -> str:
    """``comparison`` (a :class:`~onnxbridge.bench.SpeedComparison`) as HTML."""
    rows = [
        [
            name,
            format_seconds(t.median),
            f"{format_seconds(t.q1)} – {format_seconds(t.q3)}",
            f"{t.repeat}×{t.number}",
        ]
        for name, t in (
            ("scikit-learn", comparison.sklearn),
            ("onnxruntime", comparison.onnxruntime),
        )
    ]
    speedup = comparison.speedup
    verdict = f"{speedup:.1f}× faster" if speedup >= 1 else f"{1 / speedup:.1f}× slower"
    return (
        f"<div><p>{comparison.rows:,} rows per call: scikit-learn predict against "
        "ONNX Runtime</p>"
        + _table(["engine", "per call (median)", "IQR", "repeats×calls"], rows, text=(0,))
        + f"<p>onnxruntime is <b>{verdict}</b> than scikit-learn here</p></div>"
    )
