"""Booster specs take the parameters the boosters take: their constructor's, LightGBM's config
names and aliases, XGBoost's booster parameters; unknown names are refused with a close match."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cli_support import assert_one_line_error, run
from onnxbridge import ModelSpecError
from onnxbridge.train import fit_model, parse_model_spec


@pytest.fixture
def small_csv(tmp_path: Path) -> Path:
    rng = np.random.RandomState(0)
    X = rng.rand(120, 3)
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    frame["y"] = X[:, 0] + 0.5 * X[:, 1]
    path = tmp_path / "small.csv"
    frame.to_csv(path, index=False)
    return path


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        # A spec written as in XGBoost's docs, and LightGBM's config names.
        ("LGBMRegressor(n_estimators=100, verbose=-1)", {"n_estimators": 100, "verbose": -1}),
        ("LGBMRegressor(max_bin=63, path_smooth=0.5)", {"max_bin": 63, "path_smooth": 0.5}),
        ("LGBMRegressor(lambda_l2=1.0)", {"reg_lambda": 1.0}),
        # An alias of a declared parameter sets that parameter (LightGBM would keep the
        # constructor's default over an alias).
        (
            "LGBMRegressor(num_leaf=7, min_data_in_leaf=3, feature_fraction=0.5, seed=1)",
            {"num_leaves": 7, "min_child_samples": 3, "colsample_bytree": 0.5, "random_state": 1},
        ),
        # XGBoost's constructor keywords and the booster parameters it forwards (aliases too).
        (
            'XGBRegressor(max_cat_to_onehot=1, tree_method="hist", enable_categorical=True)',
            {"max_cat_to_onehot": 1, "tree_method": "hist", "enable_categorical": True},
        ),
        (
            'XGBRegressor(eval_metric="rmse", eta=0.3, nthread=1, seed=1, alpha=0.1)',
            {"eval_metric": "rmse", "eta": 0.3, "nthread": 1, "seed": 1, "alpha": 0.1},
        ),
        (
            'XGBRegressor(booster="dart", rate_drop=0.1, skip_drop=0.5)',
            {"booster": "dart", "rate_drop": 0.1, "skip_drop": 0.5},
        ),
        (
            'XGBRegressor(objective="reg:tweedie", tweedie_variance_power=1.2)',
            {"objective": "reg:tweedie", "tweedie_variance_power": 1.2},
        ),
        # CatBoost's constructor keywords.
        (
            "CatBoostRegressor(depth=3, l2_leaf_reg=3, one_hot_max_size=2, cat_features=[0])",
            {"depth": 3, "l2_leaf_reg": 3, "one_hot_max_size": 2, "cat_features": [0]},
        ),
    ],
)
def test_booster_parameters_as_written_are_accepted(spec: str, expected: dict) -> None:
    params = parse_model_spec(spec).get_params()
    assert {k: params.get(k) for k in expected} == expected


def test_booster_parameters_reach_the_fitted_model(small_csv: Path) -> None:
    result = fit_model(
        str(small_csv),
        "LGBMRegressor(n_estimators=5, num_leaf=3, min_data_in_leaf=4, max_bin=15)",
        target="y",
    )
    # The booster trained with the aliases as LightGBM reads them: at most 3 leaves a tree.
    trees = result.estimator.booster_.dump_model()["tree_info"]
    assert trees and max(t["num_leaves"] for t in trees) <= 3
    assert result.estimator.booster_.params["max_bin"] == 15


@pytest.mark.parametrize(
    ("spec", "pattern"),
    [
        (
            "LGBMRegressor(min_dat_in_leaf=3)",
            r"LGBMRegressor has no parameter 'min_dat_in_leaf'; did you mean min_data_in_leaf",
        ),
        (
            "XGBRegressor(etta=0.1)",
            r"XGBRegressor has no parameter 'etta' \(XGBoost does not use it with "
            r"booster='gbtree', objective='reg:squarederror'\); did you mean eta",
        ),
        (
            "XGBClassifier(rate_drop=0.1)",
            r"XGBClassifier has no parameter 'rate_drop' \(XGBoost does not use it with "
            r"booster='gbtree'",
        ),
        (
            "CatBoostRegressor(dept=3)",
            r"CatBoostRegressor has no parameter 'dept'; did you mean depth",
        ),
        (
            'XGBRegressor(eta="fast")',
            r"XGBoost refused the parameters of XGBRegressor\(eta='fast'\): .*could not be parsed",
        ),
        (
            "LGBMRegressor(num_leaves=3, num_leaf=4)",
            r"LGBMRegressor sets 'num_leaves' twice \('num_leaves' and 'num_leaf' are LightGBM "
            r"names of one parameter\); keep one",
        ),
        (
            "XGBRegressor(eta=0.9, learning_rate=0.01)",
            r"XGBRegressor sets 'learning_rate' twice \('learning_rate' and 'eta' are XGBoost "
            r"names of one parameter",
        ),
        (
            "XGBClassifier(seed=1, random_state=2)",
            r"XGBClassifier sets 'random_state' twice",
        ),
        (
            "CatBoostClassifier(silent=True, verbose=True)",
            r"cannot create CatBoostClassifier .*Only one of parameters",
        ),
        # Values are still literals, never code.
        ("LGBMRegressor(max_bin=int('63'))", r"unknown estimator 'int'"),
    ],
)
def test_unknown_or_bad_booster_parameters_are_refused(spec: str, pattern: str) -> None:
    with pytest.raises(ModelSpecError, match=pattern):
        parse_model_spec(spec)


@pytest.mark.parametrize(
    ("spec", "name", "value", "absent"),
    [
        # The quiet defaults are real parameters, and a spec's own verbosity replaces them
        # (under any of their names) instead of clashing with them.
        ("LGBMRegressor(verbose=2)", "verbose", 2, None),
        ("LGBMRegressor(verbosity=0)", "verbosity", 0, "verbose"),
        ('CatBoostRegressor(logging_level="Silent")', "logging_level", "Silent", "verbose"),
        ("CatBoostRegressor(silent=True)", "silent", True, "verbose"),
        ("CatBoostRegressor(allow_writing_files=False)", "allow_writing_files", False, None),
    ],
)
def test_a_spec_sets_the_quiet_defaults_itself(
    spec: str, name: str, value: object, absent: str | None
) -> None:
    params = parse_model_spec(spec).get_params()
    assert params[name] == value
    if absent is not None:
        assert params.get(absent) is None


def test_catboost_with_its_own_verbosity_fits(tmp_path: Path, small_csv: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = fit_model(
        str(small_csv), 'CatBoostRegressor(iterations=5, logging_level="Silent")', target="y"
    )
    assert result.task == "regression" and "r2" in result.metrics


def test_cli_trains_lightgbm_with_parameters_as_written(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, small_csv: Path
) -> None:
    spec = "LGBMRegressor(n_estimators=5, verbose=-1, max_bin=31, min_data_in_leaf=5)"
    code, out, err = run(
        capsys,
        "train",
        "--data",
        small_csv,
        "--target",
        "y",
        "--model",
        spec,
        "--out",
        tmp_path / "b",
    )
    assert code == 0, err
    assert "trained LGBMRegressor" in out
    assert (tmp_path / "b" / "model.skops").is_file()


def test_cli_refuses_an_unknown_booster_parameter_in_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, small_csv: Path
) -> None:
    code, _, err = run(
        capsys,
        "train",
        "--data",
        small_csv,
        "--target",
        "y",
        "--model",
        "LGBMRegressor(max_bins_=3)",
        "--out",
        tmp_path / "b",
    )
    assert_one_line_error(code, err, r"LGBMRegressor has no parameter 'max_bins_'; did you mean")
    assert not (tmp_path / "b").exists()


def test_without_lightgbms_parameter_list_only_its_constructor_parameters_pass(
    monkeypatch,
) -> None:
    # LightGBM gives its parameter list only through a private name: if a release moves it,
    # specs say so instead of crashing, and the constructor's own parameters still work.
    import lightgbm.basic

    monkeypatch.delattr(lightgbm.basic, "_ConfigAliases")
    assert parse_model_spec("LGBMRegressor(num_leaves=7)").get_params()["num_leaves"] == 7
    with pytest.raises(
        ModelSpecError,
        match=r"cannot check LGBMRegressor parameter 'max_bin': lightgbm \S+ does not give its "
        r"parameter list .*use the constructor's own parameters: .*num_leaves",
    ):
        parse_model_spec("LGBMRegressor(max_bin=63)")


def test_without_xgboosts_validation_report_only_its_constructor_parameters_pass(
    monkeypatch,
) -> None:
    # XGBoost's booster parameters are checked by the report of its own parameter validation;
    # a release that stops reporting gets a clear error, not a silent pass.
    import xgboost

    monkeypatch.setattr(xgboost.Booster, "save_config", lambda self: "{}")
    assert parse_model_spec("XGBRegressor(max_depth=3)").get_params()["max_depth"] == 3
    with pytest.raises(
        ModelSpecError,
        match=r"cannot check XGBRegressor parameter 'eta': xgboost \S+ gave no parameter "
        r"validation report; use the constructor's own parameters: .*learning_rate",
    ):
        parse_model_spec("XGBRegressor(eta=0.1)")
