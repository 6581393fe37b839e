"""XGBoost and LightGBM read from their arrays: the same nodes as the libraries' own dumps.

The readers take XGBoost's JSON model and LightGBM's text model a tree at a time with numpy.
Each model here is also walked node by node, the plain way, from the dump the library prints
for people (XGBoost's ``get_dump(dump_format="json")``, LightGBM's ``dump_model()``): the
spec must hold the same nodes, in the same order, with the same thresholds, missing-value
routes, categories and leaf values. Then the conversion runs in ONNX Runtime and must predict
what the library predicts, NaN and unseen categories included.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest
from lightgbm import LGBMClassifier, LGBMRegressor
from xgboost import XGBClassifier, XGBRegressor

from onnxbridge import Predictor, convert_estimator
from onnxbridge.convert._tree_ensemble import TreeEnsembleSpec, from_lightgbm, from_xgboost
from onnxbridge.errors import ConversionError

COLOURS = ["red", "green", "blue", "cyan", "magenta", "yellow", "black", "white"]
# LightGBM reads |x| <= 1e-35 as 0 (a float32 bound).
ZERO_BAND = float(np.float32(1e-35))


def _numbers(n: int, seed: int) -> np.ndarray:
    """Six float32-exact columns, 15 % missing; the last one holds values next to zero."""
    rng = np.random.RandomState(seed)
    X = rng.normal(size=(n, 6)).astype(np.float32).astype(np.float64)
    X[:, 5] *= 1e-36
    X[rng.rand(*X.shape) < 0.15] = np.nan
    return X


def _score(X: np.ndarray) -> np.ndarray:
    return np.nan_to_num(X[:, 0]) + 0.6 * np.nan_to_num(X[:, 1]) - np.isnan(X[:, 2])


def _table(n: int, seed: int) -> pd.DataFrame:
    """Numbers, a pandas category column (some missing) and an integer code column."""
    rng = np.random.RandomState(seed)
    frame = pd.DataFrame(_numbers(n, seed)[:, :3], columns=["x0", "x1", "x2"])
    frame["colour"] = pd.Categorical(rng.choice(COLOURS, n), categories=COLOURS)
    frame.loc[rng.rand(n) < 0.1, "colour"] = np.nan
    frame["code"] = rng.randint(0, 20, n).astype(np.float64)
    return frame


def _table_target(frame: pd.DataFrame) -> np.ndarray:
    effect = dict(zip(COLOURS, np.linspace(-2, 2, len(COLOURS)), strict=True))
    colour = frame["colour"].map(effect).astype(float).fillna(0.5).to_numpy()
    return colour + np.nan_to_num(frame["x0"].to_numpy()) + (frame["code"].to_numpy() % 3 == 0)


def _classes(score: np.ndarray, k: int) -> np.ndarray:
    return np.digitize(score, np.quantile(score, np.linspace(0, 1, k + 1)[1:-1]))


_LGBM: dict[str, Any] = {"verbose": -1, "n_jobs": 1, "random_state": 0}
_XGB: dict[str, Any] = {"n_jobs": 1, "random_state": 0}
_CATEGORIES = {"min_data_per_group": 5, "cat_smooth": 1, "max_cat_to_onehot": 2}


def _fit(name: str) -> tuple[Any, Any, Any]:
    """(model, training rows, rows it never saw) for one case."""
    X, held = _numbers(600, 0), _numbers(300, 1)
    score = _score(X)
    frame, unseen = _table(600, 2), _table(300, 3)
    unseen["colour"] = unseen["colour"].cat.add_categories(["teal"])
    unseen.loc[::7, "colour"] = "teal"  # a category the model never saw
    unseen.loc[::5, "code"] = [-1.0, 25.0, 2.5, np.nan, 40.0, -0.5] * 10  # codes outside the fit
    makers: dict[str, Callable[[], Any]] = {
        "lgbm-binary": lambda: LGBMClassifier(n_estimators=20, num_leaves=15, **_LGBM).fit(
            X, score > 0
        ),
        "lgbm-multiclass": lambda: LGBMClassifier(
            n_estimators=8, num_leaves=12, min_child_samples=5, **_LGBM
        ).fit(X, _classes(score, 3)),
        "lgbm-deep": lambda: LGBMRegressor(
            n_estimators=4, num_leaves=300, min_child_samples=1, **_LGBM
        ).fit(X, score + np.sin(7 * np.nan_to_num(X[:, 3]))),
        "lgbm-no-missing": lambda: LGBMRegressor(n_estimators=6, use_missing=False, **_LGBM).fit(
            X, score
        ),
        "lgbm-single-leaf": lambda: LGBMRegressor(
            n_estimators=3, min_child_samples=10_000, **_LGBM
        ).fit(X, score),
        "lgbm-categorical": lambda: LGBMClassifier(n_estimators=15, **_CATEGORIES, **_LGBM).fit(
            frame, _table_target(frame) > 0, categorical_feature=["colour", "code"]
        ),
        "xgb-binary": lambda: XGBClassifier(n_estimators=20, max_depth=4, **_XGB).fit(X, score > 0),
        "xgb-multiclass": lambda: XGBClassifier(n_estimators=8, max_depth=5, **_XGB).fit(
            X, _classes(score, 3)
        ),
        "xgb-deep": lambda: XGBRegressor(
            n_estimators=4, max_depth=12, min_child_weight=0, **_XGB
        ).fit(X, score + np.sin(7 * np.nan_to_num(X[:, 3]))),
        "xgb-single-leaf": lambda: XGBRegressor(
            n_estimators=3, min_child_weight=1e9, base_score=0.25, **_XGB
        ).fit(X, score),
        "xgb-categorical": lambda: XGBRegressor(
            n_estimators=10, max_depth=4, enable_categorical=True, max_cat_to_onehot=1, **_XGB
        ).fit(_xgboost_table(frame), _table_target(frame)),
    }
    model = makers[name]()
    if name == "xgb-categorical":
        # XGBoost refuses a category it never saw: those rows hold missing values instead.
        unseen["colour"] = unseen["colour"].cat.remove_categories(["teal"])
        return model, _xgboost_table(frame), _xgboost_table(unseen)
    if name.endswith("categorical"):
        return model, frame, unseen
    return model, X, held


def _xgboost_table(frame: pd.DataFrame) -> pd.DataFrame:
    """The integer codes as an XGBoost category column (0 … 19; any other value missing)."""
    code = frame["code"].to_numpy()
    known = np.isin(code, np.arange(20))
    values = pd.Categorical.from_codes(np.where(known, code, -1).astype(int), np.arange(20))
    return frame.assign(code=values)


CASES = [
    "lgbm-binary",
    "lgbm-multiclass",
    "lgbm-deep",
    "lgbm-no-missing",
    "lgbm-single-leaf",
    "lgbm-categorical",
    "xgb-binary",
    "xgb-multiclass",
    "xgb-deep",
    "xgb-single-leaf",
    "xgb-categorical",
]


@pytest.fixture(scope="module", params=CASES)
def case(request: pytest.FixtureRequest) -> tuple[str, Any, Any, Any]:
    return (request.param, *_fit(request.param))


# -- the plain walks over the libraries' dumps --------------------------------------------


def _lightgbm_threshold(t: float) -> float:
    """LightGBM's ``x <= t`` on the raw input: a threshold next to zero compares as zero."""
    if 0.0 <= t < ZERO_BAND:
        return ZERO_BAND
    if -ZERO_BAND <= t < 0.0:
        return float(np.nextafter(-ZERO_BAND, -np.inf))
    return t


