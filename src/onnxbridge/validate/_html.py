"""One self-contained HTML page for a validation report (``reports/validation.html``).

Tables of every probe set, pair of runtimes and output, the worst rows, the diagnoses, and a
histogram of the absolute differences per probe set, drawn with matplotlib's Agg backend and
embedded as base64 PNG. ``reports/bench.png`` is embedded when it exists. The page loads nothing
from anywhere: no scripts, no fonts, no stylesheets outside the file.
"""

from __future__ import annotations

import base64
import html
import io
import json
from pathlib import Path
from typing import Any

import numpy as np

from onnxbridge._meta import role_parts
from onnxbridge.validate._report import ValidationReport

__all__ = ["render_html"]

_CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:2em;color:#222;
max-width:1200px}
h1{margin-bottom:.2em} .sub{color:#666;margin-top:0}
.verdict{font-size:1.6em;font-weight:700;padding:.3em .6em;display:inline-block;border-radius:.3em}
.EQUIVALENT{background:#d8f5d0;color:#1d5e12} .DIVERGENT{background:#fbd9d6;color:#8a1409}
table{border-collapse:collapse;margin:.6em 0 1.2em} th,td{border:1px solid #ccc;padding:.25em .6em;
text-align:right;font-size:.9em} th{background:#f2f2f2} td.l,th.l{text-align:left}
.bad{color:#8a1409;font-weight:600} .ok{color:#1d5e12} .skip{color:#888}
section{margin-bottom:2em} img{max-width:100%;border:1px solid #ddd}
code{background:#f5f5f5;padding:0 .2em}
.diag{border-left:4px solid #c0392b;padding:.2em 1em;margin:1em 0;background:#fdf3f2}
.next{font-weight:600}
.warn{border-left:4px solid #d68910;padding:.2em 1em;background:#fef5e7}
"""


def _e(value: Any) -> str:
    return html.escape(str(value))


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    return f"{value:.3g}" if value != 0 else "0"


def _png(figure: Any) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=80)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _histograms(report: ValidationReport) -> str | None:
    """One panel per compared probe set: |Δ| of scikit-learn vs ONNX Runtime, log scale."""
    # The Agg canvas directly: no pyplot, no change to the process's matplotlib backend.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    panels = [
        (probe.name, probe.pairs[0].name)
        for probe in report.probe_sets
        if probe.skipped is None and probe.pairs and not probe.pairs[0].error
    ]
    if not panels:
        return None
    columns = min(len(panels), 4)
    lines = (len(panels) + 3) // 4
    figure = Figure(figsize=(3.0 * columns, 2.4 * lines))
    FigureCanvasAgg(figure)
    for index, (name, pair_name) in enumerate(panels):
        axis = figure.add_subplot(lines, columns, index + 1)
        data = probe_diffs(report, name)
        finite = data[np.isfinite(data)]
        positive = finite[finite > 0]
        # log10 of the differences on a linear axis: log-scaled axes cost seconds of text
        # layout for their tick labels.
        if positive.size:
            axis.hist(np.log10(positive), bins=20, color="#4878a8")
        zeros = int((finite == 0).sum())
        infinite = int(data.size - finite.size)
        axis.set_title(f"{name} ({pair_name})", fontsize=8)
        axis.set_xlabel(f"log10 |Δ| ({zeros} exactly 0, {infinite} inf/NaN)", fontsize=7)
        axis.tick_params(labelsize=6)
    figure.subplots_adjust(hspace=0.6, wspace=0.3)
    return _png(figure)


def probe_diffs(report: ValidationReport, name: str) -> np.ndarray:
    """The |Δ| of every numeric value of a probe set's first pair (``report.diff_samples``)."""
    samples = report.diff_samples
    return np.asarray(samples.get(name, []), dtype=np.float64)


def _probe_table(report: ValidationReport) -> str:
    rows = []
    for probe in report.probe_sets:
        if probe.skipped is not None:
            rows.append(
                f"<tr><td class=l>{_e(probe.name)}</td><td class='l skip' colspan=8>skipped: "
                f"{_e(probe.skipped)}</td></tr>"
            )
            continue
        for pair in probe.pairs:
            if pair.error:
                rows.append(
                    f"<tr><td class=l>{_e(probe.name)}</td><td class=l>{_e(pair.name)}</td>"
                    f"<td class='l bad' colspan=7>error: {_e(pair.error)}</td></tr>"
                )
                continue
            for c in pair.outputs:
                klass = "ok" if c.ok else "bad"
                gating = probe.gating and pair.gating
                status = c.status if c.ok or gating else f"{c.status} (warning)"
                rows.append(
                    f"<tr><td class=l>{_e(probe.name)}</td><td class=l>{_e(pair.name)}</td>"
                    f"<td class=l>{_e(c.name)}</td><td>{c.n_rows}</td><td>{c.agreement:.2%}</td>"
                    f"<td>{_fmt(c.max_abs_diff)}</td><td>{_fmt(c.mean_abs_diff)}</td>"
                    f"<td>{_fmt(c.max_rel_diff)}</td><td class={klass}>{_e(status)}</td></tr>"
                )
    head = (
        "<tr><th class=l>probe set</th><th class=l>runtimes</th><th class=l>output</th>"
        "<th>rows</th>"
        "<th>agreement</th><th>max |Δ|</th><th>mean |Δ|</th><th>max rel Δ</th><th>status</th></tr>"
    )
    return f"<table>{head}{''.join(rows)}</table>"


def _worst_table(report: ValidationReport) -> str:
    rows = []
    for probe in report.probe_sets:
        for pair in probe.pairs:
            for c in pair.outputs:
                for w in c.worst_rows[:3]:
                    inputs = ", ".join(f"{k}={v}" for k, v in w["inputs"].items())
                    rows.append(
                        f"<tr><td class=l>{_e(probe.name)}</td><td class=l>{_e(pair.name)}</td>"
                        f"<td class=l>{_e(c.name)}</td><td>{w['row']}</td>"
                        f"<td class=l><code>{_e(inputs)}</code></td>"
                        f"<td class=l>{_e(json.dumps(w['a']))}</td>"
                        f"<td class=l>{_e(json.dumps(w['b']))}</td></tr>"
                    )
    if not rows:
        return "<p>No mismatched rows.</p>"
    head = (
        "<tr><th class=l>probe set</th><th class=l>runtimes (a~b)</th><th class=l>output</th>"
        "<th>row</th><th class=l>inputs</th><th class=l>a</th><th class=l>b</th></tr>"
    )
    return f"<table>{head}{''.join(rows)}</table>"


def _diagnoses(report: ValidationReport) -> str:
    if not report.diagnoses:
        return (
            "<p>Nothing to diagnose.</p>" if report.equivalent else "<p>No diagnosis was run.</p>"
        )
    parts = []
    for d in report.diagnoses:
        details = "".join(f"<li>{_e(line)}</li>" for line in d.details)
        parts.append(
            f"<div class=diag><p><b>{_e(d.kind)}</b>: {_e(d.summary)}</p><ul>{details}</ul>"
            f"<p class=next>next step: {_e(d.next_step)}</p></div>"
        )
    return "".join(parts)


def _budget(report: ValidationReport) -> str:
    return "none" if report.budget_s is None else f"{report.budget_s:g} s"


def _summary(report: ValidationReport) -> str:
    """The lines under the verdict: what it rests on less than asked (warnings), and samples."""
    lines = [f"<p class='warn'>warning: {_e(line)}</p>" for line in report.warnings]
    lines.extend(
        f"<p class=sampled>{_e(probe.name)}: {_e(probe.sampled)}</p>"
        for probe in report.probe_sets
        if probe.sampled is not None
    )
    return "\n".join(lines)


def render_html(report: ValidationReport, *, bench_png: str | Path | None = None) -> str:
    """The report as one HTML page (a string), with its images embedded.

    Args:
        report: the validation report.
        bench_png: a benchmark plot to embed (``reports/bench.png``), if any.
    """
    histogram = _histograms(report)
    runtimes = ", ".join(
        f"{name} ({info.get('version')}; could not run on {', '.join(info['failed_on'])}: "
        f"{info.get('error')})"
        if info.get("failed_on")
        else f"{name} ({info.get('version')})"
        if info.get("available")
        else f"{name} (unavailable: {info.get('error')})"
        for name, info in report.runtimes.items()
    )
    shown = {role_parts(c.name)[0] for c in report.outputs} or set(report.tolerances)
    tolerances = ", ".join(
        f"{role}: |Δ| ≤ {t['atol']:g} + {t['rtol']:g}·|a|"
        for role, t in report.tolerances.items()
        if role in shown
    )
    bench = ""
    if bench_png is not None and Path(bench_png).is_file():
        encoded = base64.b64encode(Path(bench_png).read_bytes()).decode("ascii")
        bench = (
            "<section><h2>Benchmark</h2><img alt='benchmark' "
            f"src='data:image/png;base64,{encoded}'></section>"
        )
    hist = (
        f"<img alt='histograms of differences' src='data:image/png;base64,{histogram}'>"
        if histogram
        else "<p>No numeric outputs to plot.</p>"
    )
    versions = ", ".join(f"{k} {v}" for k, v in report.versions.items())
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>onnxbridge validation: {_e(report.verdict)}</title>
<style>{_CSS}</style></head><body>
<h1>onnxbridge validation</h1>
<p class=sub>{_e(report.model)} against {_e(report.reference)} · {_e(report.created_at)}
 · {report.duration_s:g} s</p>
<p><span id=verdict class="verdict {_e(report.verdict)}">verdict: {_e(report.verdict)}</span></p>
<p>failing probe sets: {_e(", ".join(report.failing_probe_sets) or "none")}
 · warnings (not part of the verdict): {_e(", ".join(report.warning_probe_sets) or "none")}</p>
{_summary(report)}
<p>runtimes: {_e(runtimes)}<br>tolerances: labels identical; {_e(tolerances)}<br>
probe seed: {report.seed} · time budget: {_budget(report)}
 · report schema {report.schema_version}</p>
<section><h2>Diagnosis</h2>{_diagnoses(report)}</section>
<section><h2>Probe sets</h2>{_probe_table(report)}</section>
<section><h2>Differences (scikit-learn vs ONNX Runtime)</h2>{hist}</section>
<section><h2>Worst rows</h2>{_worst_table(report)}</section>
{bench}
<section><h2>Versions</h2><p>{_e(versions)}</p></section>
</body></html>
"""
