"""Bench, tune and speed results render as HTML in a notebook (``_repr_html_``): the tables the
commands print, and the plots embedded as PNG."""

from __future__ import annotations

import base64
import html
import re

from onnxbridge import Bundle, Predictor, bench_model, load_estimator, tune_model
from onnxbridge.bench import compare_speed
from tuning_support import FAST

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _headers(page: str) -> list[list[str]]:
    """The column headers of each table of ``page``, unescaped."""
    return [
        [html.unescape(h) for h in re.findall(r"<th[^>]*>(.*?)</th>", head)]
        for head in re.findall(r"<thead>(.*?)</thead>", page)
    ]


def _images(page: str) -> list[bytes]:
    return [
        base64.b64decode(data) for data in re.findall(r'src="data:image/png;base64,([^"]+)"', page)
    ]


def test_bench_report_renders_its_table_and_plots(iris_bundle: Bundle) -> None:
    report = bench_model(
        iris_bundle.path,
        batch_sizes=[1, 20],
        threads=[1],
        sweep="n_estimators=2,4",
        sweep_batch_sizes=[1],
        **FAST,
    )
    page = report._repr_html_()
    assert page.count("<table ") == 3
    assert _headers(page) == [
        ["rows", "engine", "per call ±IQR/2", "per row", "rows/s", "×sklearn"],
        ["n_estimators", ".onnx", "load", "convert"],
        ["n_estimators", "rows", "sklearn", "ort-default", "onnxbridge", "×sklearn"],
    ]
    for engine in ("sklearn", "ort-default", "ort-1t", "onnxbridge"):
        assert f">{engine}<" in page
    # The fastest engine at each size is in bold.
    for batch in (1, 20):
        assert f"<b>{report.fastest(batch).engine}</b>" in page
    images = _images(page)
    assert len(images) == 2  # time per row; speed-up against n_estimators
    assert all(image.startswith(PNG_MAGIC) for image in images)


def test_bench_report_without_sweep_has_one_plot(iris_bundle: Bundle) -> None:
    report = bench_model(iris_bundle.onnx_path, batch_sizes=[5], threads=[1], write=False, **FAST)
    page = report._repr_html_()
    # A bare .onnx file has no scikit-learn model, so no ×sklearn column.
    assert _headers(page) == [["rows", "engine", "per call ±IQR/2", "per row", "rows/s"]]
    (image,) = _images(page)
    assert image.startswith(PNG_MAGIC)


def test_tune_report_renders_a_table_per_regime(iris_bundle: Bundle) -> None:
    report = tune_model(iris_bundle.path, throughput_rows=200, write=False, **FAST)
    page = report._repr_html_()
    heads = _headers(page)
    assert [h[:4] for h in heads] == [["step", "settings", "median ±IQR/2", "vs best in step"]] * 2
    assert "at 100 rows" in heads[1]
    assert page.count("← chosen") == 2
    for regime in report.regimes:
        assert f"chose <b>{html.escape(regime.winner.label())}</b>" in page
    assert "rule: calls of at most" in page


def test_speed_comparison_renders_both_engines(iris_bundle: Bundle) -> None:
    X, _ = iris_bundle.load_holdout()
    estimator = load_estimator(iris_bundle.path / "model.skops")
    comparison = compare_speed(estimator, Predictor(iris_bundle.onnx_path), X, **FAST)
    page = comparison._repr_html_()
    assert _headers(page) == [["engine", "per call (median)", "IQR", "repeats×calls"]]
    assert ">scikit-learn<" in page and ">onnxruntime<" in page
    assert re.search(r"onnxruntime is <b>[\d.]+× (faster|slower)</b> than scikit-learn", page)
