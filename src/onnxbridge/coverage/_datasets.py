"""Small, seeded training and comparison data for the coverage run, one kind per estimator need.

Every kind gives the rows to fit on, the rows to compare on (never the training rows), and both
in the form each side takes: scikit-learn gets what it was fitted on (an array, a list of texts, a
1-D target), ONNX Runtime gets the table ``convert`` was given a sample of (an array or a
DataFrame). Sizes are small (200 rows to fit, 100 to compare, 6 features) so the whole run stays
within minutes on a shared machine.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from onnxbridge.errors import DataError

__all__ = ["DATA_KINDS", "CoverageData", "make_data"]

N_FIT = 200
N_COMPARE = 100
N_FEATURES = 6
SEED = 0


@dataclass
class CoverageData:
    """The data one estimator is trained and compared on.

    Attributes:
        kind: the data kind's name (a key of :data:`DATA_KINDS`).
        description: one line saying what the data is, for the report.
        X_fit: what ``fit`` takes as ``X``.
        y_fit: what ``fit`` takes as ``y`` (None for unsupervised estimators; for estimators
            that are fitted on a target only, such as ``LabelEncoder``, ``X_fit`` is None).
        sample: the rows given to ``convert_estimator`` (the input schema comes from them).
        X_onnx: ``[N, F]`` comparison rows for ONNX Runtime (array or DataFrame).
        X_sklearn: the same rows as scikit-learn takes them.
    """

    kind: str
    description: str
    X_fit: Any
    y_fit: Any
    sample: Any
    X_onnx: Any
    X_sklearn: Any


def _split(X: Any, y: Any, kind: str, description: str) -> CoverageData:
    X_fit, X_cmp = X[:N_FIT], X[N_FIT:]
    y_fit = None if y is None else y[:N_FIT]
    return CoverageData(kind, description, X_fit, y_fit, X_fit[:20], X_cmp, X_cmp)


def _classification(n_classes: int = 3) -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import make_classification

    return make_classification(
        n_samples=N_FIT + N_COMPARE,
        n_features=N_FEATURES,
        n_informative=4,
        n_redundant=0,
        n_classes=n_classes,
        random_state=SEED,
    )


def _regression(n_targets: int = 1) -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import make_regression

    return make_regression(
        n_samples=N_FIT + N_COMPARE,
        n_features=N_FEATURES,
        n_informative=4,
        n_targets=n_targets,
        noise=10.0,
        random_state=SEED,
    )


def _multiclass() -> CoverageData:
    X, y = _classification(3)
    return _split(X, y, "multiclass", "make_classification: 6 features, 3 classes")


def _binary() -> CoverageData:
    X, y = _classification(2)
    return _split(X, y, "binary", "make_classification: 6 features, 2 classes")


def _semi_supervised() -> CoverageData:
    X, y = _classification(3)
    y = y.copy()
    y[np.random.RandomState(SEED).rand(len(y)) < 0.3] = -1  # 30 % unlabeled rows
    return _split(X, y, "semi_supervised", "make_classification, 3 classes, 30 % labels -1")


def _multilabel() -> CoverageData:
    from sklearn.datasets import make_multilabel_classification

    X, y = make_multilabel_classification(
        n_samples=N_FIT + N_COMPARE, n_features=N_FEATURES, n_classes=3, random_state=SEED
    )
    return _split(X, y, "multilabel", "make_multilabel_classification: 6 features, 3 labels")


def _regression_data() -> CoverageData:
    X, y = _regression(1)
    return _split(X, y, "regression", "make_regression: 6 features, noise 10")


def _positive_target() -> CoverageData:
    X, y = _regression(1)
    y = np.exp((y - y.mean()) / y.std())
    return _split(X, y, "positive_target", "make_regression, target exp(standardised y) > 0")


def _multi_target() -> CoverageData:
    X, y = _regression(2)
    return _split(X, y, "multi_target", "make_regression: 6 features, 2 targets")


def _positive() -> CoverageData:
    X, y = _classification(3)
    return _split(np.abs(X), y, "positive", "|make_classification|: non-negative, 3 classes")


def _unit() -> CoverageData:
    X, y = _classification(3)
    X = (X - X.min(axis=0)) / (X.max(axis=0) - X.min(axis=0))
    return _split(X, y, "unit", "make_classification scaled to [0, 1], 3 classes")


def _counts() -> CoverageData:
    rng = np.random.RandomState(SEED)
    X = rng.poisson(2.0, size=(N_FIT + N_COMPARE, N_FEATURES)).astype(np.float64)
    y = (X[:, 0] + X[:, 1] > X[:, 2] + 2).astype(int) + (X[:, 3] > 3).astype(int)
    return _split(X, y, "counts", "Poisson(2) counts, 6 features, 3 classes")


def _categories() -> CoverageData:
    rng = np.random.RandomState(SEED)
    X = rng.randint(0, 4, size=(N_FIT + N_COMPARE, N_FEATURES)).astype(np.float64)
    y = (X[:, 0] + X[:, 1] + rng.randint(0, 2, len(X))) % 3
    return _split(X, y, "categories", "integer categories 0..3, 6 features, 3 classes")


def _missing() -> CoverageData:
    X, y = _classification(3)
    X = X.copy()
    X[np.random.RandomState(SEED).rand(*X.shape) < 0.1] = np.nan
    return _split(X, y, "missing", "make_classification with 10 % NaN, 3 classes")


def _strings() -> CoverageData:
    rng = np.random.RandomState(SEED)
    n = N_FIT + N_COMPARE
    frame = pd.DataFrame(
        {
            "color": rng.choice(["red", "green", "blue"], n),
            "size": rng.choice(["S", "M", "L", "XL"], n),
            "city": rng.choice(["Paris", "Lyon", "Nice", "Lille", "Metz"], n),
        }
    )
    y = (
        (frame["color"] == "red").to_numpy().astype(int)
        + (frame["size"].isin(["L", "XL"])).to_numpy().astype(int)
        + (rng.rand(n) < 0.2)
    ) % 3
    data = CoverageData(
        "strings",
        "3 string category columns, 3 classes",
        frame.iloc[:N_FIT].reset_index(drop=True),
        y[:N_FIT],
        frame.iloc[:20].reset_index(drop=True),
        frame.iloc[N_FIT:].reset_index(drop=True),
        frame.iloc[N_FIT:].reset_index(drop=True),
    )
    return data


_COLORS = ["red", "green", "blue", "amber"]
_CITIES = ["Paris", "Lyon", "Nice", "Lille", "Metz", "Brest"]


def _category_frame(missing: bool) -> tuple[pd.DataFrame, np.ndarray]:
    """Two string category columns and two numbers; the comparison rows hold categories the
    fit rows never had (``violet``, ``Oslo``) and, with ``missing``, NaN in every column."""
    rng = np.random.RandomState(SEED)
    n = N_FIT + N_COMPARE
    color = rng.choice(_COLORS, n).astype(object)
    city = rng.choice(_CITIES, n).astype(object)
    size = rng.normal(0.0, 1.0, n)
    count = rng.poisson(3.0, n).astype(np.float64)
    y = (
        np.isin(color, ["red", "amber"]).astype(int)
        + np.isin(city, ["Paris", "Nice", "Brest"]).astype(int)
        + (size > 0.5)
    ) % 3
    unseen = N_FIT + np.arange(0, N_COMPARE - 3, 7)
    color[unseen] = "violet"
    city[unseen + 3] = "Oslo"
    if missing:
        color[rng.rand(n) < 0.08] = np.nan
        city[rng.rand(n) < 0.08] = np.nan
        size[rng.rand(n) < 0.05] = np.nan
    frame = pd.DataFrame({"color": color, "city": city, "size": size, "count": count})
    frame.iloc[N_FIT + 50 :] = frame.iloc[N_FIT : N_FIT + 50].to_numpy()  # duplicate rows
    return frame, y


def _category_split(
    frame: pd.DataFrame, y: np.ndarray, kind: str, description: str, *, dtype: str | None
) -> CoverageData:
    fit = frame.iloc[:N_FIT].reset_index(drop=True)
    cmp = frame.iloc[N_FIT:].reset_index(drop=True)
    if dtype is not None:
        fit = fit.astype({c: "category" for c in ("color", "city")})
        if dtype == "own":
            # Each table gets the categories it holds, as a file read anew does: the
            # comparison rows' ``violet`` is a category of theirs the model never saw.
            cmp = cmp.astype({c: "category" for c in ("color", "city")})
        else:
            # The training categories, as XGBoost asks (it refuses a category it never saw):
            # an unseen value arrives as missing.
            for c in ("color", "city"):
                cmp[c] = cmp[c].astype("category").cat.set_categories(fit[c].cat.categories)
    return CoverageData(kind, description, fit, y[:N_FIT], fit.iloc[:20], cmp, cmp)


def _category_dtype() -> CoverageData:
    frame, y = _category_frame(missing=True)
    return _category_split(
        frame,
        y,
        "category_dtype",
        "pandas category columns (strings, NaN; unseen categories and duplicate rows in the "
        "comparison rows) and 2 numbers, 3 classes",
        dtype="own",
    )


def _category_dtype_known() -> CoverageData:
    frame, y = _category_frame(missing=True)
    return _category_split(
        frame,
        y,
        "category_dtype_known",
        "as category_dtype, the comparison rows cast to the training categories (an unseen "
        "value becomes NaN)",
        dtype="training",
    )


def _category_strings() -> CoverageData:
    # CatBoost refuses NaN in a categorical feature: the same table without missing values.
    frame, y = _category_frame(missing=False)
    return _category_split(
        frame,
        y,
        "category_strings",
        "string category columns (unseen categories and duplicate rows in the comparison "
        "rows, no NaN) and 2 numbers, 3 classes",
        dtype=None,
    )


_WORDS = (
    "onnx runtime model tree forest linear kernel graph tensor fast exact float double label "
    "class value score input output batch row column"
).split()


def _documents(n: int) -> list[str]:
    rng = np.random.RandomState(SEED)
    return [" ".join(rng.choice(_WORDS, rng.randint(3, 9))) for _ in range(n)]


def _text() -> CoverageData:
    docs = _documents(N_FIT + N_COMPARE)
    y = np.array([len(d.split()) % 3 for d in docs])
    frame = pd.DataFrame({"text": docs})
    return CoverageData(
        "text",
        "short documents over a 22-word vocabulary (one text column)",
        docs[:N_FIT],
        y[:N_FIT],
        frame.iloc[:20].reset_index(drop=True),
        frame.iloc[N_FIT:].reset_index(drop=True),
        docs[N_FIT:],
    )


def _one_feature() -> CoverageData:
    rng = np.random.RandomState(SEED)
    x = rng.uniform(0, 10, N_FIT + N_COMPARE)
    y = np.sqrt(x) + rng.normal(0, 0.1, len(x))
    X2 = x.reshape(-1, 1)
    return CoverageData(
        "one_feature",
        "one feature x in [0, 10], y = sqrt(x) + noise (fitted on 1-D x)",
        x[:N_FIT],
        y[:N_FIT],
        X2[:20],
        X2[N_FIT:],
        x[N_FIT:],
    )


def _labels() -> CoverageData:
    rng = np.random.RandomState(SEED)
    y = rng.choice(["cat", "dog", "fish"], N_FIT + N_COMPARE)
    frame = pd.DataFrame({"y": y})
    return CoverageData(
        "labels",
        "a string target (cat / dog / fish); fitted on y alone",
        None,
        y[:N_FIT],
        frame.iloc[:20].reset_index(drop=True),
        frame.iloc[N_FIT:].reset_index(drop=True),
        y[N_FIT:],
    )


def _int_labels() -> CoverageData:
    rng = np.random.RandomState(SEED)
    y = rng.randint(0, 3, N_FIT + N_COMPARE)
    X2 = y.reshape(-1, 1)
    return CoverageData(
        "int_labels",
        "an integer target 0..2; fitted on y alone",
        None,
        y[:N_FIT],
        X2[:20],
        X2[N_FIT:],
        y[N_FIT:],
    )


def _label_sets() -> CoverageData:
    rng = np.random.RandomState(SEED)
    tags = ["a", "b", "c", "d"]
    sets = [tuple(sorted(rng.choice(tags, rng.randint(1, 3), replace=False))) for _ in range(300)]
    return CoverageData(
        "label_sets",
        "sets of 1-2 tags out of 4; fitted on y alone",
        None,
        sets[:N_FIT],
        sets[:20],
        sets[N_FIT:],
        sets[N_FIT:],
    )


def _dicts() -> CoverageData:
    rng = np.random.RandomState(SEED)
    rows = [
        {"color": str(rng.choice(["red", "blue"])), "size": float(rng.rand()), "n": int(k % 5)}
        for k in range(N_FIT + N_COMPARE)
    ]
    return CoverageData(
        "dicts",
        "one dict per row (feature name -> value)",
        rows[:N_FIT],
        None,
        rows[:20],
        rows[N_FIT:],
        rows[N_FIT:],
    )


def _images() -> CoverageData:
    rng = np.random.RandomState(SEED)
    images = rng.rand(12, 8, 8)
    return CoverageData(
        "images",
        "12 random 8x8 grey images",
        images[:8],
        None,
        images[:2],
        images[8:],
        images[8:],
    )


def _kernel() -> CoverageData:
    X, _ = _classification(3)
    X_fit, X_cmp = X[:N_FIT], X[N_FIT:]
    K_fit, K_cmp = X_fit @ X_fit.T, X_cmp @ X_fit.T
    return CoverageData(
        "kernel",
        "linear kernel matrices K = X X^T (200 x 200 to fit, 100 x 200 to compare)",
        K_fit,
        None,
        K_fit[:20],
        K_cmp,
        K_cmp,
    )


DATA_KINDS: dict[str, Callable[[], CoverageData]] = {
    "binary": _binary,
    "categories": _categories,
    "category_dtype": _category_dtype,
    "category_dtype_known": _category_dtype_known,
    "category_strings": _category_strings,
    "counts": _counts,
    "dicts": _dicts,
    "images": _images,
    "int_labels": _int_labels,
    "kernel": _kernel,
    "label_sets": _label_sets,
    "labels": _labels,
    "missing": _missing,
    "multi_target": _multi_target,
    "multiclass": _multiclass,
    "multilabel": _multilabel,
    "one_feature": _one_feature,
    "positive": _positive,
    "positive_target": _positive_target,
    "regression": _regression_data,
    "semi_supervised": _semi_supervised,
    "strings": _strings,
    "text": _text,
    "unit": _unit,
}


def make_data(kind: str) -> CoverageData:
    """The data of one kind (fresh arrays each call, same values: fixed seeds).

    Raises:
        DataError: an unknown kind.
    """
    try:
        factory = DATA_KINDS[kind]
    except KeyError:
        raise DataError(
            f"unknown coverage data kind {kind!r}; use one of {', '.join(sorted(DATA_KINDS))}"
        ) from None
    return factory()
