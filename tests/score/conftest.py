"""Fixtures of the score tests: real converted models and data files (fixed seeds)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from onnxbridge import convert_bundle, train_bundle

IRIS_COLUMNS = ["sepal length (cm)", "sepal width (cm)", "petal length (cm)", "petal width (cm)"]


def iris_like(n: int, seed: int = 0, first_id: int = 0) -> pd.DataFrame:
    """``n`` rows in the ranges of the Iris features, with an ``id`` key column."""
    rng = np.random.RandomState(seed)
    low, high = np.array([4.3, 2.0, 1.0, 0.1]), np.array([7.9, 4.4, 6.9, 2.5])
    values = low + rng.rand(n, 4) * (high - low)
    frame = pd.DataFrame(values, columns=IRIS_COLUMNS)
    frame.insert(0, "id", np.arange(first_id, first_id + n, dtype=np.int64))
    return frame


@pytest.fixture(scope="session")
def rows() -> Callable[..., pd.DataFrame]:
    """``rows(n, seed=0, first_id=0)``: Iris-like rows with an ``id`` column."""
    return iris_like


@pytest.fixture(scope="session")
def iris_model(_iris_bundle_master: Path) -> Path:
    """The reference Iris forest (10 trees) as a .onnx file (its source accepts NaN)."""
    return _iris_bundle_master / "model.onnx"


@pytest.fixture(scope="session")
def logreg_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An Iris LogisticRegression whose source refuses missing values."""
    out = tmp_path_factory.mktemp("logreg") / "iris-logreg"
    bundle, _ = train_bundle("iris", "LogisticRegression(max_iter=500)", out)
    convert_bundle(bundle)
    return bundle.onnx_path


@pytest.fixture(scope="session")
def houses_model(tmp_path_factory: pytest.TempPathFactory, regression_csv: Path) -> Path:
    """A regressor on the houses CSV (int, float and bool features)."""
    out = tmp_path_factory.mktemp("houses") / "houses-rf"
    spec = "RandomForestRegressor(n_estimators=5, random_state=0)"
    bundle, _ = train_bundle(str(regression_csv), spec, out, target="price")
    convert_bundle(bundle)
    return bundle.onnx_path
