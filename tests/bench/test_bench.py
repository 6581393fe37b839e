"""onnxbridge bench: engines × batch sizes on real sessions, the report, the plot, the sweep."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest

from onnxbridge import Bundle, bench_model
from onnxbridge.errors import DataError, ModelSpecError
from tuning_support import FAST

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _numbers(payload: Any, path: str = "") -> list[tuple[str, float]]:
    """Every number in a JSON payload, with where it is."""
    if isinstance(payload, bool):
        return []
    if isinstance(payload, (int, float)):
        return [(path, float(payload))]
    if isinstance(payload, dict):
        return [n for k, v in payload.items() for n in _numbers(v, f"{path}.{k}")]
    if isinstance(payload, list):
        return [n for i, v in enumerate(payload) for n in _numbers(v, f"{path}[{i}]")]
    return []


def _assert_figures_positive_and_finite(payload: dict[str, Any]) -> None:
    numbers = _numbers(payload)
    assert numbers
    for where, value in numbers:
        assert math.isfinite(value), where
        # A spread (IQR / median) of 0 is possible with 2 repeats; everything else is > 0.
        if where.endswith(".spread") or ".load_average" in where:
            assert value >= 0, where
        else:
            assert value > 0, where


def test_bench_reports_every_engine_and_size(any_bundle: Bundle) -> None:
    report = bench_model(any_bundle.path, batch_sizes=[1, 50], threads=[1], **FAST)
    assert report.batch_sizes == [1, 50]
    assert list(report.engines) == ["sklearn", "ort-default", "ort-1t", "onnxbridge"]
    assert len(report.results) == 8
    for r in report.results:
        assert r.rows_per_second == pytest.approx(r.batch / r.timing.median)
        assert r.per_row == pytest.approx(r.timing.median / r.batch)
        assert r.timing.repeat == 2
        base = report.result("sklearn", r.batch)
        assert r.speedup == pytest.approx(base.timing.median / r.timing.median)
    assert report.facts.onnx_bytes == any_bundle.onnx_path.stat().st_size
    assert report.facts.conversion is not None and report.facts.sklearn_load is not None
    assert report.tuned is False
    payload = json.loads((any_bundle.reports_dir / "bench.json").read_text())
    assert payload["fastest"].keys() == {"1", "50"}
    assert payload["rows_from"] == "holdout"
    _assert_figures_positive_and_finite(payload)
    png = (any_bundle.reports_dir / "bench.png").read_bytes()
    assert png.startswith(PNG_MAGIC) and len(png) > 10_000
    card = Bundle.open(any_bundle.path).card
    assert card["bench"]["report"] == "reports/bench.json"
    assert card["bench"]["plot"] == "reports/bench.png"


def test_sweep_retrains_and_converts_each_variant(any_bundle: Bundle) -> None:
    report = bench_model(
        any_bundle.path,
        batch_sizes=[1],
        threads=[1],
        sweep="n_estimators=2,8",
        sweep_batch_sizes=[1, 20],
        **FAST,
    )
    sweep = report.sweep
    assert sweep is not None and sweep["parameter"] == "n_estimators"
    assert [v["value"] for v in sweep["variants"]] == [2, 8]
    small, large = sweep["variants"]
    # More trees, bigger graph: the variants really were retrained with the parameter.
    assert large["facts"]["onnx_bytes"] > small["facts"]["onnx_bytes"]
    for variant in sweep["variants"]:
        assert list(variant["engines"]) == ["sklearn", "ort-default", "onnxbridge"]
        assert {(r["engine"], r["batch"]) for r in variant["results"]} == {
            (e, b) for e in variant["engines"] for b in (1, 20)
        }
        assert variant["facts"]["conversion_seconds"] > 0
    _assert_figures_positive_and_finite(report.to_dict())


def test_bare_onnx_file_without_sklearn(iris_bundle: Bundle, tmp_path: Path) -> None:
    model = tmp_path / "alone" / "model.onnx"
    model.parent.mkdir()
    shutil.copy(iris_bundle.onnx_path, model)
    report = bench_model(model, batch_sizes=[3], threads=[1], **FAST)
    assert "sklearn" not in report.engines
    assert report.rows_from == "random"
    assert all(r.speedup is None for r in report.results)
    assert report.facts.conversion is None
    assert (model.parent / "reports" / "bench.json").is_file()
    assert (model.parent / "reports" / "bench.png").read_bytes().startswith(PNG_MAGIC)


def test_given_data_is_used(iris_bundle: Bundle, tmp_path: Path) -> None:
    X, _ = iris_bundle.load_holdout()
    data = tmp_path / "rows.csv"
    X.head(7).to_csv(data, index=False)
    report = bench_model(iris_bundle.path, data=data, batch_sizes=[2], threads=[1], **FAST)
    assert report.rows_from == str(data)
    bad = tmp_path / "bad.csv"
    X.drop(columns=[X.columns[0]]).to_csv(bad, index=False)
    with pytest.raises(DataError, match=r"lack the model's columns 'sepal length \(cm\)'"):
        bench_model(iris_bundle.path, data=bad, batch_sizes=[2], **FAST)


@pytest.mark.parametrize(
    ("kwargs", "error", "pattern"),
    [
        ({"batch_sizes": "1,0"}, DataError, r"batch size '0' is not a whole number >= 1"),
        ({"batch_sizes": "ten"}, DataError, r"batch size 'ten' is not a whole number"),
        ({"threads": [0]}, DataError, r"thread count 0 is not a whole number >= 1"),
        ({"repeat": 0}, DataError, r"repeat=0 is not allowed: it must be at least 1"),
        ({"min_time": 0.0}, DataError, r"min_time=0.0 is not allowed: it must be a number of"),
        ({"sweep": "n_estimators"}, DataError, r"sweep='n_estimators' is not PARAM=V1,V2"),
        (
            {"sweep": "n_trees=1,2"},
            ModelSpecError,
            r"RandomForestClassifier has no parameter 'n_trees'; sweep= takes one of: .*"
            r"n_estimators",
        ),
        (
            {"sweep": "n_estimators=-1"},
            ModelSpecError,
            r"fitting with n_estimators=-1 failed: .*n_estimators",
        ),
    ],
)
def test_bad_options_are_named(
    iris_bundle: Bundle, kwargs: dict, error: type, pattern: str
) -> None:
    options = {"batch_sizes": [1], "threads": [1], **FAST, **kwargs}
    with pytest.raises(error, match=pattern):
        bench_model(iris_bundle.path, **options)


def test_sweep_needs_the_source_model(iris_bundle: Bundle) -> None:
    (iris_bundle.path / "model.skops").unlink()
    with pytest.raises(DataError, match=r"sweep= retrains the model, so it needs a bundle with"):
        bench_model(iris_bundle.path, sweep="n_estimators=2", batch_sizes=[1], **FAST)
    # Without the source model, bench itself still times the ONNX engines.
    report = bench_model(iris_bundle.path, batch_sizes=[1], threads=[1], **FAST)
    assert "sklearn" not in report.engines