def _lightgbm_walk(model: Any) -> list[dict[str, Any]]:
    """``dump_model()`` node by node: each tree in preorder, ids counted as met."""
    rows: list[dict[str, Any]] = []
    for tree, info in enumerate(model.booster_.dump_model()["tree_info"]):
        count = 0

        def visit(node: dict[str, Any], tree: int = tree) -> int:
            nonlocal count
            row: dict[str, Any] = {"tree": tree, "node": count, "feature": -1, "threshold": 0.0}
            row.update(left=-1, right=-1, missing=False, value=0.0, listed=None)
            count += 1
            rows.append(row)
            if "split_feature" not in node:
                row["value"] = node["leaf_value"]
                return int(row["node"])
            row["feature"] = node["split_feature"]
            if node["decision_type"] == "==":
                row["listed"] = [int(c) for c in node["threshold"].split("||")]
            else:
                row["threshold"] = _lightgbm_threshold(node["threshold"])
                nan_as_zero = node["missing_type"] != "NaN"
                row["missing"] = row["threshold"] >= 0 if nan_as_zero else node["default_left"]
            row["left"] = visit(node["left_child"])
            row["right"] = visit(node["right_child"])
            return int(row["node"])

        visit(info["tree_structure"])
    return rows


def _xgboost_walk(model: Any) -> list[dict[str, Any]]:
    """``get_dump(dump_format="json")`` node by node: each tree's nodes by their ids."""
    booster = model.get_booster()
    names = list(booster.feature_names or [])
    rows: list[dict[str, Any]] = []
    for tree, text in enumerate(booster.get_dump(dump_format="json")):
        found: list[dict[str, Any]] = []
        stack = [json.loads(text)]
        while stack:
            node = stack.pop()
            row: dict[str, Any] = {"tree": tree, "node": node["nodeid"], "feature": -1}
            row.update(threshold=0.0, left=-1, right=-1, missing=False, value=0.0, listed=None)
            if "leaf" in node:
                row["value"] = float(np.float32(node["leaf"]))
            else:
                split = node["split"]
                row["feature"] = names.index(split) if names else int(split[1:])
                left, right = node["yes"], node["no"]
                if isinstance(node["split_condition"], list):
                    # The categories listed go "yes", which is the right child.
                    row["listed"] = node["split_condition"]
                    left, right = right, left
                else:
                    row["threshold"] = float(np.float32(node["split_condition"]))
                row.update(left=left, right=right, missing=node["missing"] == left)
                stack.extend(node["children"])
            found.append(row)
        rows.extend(sorted(found, key=lambda r: r["node"]))
    return rows


