"""HTML views of the bench and tune results, for a Jupyter notebook (``_repr_html_``).

The tables hold the same columns as ``onnxbridge bench`` and ``onnxbridge tune`` print; the
bench plots are embedded as base64 PNG, so the HTML needs no file beside it.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from onnxbridge.bench.format import (
    format_bytes,
    format_per_call,
    format_rate,
    format_ratio,
    format_seconds,
    tune_columns,
    tune_rows,
)

__all__ = ["bench_html", "speed_html", "tune_html"]

_CELL = "padding:2px 8px;text-align:{align}"


def _e(value: Any) -> str:
    return html.escape(str(value))


def _table(headers: list[str], rows: list[list[str]], *, text: tuple[int, ...] = ()) -> str:
    """An HTML table; ``rows`` hold HTML already escaped. The columns numbered in ``text`` are
    left-aligned, the others (numbers) right-aligned."""

    def style(i: int) -> str:
        return _CELL.format(align="left" if i in text else "right")

    head = "".join(f'<th style="{style(i)}">{_e(h)}</th>' for i, h in enumerate(headers))
    body = "".join(
        "<tr>" + "".join(f'<td style="{style(i)}">{c}</td>' for i, c in enumerate(row)) + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _img(figure: Any, alt: str) -> str:
    from onnxbridge.bench.plot import png_base64

    return (
        f'<img alt="{_e(alt)}" style="max-width:100%" '
        f'src="data:image/png;base64,{png_base64(figure)}"/>'
    )


def bench_html(report: Any) -> str:
    """``report`` (a :class:`~onnxbridge.bench.BenchReport`) as HTML: the results table, the
    engines, the model's facts, the sweep's tables and the plots."""
    from onnxbridge.bench.plot import bench_figure, sweep_figure

    model = Path(report.model)
    has_sklearn = "sklearn" in report.engines
    headers = ["rows", "engine", "per call ±IQR/2", "per row", "rows/s"]
    if has_sklearn:
        headers.append("×sklearn")
    rows: list[list[str]] = []
    for batch in report.batch_sizes:
        group = [r for r in report.results if r.batch == batch]
        fastest = min(group, key=lambda r: r.timing.median)
        for i, r in enumerate(group):
            row = [
                f"{batch:,}" if i == 0 else "",
                f"<b>{_e(r.engine)}</b>" if r is fastest else _e(r.engine),
                _e(format_per_call(r.timing)),
                _e(format_seconds(r.per_row)),
                _e(format_rate(r.rows_per_second)),
            ]
            if has_sklearn:
                row.append(_e(format_ratio(r.speedup)))
            rows.append(row)
    parts = [
        f"<p><b>{_e(model.parent.name)}/{_e(model.name)}</b>: median per call of "
        f"{report.repeat} interleaved repeats (rows from {_e(report.rows_from)}; bold: "
        "fastest)</p>",
        _table(headers, rows, text=(1,)),
        "<ul>"
        + "".join(f"<li><b>{_e(n)}</b>: {_e(t)}</li>" for n, t in report.engines.items())
        + "</ul>",
    ]
    facts = report.facts
    line = f"{facts.onnx_bytes:,} bytes .onnx, session load {format_seconds(facts.load.median)}"
    if facts.skops_bytes is not None:
        line += f"; {facts.skops_bytes:,} bytes .skops"
    if facts.conversion is not None:
        line += f"; conversion {format_seconds(facts.conversion.median)}"
    parts.append(f"<p>model: {_e(line)}</p>")
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
        value = _e(repr(variant["value"]))
        facts_rows.append(
            [
                value,
                _e(format_bytes(facts["onnx_bytes"])),
                _e(format_seconds(facts.get("load_seconds"))),
                _e(format_seconds(facts.get("conversion_seconds"))),
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
                        _e(format_seconds(engines.get(e, {}).get("median")))
                        for e in ("sklearn", "ort-default", "onnxbridge")
                    ),
                    _e(format_ratio(ours.get("speedup_vs_sklearn"))),
                ]
            )
    return (
        f"<p>sweep over <b>{_e(parameter)}</b>: each variant retrained, converted, untuned</p>"
        + _table([parameter, ".onnx", "load", "convert"], facts_rows)
        + f"<p>sweep over <b>{_e(parameter)}</b>: median per call</p>"
        + _table(
            [parameter, "rows", "sklearn", "ort-default", "onnxbridge", "×sklearn"], timing_rows
        )
    )


def tune_html(report: Any) -> str:
    """``report`` (a :class:`~onnxbridge.bench.TuneReport`) as HTML: one table of candidates per
    regime, what was chosen and the rule between the regimes."""
    parts = []
    for regime in report.regimes:
        headers = ["step", "settings", *tune_columns(regime), ""]
        rows = []
        for row in tune_rows(regime):
            label = _e(row.settings.label())
            rows.append(
                [row.step, f"<b>{label}</b>" if row.chosen else label]
                + [_e(cell) for cell in row.cells]
                + [row.mark]
            )
        n = f"{regime.rows:,} row{'s' if regime.rows != 1 else ''}"
        best = regime.winner_timing.median
        parts += [
            f"<p><b>{_e(regime.regime)}</b>: {n} per call, session.run</p>",
            _table(headers, rows, text=(1, len(headers) - 1)),
            f"<p>{_e(regime.regime)}: chose <b>{_e(regime.winner.label())}</b>; speed-up "
            f"(step 2) {regime.ort_default.median / best:.2f}× over ONNX Runtime's defaults, "
            f"{regime.onnxbridge_default.median / best:.2f}× over onnxbridge's defaults</p>",
        ]
    spec = report.spec
    parts.append(
        f"<p>rule: calls of at most {spec.latency_max_rows:,} rows use the latency settings "
        f"({_e(spec.latency.label())}), larger ones the throughput settings "
        f"({_e(spec.throughput.label())})</p>"
    )
    return "<div>" + "".join(parts) + "</div>"


def speed_html(comparison: Any) -> str:
    """``comparison`` (a :class:`~onnxbridge.bench.SpeedComparison`) as HTML."""
    rows = [
        [
            name,
            _e(format_seconds(t.median)),
            _e(f"{format_seconds(t.q1)} – {format_seconds(t.q3)}"),
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
