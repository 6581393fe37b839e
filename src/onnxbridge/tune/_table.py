"""The tune tables, one place for the terminal (``onnxbridge tune``) and the notebook view."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from onnxbridge._html import Html, escape, table
from onnxbridge.bench._format import format_per_call
from onnxbridge.runtime._settings import SessionSettings
from onnxbridge.tune._candidates import MID_ROWS
from onnxbridge.tune._report import RegimeResult, TuneReport

__all__ = ["TuneRow", "tune_columns", "tune_html", "tune_rows"]


@dataclass(frozen=True)
class TuneRow:
    """One candidate of a regime's tune table, as the terminal and the notebook show it.

    Attributes:
        step: the step number on a step's first row, else empty.
        settings: the candidate's session settings.
        chosen: the step passed these settings on (or, in the last step, chose them).
        cells: per call with its spread, then the ratios to the step's best (and, when
            measured, at the mid-size and large calls), as :func:`tune_columns` names them.
        mark: ``← step 2`` / ``← chosen`` on a chosen row, else empty.
        ends_step: the last row of its step.
    """

    step: str
    settings: SessionSettings
    chosen: bool
    cells: tuple[str, ...]
    mark: str
    ends_step: bool


def tune_columns(regime: RegimeResult) -> list[str]:
    """The headers of :attr:`TuneRow.cells` for ``regime``."""
    columns = ["median ±IQR/2", "vs best in step"]
    # The throughput regime's candidates are also judged on 100-row calls ...
    if any(c.mid is not None for c in regime.candidates):
        columns.append(f"at {MID_ROWS} rows")
    # ... and step two's close ones on large calls.
    large_rows = max((c.large_rows for c in regime.candidates), default=0)
    if large_rows:
        columns.append(f"at {large_rows:,} rows")
    return columns


def tune_rows(regime: RegimeResult) -> list[TuneRow]:
    """The rows of ``regime``'s tune table, step by step."""
    mid = any(c.mid is not None for c in regime.candidates)
    large = any(c.large_rows for c in regime.candidates)
    steps = sorted({c.step for c in regime.candidates})
    rows = []
    for step in steps:
        group = [c for c in regime.candidates if c.step == step]
        best = min(c.timing.median for c in group)
        best_mid = min((c.mid.median for c in group if c.mid is not None), default=0.0)
        best_large = min((c.large.median for c in group if c.large), default=0.0)
        passed_on = regime.passed_on(step)
        for i, c in enumerate(group):
            cells = [format_per_call(c.timing), f"{c.timing.median / best:.2f}×"]
            if mid:
                cells.append(f"{c.mid.median / best_mid:.2f}×" if c.mid and best_mid else "")
            if large:
                cells.append(f"{c.large.median / best_large:.2f}×" if c.large else "")
            chosen = c.settings == passed_on
            mark = ("← chosen" if step == steps[-1] else "← step 2") if chosen else ""
            rows.append(
                TuneRow(
                    step=str(step) if i == 0 else "",
                    settings=c.settings,
                    chosen=chosen,
                    cells=tuple(cells),
                    mark=mark,
                    ends_step=i == len(group) - 1,
                )
            )
    return rows


def tune_html(report: TuneReport) -> str:
    """``report`` as HTML: one table of candidates per regime, what was chosen and the rule
    between the regimes."""
    parts = []
    for regime in report.regimes:
        headers = ["step", "settings", *tune_columns(regime), ""]
        rows: list[list[Any]] = []
        for row in tune_rows(regime):
            label = row.settings.label()
            shown = Html(f"<b>{escape(label)}</b>") if row.chosen else label
            rows.append([row.step, shown, *row.cells, row.mark])
        n = f"{regime.rows:,} row{'s' if regime.rows != 1 else ''}"
        best = regime.winner_timing.median
        text = (1, len(headers) - 1)  # left-aligned; the numbers, formatted, right-aligned
        parts += [
            f"<p><b>{escape(regime.regime)}</b>: {n} per call, session.run</p>",
            table(headers, rows, right=[i for i in range(len(headers)) if i not in text]),
            f"<p>{escape(regime.regime)}: chose <b>{escape(regime.winner.label())}</b>; speed-up "
            f"(step 2) {regime.ort_default.median / best:.2f}× over ONNX Runtime's defaults, "
            f"{regime.onnxbridge_default.median / best:.2f}× over onnxbridge's defaults</p>",
        ]
    spec = report.spec
    parts.append(
        f"<p>rule: calls of at most {spec.latency_max_rows:,} rows use the latency settings "
        f"({escape(spec.latency.label())}), larger ones the throughput settings "
        f"({escape(spec.throughput.label())})</p>"
    )
    return "<div>" + "".join(parts) + "</div>"