def _assert_spec_is_the_walk(spec: TreeEnsembleSpec, rows: list[dict[str, Any]], lib: str) -> None:
    for key, column in [
        ("tree", spec.tree),
        ("node", spec.node),
        ("feature", spec.feature),
        ("left", spec.left),
        ("right", spec.right),
        ("missing", spec.missing_left),
    ]:
        np.testing.assert_array_equal(column, [r[key] for r in rows], err_msg=key)
    np.testing.assert_array_equal(spec.threshold, [r["threshold"] for r in rows], "threshold")
    np.testing.assert_array_equal(spec.values[:, 0], [r["value"] for r in rows], "values")
    categorical = {i: r["listed"] for i, r in enumerate(rows) if r["listed"] is not None}
    assert sorted(spec.left_codes) == sorted(categorical)
    for row, listed in categorical.items():
        if lib == "lightgbm":  # the listed categories go left
            np.testing.assert_array_equal(spec.left_codes[row], listed)
        else:  # the listed categories go right, every other known one left
            every = np.arange(len(spec.categories[int(spec.feature[row])]))
            np.testing.assert_array_equal(spec.left_codes[row], np.setdiff1d(every, listed))


def test_reader_gives_the_nodes_of_the_librarys_own_dump(case) -> None:
    name, model, _, _ = case
    if name.startswith("lgbm"):
        spec, header = from_lightgbm(model)
        _assert_spec_is_the_walk(spec, _lightgbm_walk(model), "lightgbm")
        k = header["num_tree_per_iteration"]
        assert header["objective"] == model.booster_.dump_model()["objective"]
    else:
        spec, _ = from_xgboost(model)
        _assert_spec_is_the_walk(spec, _xgboost_walk(model), "xgboost")
        k = max(len(getattr(model, "classes_", [])), 2) if name == "xgb-multiclass" else 1
    np.testing.assert_array_equal(spec.tree_output, np.arange(spec.n_trees) % k)
    if "categorical" in name:
        assert spec.left_codes, "the model has categorical splits"
    if "single-leaf" in name:
        assert np.all(spec.is_leaf[spec.node == 0]), "every tree is one leaf"


def _predictions(result: Any, rows: Any) -> dict[str, np.ndarray]:
    predictor = Predictor(result.model.SerializeToString())
    raw = predictor.run(predictor.prepare(rows, allow_missing=True))
    by_name = dict(zip([o.name for o in predictor.outputs], raw, strict=True))
    return {role: np.asarray(by_name[name]) for role, name in result.metadata.outputs.items()}


@pytest.mark.parametrize("precision", ["float", "double"])
def test_conversion_predicts_like_the_library(case, precision: str) -> None:
    _, model, train, held = case
    result = convert_estimator(model, train[:40], precision=precision)
    got = _predictions(result, held)
    if "label" in got:
        np.testing.assert_array_equal(got["label"], model.predict(held))
        np.testing.assert_allclose(got["probabilities"], model.predict_proba(held), atol=1e-5)
    else:
        np.testing.assert_allclose(got["value"].ravel(), model.predict(held), atol=1e-5)


def test_lightgbm_linear_trees_are_refused() -> None:
    X = np.nan_to_num(_numbers(300, 4))
    model = LGBMRegressor(n_estimators=3, linear_tree=True, **_LGBM).fit(X, _score(X))
    with pytest.raises(ConversionError, match=r"linear trees \(linear_tree=True\) cannot be"):
        convert_estimator(model, X[:5])
