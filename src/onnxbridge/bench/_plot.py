"""The bench plots: time per row against batch size, one line per engine, log axes (PNG); and
for a ``--sweep``, the speed-up over scikit-learn against the swept parameter."""

from __future__ import annotations

import base64
import io
from pathlib import Path
from typing import Any

from onnxbridge._files import atomic_write_path

__all__ = ["bench_figure", "plot_bench", "png_base64", "sweep_figure"]


def _figure() -> Any:
    """A matplotlib figure on the Agg backend, apart from pyplot: it needs no display and
    leaves the caller's pyplot state alone."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7.0, 4.5), dpi=110)
    FigureCanvasAgg(figure)
    return figure


def bench_figure(report: Any) -> Any:
    """Time per row against batch size for ``report`` (a :class:`~onnxbridge.bench.BenchReport`).

    Returns:
        A ``matplotlib.figure.Figure``: one line per engine with its interquartile band.
    """
    figure = _figure()
    axes = figure.add_subplot(1, 1, 1)
    for engine in report.engines:
        points = sorted(
            (r.batch, r.per_row, r.timing.q1 / r.batch, r.timing.q3 / r.batch)
            for r in report.results
            if r.engine == engine
        )
        if not points:
            continue
        xs = [p[0] for p in points]
        line = axes.plot(xs, [p[1] for p in points], marker="o", markersize=3, label=engine)[0]
        # The interquartile range of each point, as a band.
        axes.fill_between(
            xs, [p[2] for p in points], [p[3] for p in points], color=line.get_color(), alpha=0.15
        )
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("batch size (rows per call)")
    axes.set_ylabel("seconds per row (median, IQR band)")
    model = Path(report.model)
    axes.set_title(f"{model.parent.name}/{model.name}: time per row", fontsize=10)
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    return figure


def sweep_figure(sweep: dict[str, Any]) -> Any:
    """onnxbridge's speed-up over scikit-learn against the swept parameter, one line per batch
    size (``sweep`` is :attr:`BenchReport.sweep <onnxbridge.bench.BenchReport.sweep>`).

    Returns:
        A ``matplotlib.figure.Figure``. Values that are not numbers are placed evenly and
        labelled.
    """
    figure = _figure()
    axes = figure.add_subplot(1, 1, 1)
    values = [v["value"] for v in sweep["variants"]]
    numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)
    xs = values if numeric else list(range(len(values)))
    lines: dict[int, list[tuple[Any, float]]] = {}
    for x, variant in zip(xs, sweep["variants"], strict=True):
        for r in variant["results"]:
            if r["engine"] == "onnxbridge" and r.get("speedup_vs_sklearn"):
                lines.setdefault(r["batch"], []).append((x, r["speedup_vs_sklearn"]))
    for batch, points in sorted(lines.items()):
        axes.plot(
            [p[0] for p in points],
            [p[1] for p in points],
            marker="o",
            markersize=4,
            label=f"{batch:,} row{'s' if batch != 1 else ''} per call",
        )
    if not numeric:
        axes.set_xticks(xs, [repr(v) for v in values])
    axes.axhline(1.0, color="grey", linewidth=0.8, linestyle="--")
    axes.set_yscale("log")
    axes.set_xlabel(sweep["parameter"])
    axes.set_ylabel("speed-up over scikit-learn (×)")
    axes.set_title(f"onnxbridge against scikit-learn, by {sweep['parameter']}", fontsize=10)
    axes.grid(True, which="both", alpha=0.3)
    if lines:
        axes.legend(fontsize=8)
    figure.tight_layout()
    return figure


def png_base64(figure: Any) -> str:
    """``figure`` as a PNG, base64-encoded (for an ``<img src="data:image/png;base64,...">``)."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def plot_bench(report: Any, path: str | Path) -> Path:
    """Draw ``report`` (a :class:`~onnxbridge.bench.BenchReport`) to ``path`` as a PNG.

    Uses matplotlib's Agg backend (no display needed) on its own figure, so it neither needs nor
    changes the caller's pyplot state.
    """
    path = Path(path)
    figure = bench_figure(report)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write_path(path) as tmp:
        figure.savefig(tmp, format="png")
    return path
