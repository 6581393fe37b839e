"""LightGBM and XGBoost native categorical splits: converted, run in ONNX Runtime, compared.

Every model is fitted on pandas ``category`` columns (and, for LightGBM, an integer column
named in ``categorical_feature``) and compared with its own ``predict`` / ``predict_proba`` on
rows it was not fitted on: every known category, a category it never saw, missing values,
duplicates, and integer codes outside the known range.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from lightgbm import LGBMClassifier, LGBMRegressor
from xgboost import XGBClassifier, XGBRegressor

from onnxbridge import Predictor, convert_estimator
from onnxbridge.errors import ConversionError

COLOURS = ["red", "green", "blue", "cyan", "magenta", "yellow", "black", "white", "grey", "pink"]
SIZES = ["S", "M", "L"]
TOLERANCE = 1e-5


def _table(n: int, seed: int) -> tuple[pd.DataFrame, np.ndarray]:
    """A table whose target depends on a category column, a number and an integer code."""
    rng = np.random.RandomState(seed)
    colour = rng.choice(COLOURS, n)
    effect = dict(
        zip(COLOURS, np.random.RandomState(99).normal(size=len(COLOURS)) * 2, strict=True)
    )
    x = rng.normal(size=n)
    code = rng.randint(0, 30, n).astype(np.float64)
    code[rng.rand(n) < 0.1] = np.nan
    size = rng.choice(SIZES, n)
    target = np.array([effect[c] for c in colour]) + x + np.nan_to_num(code) % 3 + (size == "L")
    frame = pd.DataFrame(
        {
            "colour": pd.Categorical(colour, categories=COLOURS),
            "x": x,
            "code": code,
            "size": pd.Categorical(size, categories=SIZES, ordered=True),
        }
    )
    frame.loc[rng.rand(n) < 0.1, "colour"] = np.nan
    return frame, target


def _held_out() -> pd.DataFrame:
    """Rows the models never saw: each known colour and size, an unseen colour ("teal"), NaN,
    a duplicate row, codes below, inside and above the fitted range."""
    colours = [*COLOURS, "teal", None, "red", "red"]
    n = len(colours)
    frame = pd.DataFrame(
        {
            "colour": pd.Categorical(colours, categories=[*COLOURS, "teal"]),
            "x": np.r_[np.linspace(-2, 2, n - 1), 2.0],
            "code": [0, 1, 2, 3, 29, 30, 100, -1, np.nan, 5, 6, 7, -3, -3],
            "size": pd.Categorical(
                [SIZES[i % 3] for i in range(n - 2)] + [None, "L"], categories=SIZES, ordered=True
            ),
        }
    )
    return frame


def _run(result, frame: pd.DataFrame) -> dict[str, np.ndarray]:
    predictor = Predictor(result.model.SerializeToString())
    raw = predictor.run(predictor.prepare(frame, allow_missing=True))
    by_name = dict(zip([o.name for o in predictor.outputs], raw, strict=True))
    return {role: np.asarray(by_name[name]) for role, name in result.metadata.outputs.items()}


def _assert_same(model, result, frame: pd.DataFrame) -> None:
    got = _run(result, frame)
    if "label" in got:
        np.testing.assert_array_equal(got["label"], model.predict(frame), err_msg="label")
        np.testing.assert_allclose(
            got["probabilities"],
            model.predict_proba(frame),
            atol=TOLERANCE,
            err_msg="probabilities",
        )
    else:
        np.testing.assert_allclose(
            got["value"].ravel(), model.predict(frame), atol=TOLERANCE, err_msg="value"
        )


_LGBM = {"n_estimators": 12, "num_leaves": 8, "min_child_samples": 5, "verbose": -1, "n_jobs": 1}


@pytest.mark.parametrize("precision", ["float", "double"])
@pytest.mark.parametrize(
    ("make", "categorical"),
    [
        # auto: the unordered category column splits as a set, the ordered one on its codes.
        (lambda: LGBMRegressor(**_LGBM, min_data_per_group=5, cat_smooth=1), "auto"),
        (lambda: LGBMClassifier(**_LGBM, min_data_per_group=5, cat_smooth=1), ["colour", "code"]),
    ],
    ids=["LGBMRegressor-auto", "LGBMClassifier-with-integer-column"],
)
def test_lightgbm_categorical_splits_match_lightgbm(make, categorical, precision: str) -> None:
    frame, target = _table(500, seed=0)
    model = make()
    y = target if isinstance(model, LGBMRegressor) else (target > np.median(target)).astype(int)
    model.fit(frame, y, categorical_feature=categorical)
    result = convert_estimator(model, frame.head(30), precision=precision)
    _assert_same(model, result, _held_out())
    _assert_same(model, result, _table(200, seed=1)[0])


def test_lightgbm_categorical_multiclass_with_string_labels() -> None:
    frame, target = _table(500, seed=2)
    labels = np.array(["low", "mid", "high"])[
        np.digitize(target, np.quantile(target, [0.33, 0.66]))
    ]
    model = LGBMClassifier(**_LGBM, min_data_per_group=5).fit(frame, labels)
    result = convert_estimator(model, frame.head(30), precision="float")
    _assert_same(model, result, _held_out())


def _xgb_frames() -> tuple[pd.DataFrame, np.ndarray, pd.DataFrame]:
    """XGBoost's tables: a text and an integer category column (XGBoost refuses an unseen
    category, so the held-out rows keep to the known ones, in another category order)."""
    frame, target = _table(500, seed=3)
    rng = np.random.RandomState(3)
    frame["grade"] = pd.Categorical(rng.choice([3, 5, 7, 11], len(frame)))
    target = target + (frame["grade"].to_numpy(dtype=np.int64) % 3)
    frame = frame.drop(columns=["code"])
    held = _held_out().drop(columns=["code"])
    held = held[held["colour"] != "teal"].copy()
    held["colour"] = held["colour"].cat.remove_categories(["teal"])
    held["colour"] = held["colour"].cat.reorder_categories(COLOURS[::-1])
    held["grade"] = pd.Categorical([3, 5, 7, 11] * (len(held) // 4) + [11] * (len(held) % 4))
    return frame, target, held


@pytest.mark.parametrize("precision", ["float", "double"])
@pytest.mark.parametrize("onehot", [1, 64], ids=["partition-splits", "one-hot-splits"])
def test_xgboost_categorical_splits_match_xgboost(onehot: int, precision: str) -> None:
    frame, target, held = _xgb_frames()
    common = {"n_estimators": 10, "max_depth": 3, "n_jobs": 1, "enable_categorical": True}
    regressor = XGBRegressor(**common, max_cat_to_onehot=onehot).fit(frame, target)
    _assert_same(regressor, convert_estimator(regressor, frame.head(30), precision=precision), held)
    classes = np.digitize(target, np.quantile(target, [0.33, 0.66]))
    classifier = XGBClassifier(**common, max_cat_to_onehot=onehot).fit(frame, classes)
    result = convert_estimator(classifier, frame.head(30), precision=precision)
    _assert_same(classifier, result, held)
    _assert_same(classifier, result, frame.tail(100))


def test_xgboost_unseen_category_goes_where_a_missing_one_goes() -> None:
    """XGBoost raises on a category it never saw; the ONNX model answers as for a missing one."""
    frame, target, held = _xgb_frames()
    model = XGBRegressor(n_estimators=10, max_depth=3, n_jobs=1, enable_categorical=True)
    model.fit(frame, target)
    result = convert_estimator(model, frame.head(30), precision="double")
    row = held.iloc[[0, 0]].copy()
    row["colour"] = pd.Categorical(["teal", None], categories=[*COLOURS, "teal"])
    unseen, missing = _run(result, row)["value"].ravel()
    assert unseen == missing
    np.testing.assert_allclose(missing, model.predict(row.iloc[[1]])[0], atol=TOLERANCE)


def test_lightgbm_category_columns_must_arrive_as_text() -> None:
    frame, target = _table(300, seed=4)
    model = LGBMRegressor(**_LGBM).fit(frame, target)
    numbers = frame.assign(
        colour=frame["colour"].cat.codes.astype(float), size=frame["size"].cat.codes.astype(float)
    )
    with pytest.raises(ConversionError, match=r"fitted on 2 pandas category column\(s\) but 0"):
        convert_estimator(model, numbers.head(20), precision="float")


def test_a_category_named_by_the_empty_string_is_refused() -> None:
    frame, target = _table(300, seed=5)
    frame["colour"] = frame["colour"].cat.rename_categories({"red": ""})
    model = LGBMRegressor(**_LGBM, min_data_per_group=5).fit(frame, target)
    with pytest.raises(ConversionError, match=r"empty or repeated text"):
        convert_estimator(model, frame.head(20), precision="float")
