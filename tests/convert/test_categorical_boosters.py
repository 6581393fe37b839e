"""LightGBM, XGBoost and CatBoost native categorical splits: converted, run in ONNX Runtime,
compared.

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
        (
            lambda: LGBMClassifier(**_LGBM, min_data_per_group=5, cat_smooth=1),
            ["colour", "code", "size"],  # size: 3 categories, one-vs-rest splits
        ),
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


@pytest.mark.parametrize("precision", ["float", "double"])
def test_integer_codes_declared_categorical_match_the_boosters(precision: str) -> None:
    """A plain array whose first column the booster splits on as categories: codes it knows,
    codes above them, negative codes, fractional values (the libraries cast to int) and NaN
    each go where the library sends them."""
    rng = np.random.RandomState(6)
    X = np.c_[rng.randint(0, 8, 500), rng.normal(size=500)].astype(np.float64)
    X[rng.rand(500) < 0.1, 0] = np.nan
    y = np.nan_to_num(X[:, 0], nan=9.0) % 3 + X[:, 1]
    codes = [0, 1, 2, 3, 4, 5, 6, 7, 8, 100, -1, -3, np.nan, 2.5, 2.99, 7.5, -0.5, -0.99, -1.5]
    held = np.array([[v, 0.3] for v in codes])
    xgb = XGBRegressor(
        n_estimators=8, max_depth=3, n_jobs=1, enable_categorical=True, feature_types=["c", "q"]
    ).fit(X, y)
    lgbm = LGBMRegressor(**_LGBM, min_data_per_group=5, cat_smooth=1)
    lgbm.fit(X, y, categorical_feature=[0])
    for model in (xgb, lgbm):
        result = convert_estimator(model, X[:30], precision=precision)
        for rows in (held, X[:100]):
            got = _run(result, rows)["value"].ravel()
            np.testing.assert_allclose(got, model.predict(rows), atol=TOLERANCE, err_msg="value")


def test_lightgbm_integer_category_column_with_missing_values_validates(tmp_path) -> None:
    """Such a column is float (NaN); validate's range probe feeds it fractional values, which
    LightGBM casts to int: the graph must do the same to stay EQUIVALENT."""
    from onnxbridge.validate import validate_model

    rng = np.random.RandomState(8)
    code = rng.randint(0, 8, 600).astype(np.float64)
    code[rng.rand(600) < 0.1] = np.nan
    X = pd.DataFrame({"code": code, "x": rng.normal(size=600)})
    y = (np.nan_to_num(code, nan=9.0) % 3 == 0) ^ (X["x"] > 0.5)
    model = LGBMClassifier(**_LGBM, min_data_per_group=5)
    model.fit(X[:400], y[:400], categorical_feature=["code"])
    path = tmp_path / "model.onnx"
    convert_estimator(model, X[:30], precision="double").save(path)
    report = validate_model(path, model, X[400:])
    assert report.verdict == "EQUIVALENT", [(p.name, p.ok) for p in report.probe_sets if not p.ok]


def test_xgboost_text_for_a_feature_fitted_on_codes_is_refused() -> None:
    """A model fitted on integer codes stores no categories: text there cannot be coded."""
    rng = np.random.RandomState(7)
    X = np.c_[rng.randint(0, 4, 200), rng.normal(size=200)].astype(np.float64)
    model = XGBRegressor(
        n_estimators=4, max_depth=2, n_jobs=1, enable_categorical=True, feature_types=["c", "q"]
    ).fit(X, X[:, 0] % 2 + X[:, 1])
    sample = pd.DataFrame({"x0": ["0", "1", "2", "3"], "x1": [0.1, 0.2, 0.3, 0.4]})
    with pytest.raises(ConversionError, match=r"feature 0 arrives as text, but the model stores"):
        convert_estimator(model, sample, precision="float")


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


# -- CatBoost ------------------------------------------------------------------------------------
#
# A fitted CatBoost model keeps its categories only as hashes: convert_estimator hands its
# converter the sample's values (and any ``categories=``). The reader is checked by evaluating
# the spec it reads (a plain walk of the trees) against CatBoost's own raw predictions, and the
# conversion end to end in ONNX Runtime; CatBoost is given a missing category as "", as onnxbridge
# gives it.


def _feed(frame: pd.DataFrame) -> list[np.ndarray]:
    """Each column as onnxbridge feeds it: text ("" when missing) or float64."""
    columns = []
    for name in frame.columns:
        column = frame[name]
        if pd.api.types.is_numeric_dtype(column.dtype):
            columns.append(column.to_numpy(dtype=np.float64, na_value=np.nan))
        else:
            values = column.to_numpy(dtype=object)
            columns.append(np.array(["" if pd.isna(v) else str(v) for v in values], dtype=object))
    return columns


def _goes_left(spec, row: int, value) -> bool:
    if row in spec.left_codes:
        known = spec.categories[int(spec.feature[row])]
        if (value == "") if isinstance(value, str) else np.isnan(value):
            return bool(spec.missing_left[row])
        hits = np.flatnonzero(np.array([str(k) == str(value) for k in known]))
        if isinstance(value, float):
            hits = np.flatnonzero(np.array([float(k) == value for k in known]))
        if hits.size == 0:
            return bool(spec.unknown_left[row])
        return bool(np.isin(hits[0], spec.left_codes[row]))
    if np.isnan(value):
        return bool(spec.missing_left[row])
    value = float(np.float32(value)) if spec.native == "float32" else float(value)
    return value <= spec.threshold[row] if spec.rule == "leq" else value < spec.threshold[row]


def _spec_raw_scores(spec, frame: pd.DataFrame) -> np.ndarray:
    """``[N, K]`` raw scores of a spec, by walking each tree for each row."""
    columns = _feed(frame)
    rows = {(int(t), int(n)): i for i, (t, n) in enumerate(zip(spec.tree, spec.node, strict=True))}
    out = np.tile(spec.base, (len(frame), 1))
    for i in range(len(frame)):
        for tree in range(spec.n_trees):
            row = rows[(tree, 0)]
            while not spec.is_leaf[row]:
                left = _goes_left(spec, row, columns[int(spec.feature[row])][i])
                row = rows[(tree, int(spec.left[row] if left else spec.right[row]))]
            out[i] += spec.values[row]
    return out


def _catboost_table(n: int, seed: int) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.RandomState(seed)
    colour = rng.choice(COLOURS, n)
    effect = dict(
        zip(COLOURS, np.random.RandomState(99).normal(size=len(COLOURS)) * 2, strict=True)
    )
    size = rng.choice(SIZES, n)
    x = rng.normal(size=n)
    x[rng.rand(n) < 0.1] = np.nan
    grade = rng.randint(0, 3, n)
    target = np.array([effect[c] for c in colour]) + np.nan_to_num(x, nan=2.0) + (size == "L")
    frame = pd.DataFrame({"colour": colour, "x": x, "size": size, "grade": grade})
    return frame, target + grade


def _catboost_held_out() -> pd.DataFrame:
    """Each known colour, size and grade, an unseen colour and grade, a missing number."""
    n = len(COLOURS) + 3
    return pd.DataFrame(
        {
            "colour": [*COLOURS, "teal", "red", "red"],
            "x": np.r_[np.linspace(-2, 2, n - 1), np.nan],
            "size": [SIZES[i % 3] for i in range(n)],
            "grade": [i % 3 for i in range(n - 1)] + [7],
        }
    )


@pytest.mark.parametrize("task", ["regression", "binary", "multiclass"])
def test_catboost_reader_matches_catboost_given_every_category(task: str) -> None:
    from catboost import CatBoostClassifier, CatBoostRegressor

    from onnxbridge.convert._converters.catboost import catboost_categorical_spec

    frame, target = _catboost_table(400, seed=0)
    params = {
        "iterations": 10,
        "depth": 4,
        "verbose": 0,
        "thread_count": 1,
        "allow_writing_files": False,
        "cat_features": ["colour", "size", "grade"],
        "max_ctr_complexity": 1,
        "one_hot_max_size": 3,  # size and grade one-hot, colour by CTRs
    }
    if task == "regression":
        model = CatBoostRegressor(**params).fit(frame, target)
    else:
        edges = [np.median(target)] if task == "binary" else np.quantile(target, [0.33, 0.66])
        model = CatBoostClassifier(**params).fit(frame, np.digitize(target, edges))
    known = {0: COLOURS, 2: SIZES, 3: [0, 1, 2]}
    spec, _ = catboost_categorical_spec(model, known)
    held = _catboost_held_out()
    expected = model.predict(held, prediction_type="RawFormulaVal").reshape(len(held), -1)
    np.testing.assert_allclose(_spec_raw_scores(spec, held), expected, atol=TOLERANCE)


def test_catboost_reader_refuses_a_sample_missing_categories_and_feature_pairs() -> None:
    from catboost import CatBoostRegressor

    from onnxbridge.convert._converters.catboost import catboost_categorical_spec

    frame, target = _catboost_table(400, seed=1)
    common = {"verbose": 0, "thread_count": 1, "allow_writing_files": False, "depth": 4}
    model = CatBoostRegressor(
        iterations=10, cat_features=["colour"], max_ctr_complexity=1, **common
    ).fit(frame[["colour", "x"]], target)
    with pytest.raises(ConversionError, match=r"hold 5 value\(s\) of column 'colour' but miss 5"):
        catboost_categorical_spec(model, {0: COLOURS[:5]})
    rng = np.random.RandomState(1)
    pairs = pd.DataFrame(
        {
            "a": rng.choice(list("abcdefgh"), 500),
            "b": rng.choice(list("klmnopqr"), 500),
            "x": rng.normal(size=500),
        }
    )
    signal = pairs["a"].isin(list("abcd")) ^ pairs["b"].isin(list("klmn"))
    model = CatBoostRegressor(
        iterations=60, cat_features=["a", "b"], one_hot_max_size=1, max_ctr_complexity=4, **common
    ).fit(pairs, 3.0 * signal + pairs["x"])
    with pytest.raises(
        ConversionError, match=r"combinations of categorical features.*max_ctr_complexity=1"
    ):
        catboost_categorical_spec(model, {0: list("abcdefgh"), 1: list("klmnopqr")})


def _catboost_text(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """The rows as CatBoost takes them: categorical columns as text, a missing value as "",
    an integral number as an integer ("3" for 3.0)."""

    def text(value) -> str:
        if value is None or (isinstance(value, float) and np.isnan(value)):
            return ""
        return str(int(value)) if isinstance(value, float) else str(value)

    out = frame.copy()
    for name in columns:
        out[name] = [text(v) for v in frame[name].astype(object)]
    return out


_CAT_COLUMNS = ["colour", "size", "grade"]
_CATBOOST = {
    "iterations": 12,
    "depth": 4,
    "verbose": 0,
    "thread_count": 1,
    "allow_writing_files": False,
    "random_seed": 0,
    "max_ctr_complexity": 1,
    "one_hot_max_size": 3,  # size one-hot, colour and grade by CTRs
}


def _catboost_training_rows(n: int, seed: int) -> tuple[pd.DataFrame, np.ndarray]:
    """_catboost_table with missing values: text (None) in colour, NaN in grade (a float column
    of integer codes) and in x."""
    frame, target = _catboost_table(n, seed)
    rng = np.random.RandomState(seed + 10)
    frame["colour"] = frame["colour"].astype(object)
    frame.loc[rng.rand(n) < 0.1, "colour"] = None
    frame["grade"] = frame["grade"].astype(float)
    frame.loc[rng.rand(n) < 0.1, "grade"] = np.nan
    return frame, target


def _catboost_new_rows() -> pd.DataFrame:
    """Rows no model saw: every known value, an unseen colour and grade, missing values in each
    column, duplicates."""
    held = _catboost_held_out()
    held["colour"] = held["colour"].astype(object)
    held["grade"] = held["grade"].astype(float)
    extra = pd.DataFrame(
        {
            "colour": [None, None, "teal", "red"],
            "x": [0.1, np.nan, 0.3, 0.1],
            "size": ["S", "M", "L", "S"],
            "grade": [1.0, np.nan, 2.0, np.nan],
        }
    )
    return pd.concat([held, extra, extra], ignore_index=True)


@pytest.mark.parametrize("precision", ["float", "double"])
@pytest.mark.parametrize("task", ["regression", "binary-text-labels", "multiclass"])
def test_catboost_categorical_model_converts_exactly(task: str, precision: str) -> None:
    """convert_estimator gives the converter the sample's categories: ONNX Runtime on raw rows
    (text, None, NaN) answers as CatBoost does on the same rows given as it takes them."""
    from catboost import CatBoostClassifier, CatBoostRegressor

    frame, target = _catboost_training_rows(400, seed=0)
    fit_rows = _catboost_text(frame, _CAT_COLUMNS)
    params = {**_CATBOOST, "cat_features": _CAT_COLUMNS}
    if task == "regression":
        model = CatBoostRegressor(**params).fit(fit_rows, target)
    elif task == "multiclass":
        model = CatBoostClassifier(**params).fit(
            fit_rows, np.digitize(target, np.quantile(target, [0.33, 0.66]))
        )
    else:
        labels = np.where(target > np.median(target), "high", "low")
        model = CatBoostClassifier(**params).fit(fit_rows, labels)
    result = convert_estimator(model, frame, precision=precision)
    rows = _catboost_new_rows()
    got = _run(result, rows)
    given = _catboost_text(rows, _CAT_COLUMNS)
    if task == "regression":
        np.testing.assert_allclose(
            got["value"].ravel(), model.predict(given), atol=TOLERANCE, err_msg="value"
        )
        return
    np.testing.assert_array_equal(got["label"], model.predict(given).ravel(), err_msg="label")
    np.testing.assert_allclose(
        got["probabilities"], model.predict_proba(given), atol=TOLERANCE, err_msg="probabilities"
    )


def test_catboost_sample_missing_a_category_is_refused_and_categories_complete_it() -> None:
    from catboost import CatBoostRegressor

    frame, target = _catboost_training_rows(400, seed=3)
    model = CatBoostRegressor(**_CATBOOST, cat_features=_CAT_COLUMNS)
    model.fit(_catboost_text(frame, _CAT_COLUMNS), target)
    few = frame[frame["colour"].isin(COLOURS[:6])].head(40)
    with pytest.raises(ConversionError) as caught:
        convert_estimator(model, few, precision="float")
    message = str(caught.value)
    assert "hold 6 value(s) of column 'colour' but miss" in message
    assert "give sample= the rows that hold every category of column 'colour'" in message
    assert "\n" not in message
    result = convert_estimator(model, few, precision="float", categories={"colour": COLOURS})
    rows = _catboost_new_rows()
    np.testing.assert_allclose(
        _run(result, rows)["value"].ravel(),
        model.predict(_catboost_text(rows, _CAT_COLUMNS)),
        atol=TOLERANCE,
    )
