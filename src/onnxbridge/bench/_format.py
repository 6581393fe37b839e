"""Short, fixed-width forms of timings, rates, sizes and speed-ups, shared by the ``bench`` and
``tune`` tables and their notebook views."""

from __future__ import annotations

from typing import Any

__all__ = [
    "format_bytes",
    "format_per_call",
    "format_rate",
    "format_ratio",
    "format_seconds",
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
