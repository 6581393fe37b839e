"""Legitimate models still load: every fitted model onnxbridge converts, saved with skops, loads
through ``onnxbridge.load_estimator`` without ``trusted=`` and predicts as before.

The models: every estimator of the coverage run (fitted on the harness's own data, as the
coverage run fits it), the boosters' classifier, regressor and ranker, HistGradientBoosting on
pandas category columns, LightGBM and XGBoost on category columns, and the pipelines
``train --preprocess auto`` builds (trained into a bundle and loaded from it).
"""

from __future__ import annotations

import importlib.util
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import skops.io as sio

from onnxbridge import Bundle, load_estimator, save_estimator, train_bundle
from onnxbridge.coverage import all_cases, make_data

AREA = "trusted models"

# skops cannot save these at all (skops.io.dump raises UnsupportedTypeException): they never
# reach the loader, and the test checks that this is still so.
SKOPS_CANNOT_SAVE = {"Birch"}


def _fit(case: Any) -> tuple[Any, Any]:
    with warnings.catch_warnings():
        # The estimators' own warnings on small data (convergence, deprecations) are not what
        # this test is about; the coverage run records them.
        warnings.simplefilter("ignore")
        return _fit_quietly(case)


def _fit_quietly(case: Any) -> tuple[Any, Any]:
    data = make_data(case.data)
    estimator = case.build()
    if data.X_fit is None:  # target transformers (LabelEncoder, ...) are fitted on y alone
        estimator.fit(data.y_fit)
        return estimator, data.y_fit
    if data.y_fit is None:
        estimator.fit(data.X_fit)
    else:
        estimator.fit(data.X_fit, data.y_fit)
    return estimator, data.X_sklearn


def _outputs(estimator: Any, X: Any) -> Any:
    """What the model gives for ``X`` (predict, else transform, else score_samples), or the
    type of the error it raises on it; None when it has none of these."""
    for method in ("predict", "transform", "score_samples"):
        if hasattr(estimator, method):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    out = getattr(estimator, method)(X)
                except (ValueError, TypeError) as exc:  # e.g. PatchExtractor wants images
                    return type(exc)
            return out.toarray() if hasattr(out, "toarray") else np.asarray(out)
    return None


def _assert_loads_the_same(estimator: Any, X: Any, path: Path, figures: Callable) -> None:
    save_estimator(estimator, path)
    with warnings.catch_warnings():
        # Deprecated estimators (PassiveAggressive*) warn as they are created, loaded too.
        warnings.simplefilter("ignore", FutureWarning)
        loaded = load_estimator(path)  # no trusted=: the reviewed list alone
    assert type(loaded) is type(estimator)
    expected, got = _outputs(estimator, X), _outputs(loaded, X)
    if isinstance(expected, type):
        assert got is expected
    elif expected is not None:
        np.testing.assert_array_equal(got, expected)
    figures(AREA, "models loaded", 1)


@pytest.mark.parametrize("case", all_cases(), ids=lambda c: c.name)
def test_every_coverage_estimator_loads_without_trust(case: Any, tmp_path: Path, figures) -> None:
    estimator, X = _fit(case)
    if case.name in SKOPS_CANNOT_SAVE:
        with pytest.raises(sio.exceptions.UnsupportedTypeException):
            sio.dumps(estimator)
        figures(AREA, "skops cannot save", 1)
        return
    _assert_loads_the_same(estimator, X, tmp_path / "model.skops", figures)


