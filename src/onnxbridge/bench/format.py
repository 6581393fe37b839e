"""Short, fixed-width forms of timings, rates, sizes and speed-ups, shared by the ``bench`` and
``tune`` tables and their notebook views."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = [
    "TuneRow",
    "format_bytes",
    "format_per_call",
    "format_rate",
    "format_ratio",
    "format_seconds",
    "tune_columns",
    "tune_rows",
]


def format_seconds(seconds: float | None) -> str:
    """``850 ns``, ``6.7 µs``, ``1.21 ms``, ``2.5 s``: three significant digits, 7 characters."""
    if seconds is None:
        return "-"
    # Round first, so 999.7 µs reads 1 ms rather than 1e+03 µs.
    seconds = float(f"{seconds:.3g}")
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}" if seconds < 1000 else f"{seconds:,.0f} s"
    return f"{seconds * 1e9:.3g} ns"


def format_ratio(ratio: float | None) -> str:
    """A speed-up: ``0.85``, ``3.12``, ``45.6``, ``1,234`` (no more digits than it is worth)."""
    if ratio is None:
        return "-"
    if ratio >= 99.95:
        return f"{ratio:,.0f}"
    if ratio >= 9.995:
        return f"{ratio:.1f}"
    return f"{ratio:.2f}"


def format_rate(rows_per_second: float) -> str:
    """Rows per second: ``817``, ``27.6k``, ``7.36M``."""
    rate = float(f"{rows_per_second:.3g}")
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if rate >= scale:
            return f"{rate / scale:.3g}{suffix}"
    return f"{rate:.3g}"


def format_bytes(n: int) -> str:
    """``512 B``, ``8.65 KiB``, ``1.2 MiB``."""
    for scale, suffix in ((1 << 20, "MiB"), (1 << 10, "KiB")):
        if n >= scale:
            return f"{n / scale:.3g} {suffix}"
    return f"{n} B"


def format_per_call(timing: Any) -> str:
    """A median per call with half its interquartile range: ``1.21 ms ±3%``."""
    return f"{format_seconds(timing.median)} ±{timing.spread / 2:.0%}"


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
    settings: Any
    chosen: bool
    cells: tuple[str, ...]
    mark: str
    ends_step: bool


def tune_columns(regime: Any) -> list[str]:
    """The headers of :attr:`TuneRow.cells` for ``regime`` (a tune ``RegimeResult``)."""
    from onnxbridge.bench.tune import MID_ROWS

    columns = ["median ±IQR/2", "vs best in step"]
    # The throughput regime's candidates are also judged on 100-row calls (tune.py) ...
    if any(c.mid is not None for c in regime.candidates):
        columns.append(f"at {MID_ROWS} rows")
    # ... and step two's close ones on large calls.
    large_rows = max((c.large_rows for c in regime.candidates), default=0)
    if large_rows:
        columns.append(f"at {large_rows:,} rows")
    return columns


def tune_rows(regime: Any) -> list[TuneRow]:
    """The rows of ``regime``'s tune table, step by step (one place for both views)."""
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
