"""Shared fixtures: real bundles trained and converted once per session (fixed seeds)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from onnxbridge import Bundle, convert_bundle, train_bundle

# Tests import with --import-mode=importlib, so shared test helpers (tests/cli_support.py) are
# found through the tests folder on sys.path.
sys.path.insert(0, str(Path(__file__).parent))

RF_SPEC = "RandomForestClassifier(n_estimators=10, random_state=42)"
GBR_SPEC = "GradientBoostingRegressor(n_estimators=10, max_depth=2, random_state=0)"


def _master(tmp_path_factory: pytest.TempPathFactory, data: str, spec: str, name: str) -> Path:
    """A bundle trained and converted once per session, to be copied by each test."""
    out = tmp_path_factory.mktemp("master") / name
    bundle, _ = train_bundle(data, spec, out)
    convert_bundle(bundle)
    return out


def _fresh_copy(master: Path, tmp_path: Path) -> Bundle:
    out = tmp_path / master.name
    shutil.copytree(master, out)
    return Bundle.open(out)


@pytest.fixture(scope="session")
def _iris_bundle_master(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _master(tmp_path_factory, "iris", RF_SPEC, "iris-rf")


@pytest.fixture
def iris_bundle(_iris_bundle_master: Path, tmp_path: Path) -> Bundle:
    """A converted Iris RandomForest bundle, copied fresh for each test."""
    return _fresh_copy(_iris_bundle_master, tmp_path)


@pytest.fixture(scope="session")
def regression_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CSV regression problem with a named target column and a bool feature."""
    rng = np.random.RandomState(0)
    n = 300
    frame = pd.DataFrame(
        {
            "size_m2": rng.uniform(20, 200, n),
            "rooms": rng.randint(1, 7, n),
            "age years": rng.uniform(0, 80, n),
            "has_garden": rng.rand(n) > 0.5,
        }
    )
    frame["price"] = (
        3000 * frame["size_m2"]
        + 10000 * frame["rooms"]
        - 500 * frame["age years"]
        + 20000 * frame["has_garden"]
        + rng.normal(0, 1000, n)
    )
    path = tmp_path_factory.mktemp("data") / "houses.csv"
    frame.to_csv(path, index=False)
    return path


@pytest.fixture(scope="session")
def classification_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CSV classification problem with string class labels."""
    rng = np.random.RandomState(1)
    n = 240
    x1, x2 = rng.normal(size=n), rng.normal(size=n)
    label = np.where(x1 + x2 > 0.5, "churn", np.where(x1 - x2 > 0.5, "upgrade", "stay"))
    frame = pd.DataFrame({"tenure": x1, "spend": x2, "segment": label})
    path = tmp_path_factory.mktemp("data") / "customers.csv"
    frame.to_csv(path, index=False)
    return path


@pytest.fixture(scope="session")
def _diabetes_bundle_master(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _master(tmp_path_factory, "diabetes", GBR_SPEC, "diabetes-gbr")


@pytest.fixture
def diabetes_bundle(_diabetes_bundle_master: Path, tmp_path: Path) -> Bundle:
    """A converted diabetes GradientBoostingRegressor bundle, copied fresh for each test."""
    return _fresh_copy(_diabetes_bundle_master, tmp_path)


@pytest.fixture(params=["iris", "diabetes"])
def any_bundle(request: pytest.FixtureRequest) -> Bundle:
    """The reference Iris classifier bundle, then the diabetes regression bundle."""
    return request.getfixturevalue(f"{request.param}_bundle")