def _boosters() -> list[tuple[str, Callable[[], Any], str]]:
    """(name, unfitted model, what it is fitted on): the boosters' classifier, regressor and
    ranker, and the models that keep category columns."""
    models: list[tuple[str, Callable[[], Any], str]] = []
    from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor

    models += [
        (
            "HistGradientBoostingClassifier-categories",
            lambda: HistGradientBoostingClassifier(max_iter=5, categorical_features="from_dtype"),
            "categories",
        ),
        (
            "HistGradientBoostingRegressor-categories",
            lambda: HistGradientBoostingRegressor(max_iter=5, categorical_features="from_dtype"),
            "categories-regression",
        ),
    ]
    if importlib.util.find_spec("xgboost"):
        import xgboost

        models += [
            ("XGBClassifier", lambda: xgboost.XGBClassifier(n_estimators=5), "binary"),
            ("XGBRegressor", lambda: xgboost.XGBRegressor(n_estimators=5), "regression"),
            ("XGBRanker", lambda: xgboost.XGBRanker(n_estimators=5), "ranking"),
            ("XGBRFClassifier", lambda: xgboost.XGBRFClassifier(n_estimators=5), "binary"),
            (
                "XGBClassifier-categories",
                lambda: xgboost.XGBClassifier(n_estimators=5, enable_categorical=True),
                "categories",
            ),
        ]
    if importlib.util.find_spec("lightgbm"):
        import lightgbm

        quiet = {"n_estimators": 5, "verbose": -1}
        models += [
            ("LGBMClassifier", lambda: lightgbm.LGBMClassifier(**quiet), "binary"),
            ("LGBMRegressor", lambda: lightgbm.LGBMRegressor(**quiet), "regression"),
            ("LGBMRanker", lambda: lightgbm.LGBMRanker(**quiet), "ranking"),
            ("LGBMClassifier-categories", lambda: lightgbm.LGBMClassifier(**quiet), "categories"),
        ]
    if importlib.util.find_spec("catboost"):
        import catboost

        quiet_cb = {"iterations": 5, "verbose": 0, "allow_writing_files": False}
        models += [
            ("CatBoostClassifier", lambda: catboost.CatBoostClassifier(**quiet_cb), "binary"),
            ("CatBoostRegressor", lambda: catboost.CatBoostRegressor(**quiet_cb), "regression"),
            ("CatBoostRanker", lambda: catboost.CatBoostRanker(**quiet_cb), "ranking"),
        ]
    return models


def _fit_booster(model: Any, kind: str) -> tuple[Any, Any]:
    rng = np.random.RandomState(0)
    X = pd.DataFrame(rng.rand(200, 5), columns=list("abcde"))
    y = (X["a"] > 0.5).astype(int)
    if kind.startswith("categories"):
        X["colour"] = pd.Categorical(rng.choice(["red", "green", "blue"], 200))
    if kind == "ranking":
        relevance = rng.randint(0, 3, 200)
        groups = np.repeat(np.arange(20), 10)
        if type(model).__module__.startswith("catboost"):
            return model.fit(X, relevance, group_id=groups), X
        return model.fit(X, relevance, group=[10] * 20), X
    target = X["b"] if kind in ("regression", "categories-regression") else y
    return model.fit(X, target), X


@pytest.mark.parametrize(
    ("build", "kind"), [pytest.param(build, kind, id=name) for name, build, kind in _boosters()]
)
def test_boosters_and_category_models_load_without_trust(
    build: Callable[[], Any], kind: str, tmp_path: Path, figures
) -> None:
    estimator, X = _fit_booster(build(), kind)
    _assert_loads_the_same(estimator, X, tmp_path / "model.skops", figures)


@pytest.fixture(scope="module")
def mixed_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Numbers with a gap, and text with a gap: what --preprocess auto imputes and encodes."""
    rng = np.random.RandomState(0)
    n = 200
    frame = pd.DataFrame(
        {
            "amount": rng.rand(n),
            "count": rng.randint(0, 9, n),
            "city": rng.choice(["Oslo", "Lima", None], n),
        }
    )
    frame.loc[3, "amount"] = np.nan
    frame["target"] = (frame["amount"].fillna(0.5) > 0.5).astype(int)
    path = tmp_path_factory.mktemp("mixed") / "mixed.csv"
    frame.to_csv(path, index=False)
    return path


PREPROCESSED = [
    "LogisticRegression(max_iter=200)",
    "RandomForestClassifier(n_estimators=5)",
    "HistGradientBoostingClassifier(max_iter=5)",
    "GaussianNB()",
    "KNeighborsClassifier()",
    "XGBClassifier(n_estimators=5)",
    "LGBMClassifier(n_estimators=5)",
    "CatBoostClassifier(iterations=5)",
]


@pytest.mark.parametrize("spec", PREPROCESSED)
def test_preprocess_auto_bundles_load_without_trust(
    spec: str, mixed_csv: Path, tmp_path: Path, figures
) -> None:
    if spec.startswith(("XGB", "LGBM", "CatBoost")):
        module = {"X": "xgboost", "L": "lightgbm", "C": "catboost"}[spec[0]]
        pytest.importorskip(module)
    bundle, result = train_bundle(
        str(mixed_csv), spec, tmp_path / "b", target="target", preprocess="auto"
    )
    loaded = Bundle.open(bundle.path).load_estimator()  # the bundle's own loader, no trust
    X, _ = bundle.load_holdout()
    np.testing.assert_array_equal(loaded.predict(X), result.estimator.predict(X))
    figures(AREA, "models loaded", 1)
