"""The bench plot: time per row against batch size, one line per engine, log axes (PNG)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from onnxbridge._files import atomic_write_path

__all__ = ["plot_bench"]


def plot_bench(report: Any, path: str | Path) -> Path:
    """Draw ``report`` (a :class:`~onnxbridge.bench.BenchReport`) to ``path`` as a PNG.

    Uses matplotlib's Agg backend (no display needed) on its own figure, so it neither needs nor
    changes the caller's pyplot state.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    path = Path(path)
    figure = Figure(figsize=(7.0, 4.5), dpi=110)
    FigureCanvasAgg(figure)
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
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write_path(path) as tmp:
        figure.savefig(tmp, format="png")
    return path
