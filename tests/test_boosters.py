"""Boosters from the command line's spec language to a validated bundle."""

from __future__ import annotations

import pytest

from onnxbridge import convert_bundle, train_bundle, validate_bundle
from onnxbridge.errors import ModelSpecError
from onnxbridge.train import parse_model_spec


def test_booster_specs_parse_with_quiet_defaults() -> None:
    lgbm = parse_model_spec("LGBMClassifier(n_estimators=7)")
    assert lgbm.get_params()["n_estimators"] == 7 and lgbm.get_params()["verbose"] == -1
    xgb = parse_model_spec("XGBRegressor(n_estimators=5, max_depth=3)")
    assert xgb.get_params()["max_depth"] == 3
    cat = parse_model_spec("CatBoostClassifier(iterations=5)")
    assert cat.get_params()["allow_writing_files"] is False
    with pytest.raises(ModelSpecError, match="XGBClassifier has no parameter 'n_trees'"):
        parse_model_spec("XGBClassifier(n_trees=5)")


@pytest.mark.parametrize(
    ("data", "spec"),
    [
        # breast_cancer's column names have spaces, which LightGBM records as underscores.
        ("breast_cancer", "LGBMClassifier(n_estimators=20)"),
        ("diabetes", "XGBRegressor(n_estimators=20, max_depth=3)"),
        ("wine", "CatBoostClassifier(iterations=20)"),
    ],
)
def test_booster_bundle_converts_and_validates(tmp_path, monkeypatch, data: str, spec: str) -> None:
    monkeypatch.chdir(tmp_path)  # CatBoost must not leave catboost_info/ behind
    bundle, _ = train_bundle(data, spec, tmp_path / "b")
    result = convert_bundle(bundle)  # the .skops file loads without --trust
    assert result.metadata.features.names == bundle.schema.names
    assert validate_bundle(bundle).verdict == "EQUIVALENT"
    assert not (tmp_path / "catboost_info").exists()
