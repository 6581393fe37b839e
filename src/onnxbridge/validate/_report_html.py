"""The validation report as a compact HTML fragment: what a notebook shows for a report.

The verdict, what it was compared on and with which tolerance, the warnings, the held-out rows'
comparison per output, one line per probe set and, for a DIVERGENT verdict, the diagnoses. The
full page with histograms and worst rows is ``reports/validation.html``
(:mod:`onnxbridge.validate._html`).
"""

from __future__ import annotations

from onnxbridge._html import Html, badge, escape, heading, paragraph, table
from onnxbridge._meta import role_parts
from onnxbridge.validate._report import ProbeSetResult, ValidationReport

__all__ = ["report_html"]

_OUTPUT_HEADER = (
    "output", "kind", "rows", "rows differing", "agreement", "max |Δ|", "mean |Δ|", "max rel Δ",
    "status",
)  # fmt: skip


def _tolerance(report: ValidationReport) -> str:
    """``labels identical; probabilities |Δ| ≤ 1e-05 + 1e-05·|a|`` for the roles compared."""
    shown = {role_parts(c.name)[0] for c in report.outputs} or set(report.tolerances)
    numeric = [
        f"{role} |Δ| ≤ {t['atol']:g} + {t['rtol']:g}·|a|"
        for role, t in report.tolerances.items()
        if role in shown
    ]
    if not numeric:
        numeric = [f"|Δ| ≤ {report.atol:g} + {report.rtol:g}·|a|"]
    return "; ".join(["labels identical", *numeric])


def _probe_result(probe: ProbeSetResult) -> Html:
    if probe.skipped is not None:
        return Html(f'<span style="color:#888">skipped: {escape(probe.skipped)}</span>')
    if probe.ok:
        text = "OK"
        if probe.sampled:
            text += f" ({probe.sampled})"
        return Html(escape(text))
    cause = f", cause: {probe.cause}" if probe.cause else ""
    if probe.fails_verdict:
        return badge(f"DIVERGENT{cause}", good=False)
    return Html(escape(f"differs (warning, not part of the verdict{cause})"))


def report_html(report: ValidationReport) -> str:
    """The report as an HTML fragment (tables with inline styles, every text escaped)."""
    parts = [
        paragraph(
            Html("<b>onnxbridge validation</b>:"),
            report.model or "model",
            *(["against", report.reference] if report.reference else ["(no source model)"]),
            Html("&nbsp;"),
            badge(report.verdict, good=report.equivalent),
        ),
        paragraph(f"{report.n_rows} {report.rows} rows compared; tolerance: {_tolerance(report)}"),
    ]
    parts.extend(paragraph(Html("<b>warning:</b>"), line) for line in report.warnings)

    parts.append(heading(f"{report.compared} on the {report.rows} rows"))
    output_rows = [
        [c.name, c.kind, c.n_rows, c.n_mismatched, f"{c.agreement:.2%}", c.max_abs_diff,
         c.mean_abs_diff, c.max_rel_diff, badge(c.status, good=c.ok)]
        for c in report.outputs
    ]  # fmt: skip
    parts.append(table(_OUTPUT_HEADER, output_rows))

    parts.append(heading("Probe sets"))
    probe_rows = [
        [p.name, p.n_rows, ", ".join(pair.name for pair in p.pairs) or "-", _probe_result(p)]
        for p in report.probe_sets
    ]
    parts.append(table(["probe set", "rows", "runtimes compared", "result"], probe_rows))

    if report.diagnoses:
        parts.append(heading("Diagnosis"))
        for d in report.diagnoses:
            details = "".join(f"<li>{escape(line)}</li>" for line in d.details)
            parts.append(
                Html(
                    f"<p style='margin:0.2em 0'><b>{escape(d.kind)}</b>: {escape(d.summary)}</p>"
                    f"<ul style='margin:0.2em 0'>{details}</ul>"
                    f"<p style='margin:0.2em 0'>next step: {escape(d.next_step)}</p>"
                )
            )
    return f"<div>{''.join(parts)}</div>"
