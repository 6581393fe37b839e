"""Fixtures for tune: a regression bundle beside the shared Iris one, tiny timings."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from onnxbridge import Bundle, convert_bundle, train_bundle

GBR_SPEC = "GradientBoostingRegressor(n_estimators=10, max_depth=2, random_state=0)"

# Tiny measurements: these tests check what is reported, not how fast anything is.
FAST = {"repeat": 2, "min_time": 0.002}


@pytest.fixture(scope="session")
def _diabetes_bundle_master(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("master") / "diabetes-gbr"
    bundle, _ = train_bundle("diabetes", GBR_SPEC, out)
    convert_bundle(bundle)
    return out


@pytest.fixture
def diabetes_bundle(_diabetes_bundle_master: Path, tmp_path: Path) -> Bundle:
    """A converted diabetes GradientBoostingRegressor bundle, copied fresh for each test."""
    out = tmp_path / "diabetes-gbr"
    shutil.copytree(_diabetes_bundle_master, out)
    return Bundle.open(out)


@pytest.fixture(params=["iris", "diabetes"])
def any_bundle(request: pytest.FixtureRequest) -> Bundle:
    """The reference Iris classifier bundle, then the diabetes regression bundle."""
    return request.getfixturevalue(f"{request.param}_bundle")
