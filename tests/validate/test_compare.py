"""Validation: per-output comparison, verdicts, tolerances, reports."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from onnxbridge import Bundle, convert_bundle, train_bundle, validate_bundle
from onnxbridge.errors import BundleError, DataError
from onnxbridge.validate._compare import _labels, _numeric


def test_reference_model_is_equivalent(iris_bundle: Bundle) -> None:
    report = validate_bundle(iris_bundle)
    assert report.verdict == "EQUIVALENT" and report.equivalent
    label, proba = report.outputs
    assert (label.name, label.n_mismatched, label.agreement) == ("label", 0, 1.0)
    assert proba.name == "probabilities" and proba.max_abs_diff <= 1e-6
    saved = json.loads((iris_bundle.reports_dir / "validation.json").read_text())
    assert saved["verdict"] == "EQUIVALENT" and saved["n_rows"] == 45
    assert Bundle.open(iris_bundle.path).card["validation"]["verdict"] == "EQUIVALENT"


def test_regression_is_equivalent_within_float32_tolerance(tmp_path: Path) -> None:
    bundle, _ = train_bundle(
        "diabetes", "RandomForestRegressor(n_estimators=5, random_state=0)", tmp_path / "d"
    )
    convert_bundle(bundle)
    report = validate_bundle(bundle)
    assert report.verdict == "EQUIVALENT"
    (value,) = report.outputs
    assert value.name == "value" and 0 < value.max_abs_diff < 1e-2


def test_zero_tolerance_makes_float32_noise_divergent(tmp_path: Path) -> None:
    bundle, _ = train_bundle("diabetes", "LinearRegression()", tmp_path / "d")
    convert_bundle(bundle)
    report = validate_bundle(bundle, atol=0.0, rtol=0.0)
    assert report.verdict == "DIVERGENT"
    assert report.outputs[0].n_mismatched > 0 and report.outputs[0].worst_row is not None


def test_label_comparison_counts_mismatches() -> None:
    c, _ = _labels("label", np.array([0, 1, 2, 2]), np.array([0, 1, 1, 2]))
    assert (c.n_mismatched, c.agreement, c.ok, c.worst_row) == (1, 0.75, False, 2)
    s, _ = _labels("label", np.array(["a", "b"]), np.array(["a", "b"], dtype=object))
    assert s.ok


def test_numeric_comparison_rule() -> None:
    expected = np.array([[0.5, 0.5], [100.0, 0.0]])
    within = expected + np.array([[1e-5, 0], [100 * 1e-5, 0]])
    c, _ = _numeric("p", expected, within, atol=1e-5, rtol=1e-5)
    assert c.ok and c.max_abs_diff == pytest.approx(1e-3)
    beyond = expected + np.array([[3e-5, 0], [0, 0]])
    assert not _numeric("p", expected, beyond, atol=1e-5, rtol=1e-5)[0].ok
    nan_both, _ = _numeric("p", np.array([np.nan, 1.0]), np.array([np.nan, 1.0]), 0, 0)
    nan_one, _ = _numeric("p", np.array([np.nan, 1.0]), np.array([0.0, 1.0]), 0, 0)
    assert nan_both.ok and not nan_one.ok


def test_validate_needs_a_converted_model(tmp_path: Path) -> None:
    bundle, _ = train_bundle("iris", "LogisticRegression(max_iter=500)", tmp_path / "b")
    with pytest.raises(BundleError, match=r"has no model.onnx; run `onnxbridge convert` first"):
        validate_bundle(bundle)


def test_negative_tolerance(iris_bundle: Bundle) -> None:
    with pytest.raises(DataError, match=r"tolerances must be finite numbers >= 0"):
        validate_bundle(iris_bundle, atol=-1)


def test_relative_difference_ignores_zero_references() -> None:
    c, _ = _numeric("p", np.array([0.0, 2.0]), np.array([0.5, 2.002]), atol=0, rtol=0)
    assert c.max_rel_diff == pytest.approx(0.001)
    assert c.max_abs_diff == pytest.approx(0.5)


def test_a_different_model_is_divergent(iris_bundle: Bundle) -> None:
    from sklearn.ensemble import RandomForestClassifier

    from onnxbridge import convert_estimator

    X, y = iris_bundle.load_holdout()
    other = RandomForestClassifier(n_estimators=1, max_depth=1, random_state=1).fit(X, y)
    convert_estimator(other, X.head(5)).save(iris_bundle.onnx_path)
    iris_bundle.record_file("model.onnx")
    iris_bundle.save_card()
    report = validate_bundle(iris_bundle)
    assert report.verdict == "DIVERGENT"
    label, proba = report.outputs
    assert label.n_mismatched > 0 and not label.ok
    assert not proba.ok and proba.max_abs_diff > 0.1
