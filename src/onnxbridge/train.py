"""Estimator specs (parsed safely, never evaluated), pipelines, fitting and test metrics.

A spec is a Python-like expression over scikit-learn estimator names, literal arguments only::

    RandomForestClassifier(n_estimators=10, random_state=42)
    StandardScaler() | LogisticRegression(max_iter=200)
    BaggingClassifier(estimator=DecisionTreeClassifier(max_depth=3), n_estimators=5)

``|`` chains steps into a pipeline (``sklearn.pipeline.make_pipeline``). Arguments may be numbers,
strings, ``True`` / ``False`` / ``None``, lists, tuples, dicts and nested estimator calls; nothing
else is accepted (no attribute access, no names, no function calls other than estimators).
"""

from __future__ import annotations

import ast
import contextlib
import difflib
import importlib
import inspect
import warnings
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
import pandas as pd

from onnxbridge.data import Dataset, load_dataset, split_dataset
from onnxbridge.errors import DataError, ModelSpecError, first_line

__all__ = [
    "PREPROCESS_MODES",
    "TrainResult",
    "build_preprocessor",
    "class_labels",
    "estimator_task",
    "fit_model",
    "native_categories",
    "parse_model_spec",
    "score_model",
    "source_frame",
    "takes_categories",
]

_SPECIAL_NAMES = {"nan": float("nan"), "inf": float("inf")}


@cache
def _estimator_classes() -> dict[str, type]:
    from sklearn.utils import all_estimators

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        classes = {name: cls for name, cls in all_estimators()}
    # Pipeline helpers are valid nested values too (e.g. inside a ColumnTransformer later).
    from sklearn.pipeline import FeatureUnion, Pipeline

    classes.setdefault("Pipeline", Pipeline)
    classes.setdefault("FeatureUnion", FeatureUnion)
    # Gradient-boosting libraries' scikit-learn estimators, when installed.
    for module, names in _BOOSTERS.items():
        try:
            library = importlib.import_module(module)
        except ImportError:
            continue
        for name in names:
            classes.setdefault(name, getattr(library, name))
    return classes


_BOOSTERS = {
    "xgboost": ("XGBClassifier", "XGBRegressor"),
    "lightgbm": ("LGBMClassifier", "LGBMRegressor"),
    "catboost": ("CatBoostClassifier", "CatBoostRegressor"),
}
# Quiet defaults for the boosters (a spec may still set them): no progress printed, and CatBoost
# writes no catboost_info/ folder into the working directory.
_QUIET_DEFAULTS = {
    "LGBMClassifier": {"verbose": -1},
    "LGBMRegressor": {"verbose": -1},
    "CatBoostClassifier": {"verbose": False, "allow_writing_files": False},
    "CatBoostRegressor": {"verbose": False, "allow_writing_files": False},
}


def _param_names(cls: type) -> set[str]:
    """The keyword parameters an estimator class takes.

    Boosters take ``**kwargs`` (XGBoost) or list few parameters in ``get_params`` (CatBoost), so
    the signature and the default instance's ``get_params()`` are both read.
    """
    names: set[str] = set()
    with contextlib.suppress(Exception):
        names |= set(cls._get_param_names())
    if cls.__module__.split(".")[0] in _BOOSTERS:
        params = inspect.signature(cls.__init__).parameters.values()
        names |= {p.name for p in params if p.name != "self" and p.kind == p.KEYWORD_ONLY}
        names |= {p.name for p in params if p.name != "self" and p.kind == p.POSITIONAL_OR_KEYWORD}
        with contextlib.suppress(Exception):
            names |= set(cls().get_params())
    return names


def _unknown_estimator(name: str) -> ModelSpecError:
    names = sorted(_estimator_classes())
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
    hint = f"did you mean {', '.join(close)}?" if close else "see sklearn.utils.all_estimators()"
    return ModelSpecError(f"unknown estimator {name!r} in --model; {hint}")


def _literal(node: ast.AST, spec: str) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _literal(node.operand, spec)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.List):
        return [_literal(e, spec) for e in node.elts]
    if isinstance(node, ast.Tuple):
        return tuple(_literal(e, spec) for e in node.elts)
    if isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):
            raise ModelSpecError(f"'**' is not allowed in --model {spec!r}")
        return {
            _literal(k, spec): _literal(v, spec)
            for k, v in zip(node.keys, node.values, strict=True)
        }
    if isinstance(node, ast.Name) and node.id in _SPECIAL_NAMES:
        return _SPECIAL_NAMES[node.id]
    if isinstance(node, ast.Call) or (
        isinstance(node, ast.Name) and node.id in _estimator_classes()
    ):
        return _build(node, spec)
    text = ast.unparse(node) if hasattr(ast, "unparse") else type(node).__name__
    raise ModelSpecError(
        f"argument {text!r} in --model {spec!r} is not a literal; only numbers, strings, "
        "True/False/None, lists, tuples, dicts and estimator calls are allowed"
    )


def _build(node: ast.AST, spec: str) -> Any:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        from sklearn.pipeline import make_pipeline

        steps = _flatten_pipe(node)
        return make_pipeline(*(_build(s, spec) for s in steps))
    if isinstance(node, ast.Name):
        name, args, keywords = node.id, [], []
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        name, args, keywords = node.func.id, node.args, node.keywords
    else:
        text = ast.unparse(node)
        raise ModelSpecError(
            f"cannot read {text!r} in --model {spec!r}; write an estimator call such as "
            "\"RandomForestClassifier(n_estimators=10)\", steps joined with '|'"
        )
    cls = _estimator_classes().get(name)
    if cls is None:
        raise _unknown_estimator(name)
    allowed = _param_names(cls)
    kwargs: dict[str, Any] = {}
    for kw in keywords:
        if kw.arg is None:
            raise ModelSpecError(f"'**' is not allowed in --model {spec!r}")
        if kw.arg not in allowed:
            close = difflib.get_close_matches(kw.arg, sorted(allowed), n=3, cutoff=0.6)
            hint = f"did you mean {', '.join(close)}? " if close else ""
            raise ModelSpecError(
                f"{name} has no parameter {kw.arg!r}; {hint}allowed: {', '.join(sorted(allowed))}"
            )
        kwargs[kw.arg] = _literal(kw.value, spec)
    positional = [_literal(a, spec) for a in args]
    kwargs = {**_QUIET_DEFAULTS.get(name, {}), **kwargs}
    try:
        return cls(*positional, **kwargs)
    except TypeError as exc:
        raise ModelSpecError(f"cannot create {name} from --model {spec!r}: {exc}") from exc


def _flatten_pipe(node: ast.AST) -> list[ast.AST]:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _flatten_pipe(node.left) + _flatten_pipe(node.right)
    return [node]


def parse_model_spec(spec: str) -> Any:
    """Turn a model spec string into an unfitted scikit-learn estimator, without ``eval``.

    Args:
        spec: e.g. ``"RandomForestClassifier(n_estimators=10, random_state=42)"`` or
            ``"StandardScaler() | LogisticRegression(max_iter=200)"``.

    Returns:
        The estimator (a ``Pipeline`` when steps are joined with ``|``).

    Raises:
        ModelSpecError: unknown estimator or parameter, a non-literal argument, bad syntax.
    """
    text = spec.strip()
    if not text:
        raise ModelSpecError('--model is empty; give an estimator such as "LogisticRegression()"')
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise ModelSpecError(
            f"cannot parse --model {spec!r}: {exc.msg} at column {exc.offset}; write e.g. "
            '"StandardScaler() | LogisticRegression(max_iter=200)"'
        ) from exc
    return _build(tree.body, spec)


def estimator_task(estimator: Any) -> str:
    """``"classification"`` or ``"regression"``.

    Raises:
        ModelSpecError: for estimators that are neither (transformers, clusterers, ...).
    """
    from sklearn.base import is_classifier, is_regressor

    final = estimator.steps[-1][1] if hasattr(estimator, "steps") else estimator
    # CatBoost declares its kind only in the pre-1.6 scikit-learn way.
    kind = getattr(final, "_estimator_type", None)
    if is_classifier(estimator) or kind == "classifier":
        return "classification"
    if is_regressor(estimator) or kind == "regressor":
        return "regression"
    name = type(estimator).__name__
    if hasattr(estimator, "steps"):
        name = f"a pipeline ending in {type(estimator.steps[-1][1]).__name__}"
    raise ModelSpecError(
        f"{name} is neither a classifier nor a regressor; train a model that predicts the "
        "target (end a pipeline with a classifier or regressor)"
    )


def score_model(estimator: Any, X: pd.DataFrame, y: pd.Series) -> dict[str, float]:
    """Test metric: ``{"accuracy": ...}`` for classifiers, ``{"r2": ...}`` for regressors."""
    from sklearn.metrics import accuracy_score, r2_score

    pred = estimator.predict(source_frame(estimator, X))
    if estimator_task(estimator) == "classification":
        return {"accuracy": float(accuracy_score(y, pred))}
    return {"r2": float(r2_score(y, pred))}


@dataclass
class TrainResult:
    """A fitted estimator with its data, split and test metrics."""

    estimator: Any
    spec: str
    dataset: Dataset
    X_train: pd.DataFrame
    X_test: pd.DataFrame
    y_train: pd.Series
    y_test: pd.Series
    task: str
    metrics: dict[str, float]
    test_size: float
    seed: int
    stratify: bool
    preprocess: str = "none"

    @property
    def classes(self) -> list[Any] | None:
        """Class labels in the order of the probability columns, or None for regressors."""
        return class_labels(self.estimator)


def class_labels(estimator: Any) -> list[Any] | None:
    """A fitted classifier's ``classes_`` as plain Python values (JSON-ready), else None."""
    classes = getattr(estimator, "classes_", None)
    if classes is None:
        return None
    return [c.item() if isinstance(c, np.generic) else c for c in classes]


PREPROCESS_MODES = ("none", "auto")
# Model families that split on raw values (or count them) and need no scaling.
_UNSCALED_MODULES = (
    "sklearn.ensemble",
    "sklearn.tree",
    "sklearn.naive_bayes",
    "xgboost",
    "lightgbm",
    "catboost",
)


def _starts_with_column_transformer(estimator: Any) -> bool:
    from sklearn.compose import ColumnTransformer

    first = estimator.steps[0][1] if hasattr(estimator, "steps") else estimator
    return isinstance(first, ColumnTransformer)


def _check_numeric(dataset: Dataset, estimator: Any) -> None:
    bad = [f.name for f in dataset.schema.features if not f.is_numeric]
    if bad and not _starts_with_column_transformer(estimator):
        shown = ", ".join(repr(b) for b in bad[:8]) + (" …" if len(bad) > 8 else "")
        raise DataError(
            f"feature columns {shown} are not numeric; pass --preprocess auto (Python: "
            "preprocess='auto') to encode them, or start the model with a ColumnTransformer"
        )


def build_preprocessor(schema: Any, estimator: Any) -> Any:
    """The usual ColumnTransformer for a mixed-type table, in front of ``estimator``.

    Numeric (and boolean) columns: median imputation, then standard scaling unless the model
    is tree-based or naive Bayes. Text / category columns: missing values become the category
    ``"missing"``, then one-hot encoding that ignores categories unseen in training. The output is
    dense, so every model can take it.
    """
    from sklearn.compose import ColumnTransformer
    from sklearn.impute import SimpleImputer
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    final = estimator.steps[-1][1] if hasattr(estimator, "steps") else estimator
    scale = not type(final).__module__.startswith(_UNSCALED_MODULES)
    numeric = [f.name for f in schema.features if f.kind == "numeric"]
    strings = [f.name for f in schema.features if f.kind == "string"]
    parts = []
    if numeric:
        steps = [SimpleImputer(strategy="median")] + ([StandardScaler()] if scale else [])
        parts.append(("numeric", make_pipeline(*steps), numeric))
    if strings:
        encode = make_pipeline(
            SimpleImputer(strategy="constant", fill_value="missing"),
            OneHotEncoder(handle_unknown="ignore", sparse_output=False),
        )
        parts.append(("categorical", encode, strings))
    return ColumnTransformer(parts, sparse_threshold=0.0)


def fit_model(
    data: str | Dataset,
    model: str,
    *,
    target: str | None = None,
    test_size: float = 0.3,
    seed: int = 42,
    stratify: bool = False,
    preprocess: str = "none",
) -> TrainResult:
    """Load data, parse the model spec, split, fit and score on the test rows.

    Args:
        data: a built-in dataset name, a file path, or a loaded :class:`Dataset`.
        model: a model spec (see :func:`parse_model_spec`).
        target: the target column, for files.
        test_size: fraction of rows held out for testing.
        seed: ``random_state`` of the split.
        stratify: split preserving class proportions (classifiers only).
        preprocess: ``"none"`` (the model takes the columns as they are) or ``"auto"``
            (impute, encode and scale with :func:`build_preprocessor` in front of the model).

    Raises:
        DataError, ModelSpecError: for bad data or specs, with a message that says what to do.
    """
    if preprocess not in PREPROCESS_MODES:
        raise DataError(
            f"--preprocess {preprocess!r} is not supported; use one of "
            f"{', '.join(PREPROCESS_MODES)}"
        )
    estimator = parse_model_spec(model)
    task = estimator_task(estimator)
    dataset = data if isinstance(data, Dataset) else load_dataset(data, target=target)
    if preprocess == "auto":
        from sklearn.pipeline import Pipeline

        estimator = Pipeline(
            [("preprocess", build_preprocessor(dataset.schema, estimator)), ("model", estimator)]
        )
    elif not takes_categories(estimator):
        _check_numeric(dataset, estimator)
    X_train, X_test, y_train, y_test = split_dataset(
        dataset, test_size=test_size, seed=seed, stratify=stratify and task == "classification"
    )
    if task == "classification":
        from sklearn.utils.multiclass import type_of_target

        if type_of_target(y_train).startswith("continuous"):
            raise ModelSpecError(
                f"the target {dataset.y.name!r} holds non-integer numbers ({y_train.nunique()} "
                f"distinct values) but {model!r} is a classifier: use a regressor, or turn the "
                "target into class labels (integers or strings)"
            )
    if preprocess == "none" and takes_categories(estimator):
        X_fit = _as_categories(estimator, X_train)
    else:
        X_fit = X_train
    try:
        estimator.fit(X_fit, y_train)
    except (ValueError, TypeError) as exc:
        raise ModelSpecError(f"fitting {model!r} failed: {first_line(exc)}") from exc
    metrics = score_model(estimator, X_test, y_test)
    return TrainResult(
        estimator=estimator,
        spec=model,
        dataset=dataset,
        X_train=X_train,
        X_test=X_test,
        y_train=y_train,
        y_test=y_test,
        task=task,
        metrics=metrics,
        test_size=test_size,
        seed=seed,
        stratify=stratify and task == "classification",
        preprocess=preprocess,
    )


# -- native category columns -------------------------------------------------------------------


def _bare_model(estimator: Any) -> Any | None:
    """The model itself when it takes the input columns directly (alone or a one-step pipeline)."""
    if hasattr(estimator, "steps"):
        steps = [s for _, s in estimator.steps if s not in (None, "passthrough")]
        return steps[0] if len(steps) == 1 else None
    return estimator


def takes_categories(estimator: Any) -> bool:
    """Whether an unfitted model splits natively on pandas ``category`` columns.

    HistGradientBoosting with ``categorical_features="from_dtype"`` (scikit-learn's default),
    LightGBM (``categorical_feature="auto"``, its default) and XGBoost with
    ``enable_categorical=True``; such a model is fitted on text columns as categories.
    """
    model = _bare_model(estimator)
    if model is None:
        return False
    library = type(model).__module__.split(".")[0]
    params = model.get_params() if hasattr(model, "get_params") else {}
    if library == "sklearn" and type(model).__name__.startswith("HistGradientBoosting"):
        return params.get("categorical_features") == "from_dtype"
    if library == "lightgbm":
        return params.get("categorical_feature", "auto") == "auto"
    if library == "xgboost":
        return bool(params.get("enable_categorical"))
    return False


def native_categories(estimator: Any) -> dict[str, list[Any]]:
    """The columns a fitted model took as pandas categories, with the categories it knows.

    LightGBM and XGBoost refuse text (``object``) columns where they were fitted on categories,
    so the rows a user brings (a CSV file has no category type) are cast back with
    :func:`source_frame`. HistGradientBoosting encodes text columns itself and needs nothing.
    """
    model = _bare_model(estimator)
    if model is None:
        return {}
    library = type(model).__module__.split(".")[0]
    if library == "lightgbm" and hasattr(model, "booster_"):
        booster = model.booster_
        categories = booster.pandas_categorical or []
        columns = booster.params.get("categorical_column") or []
        names = booster.feature_name()
        if len(columns) != len(categories):
            return {}
        return {names[int(c)]: list(v) for c, v in zip(columns, categories, strict=True)}
    if library == "xgboost" and hasattr(model, "get_booster"):
        booster = model.get_booster()
        if "c" not in (booster.feature_types or []):
            return {}
        found = booster.get_categories(export_to_arrow=True).to_arrow()
        return {str(name): values.to_pylist() for name, values in found if values is not None}
    return {}


def _numbers_back(model: Any, frame: pd.DataFrame) -> pd.DataFrame:
    """A HistGradientBoosting category column of numbers, given as text, back as numbers.

    onnxbridge carries a category column as text (``str(value)``, see
    :func:`onnxbridge.data.normalize_features`); such a model knows its categories as numbers and
    would read the text ``"3"`` as unseen. A text that is no number becomes missing, which the
    model routes as it routes an unseen category.
    """
    preprocessor = getattr(model, "_preprocessor", None)
    categorical = getattr(model, "is_categorical_", None)
    if preprocessor is None or categorical is None:
        return frame
    encoder = preprocessor.named_transformers_.get("encoder")
    columns = np.flatnonzero(np.asarray(categorical, dtype=bool))
    if (
        encoder is None
        or len(columns) != len(encoder.categories_)
        or frame.shape[1] <= max(columns)
    ):
        return frame
    changed = frame
    for column, known in zip(columns, encoder.categories_, strict=True):
        values = frame.iloc[:, column]
        if np.asarray(known).dtype.kind in "fiu" and values.dtype == object:
            if changed is frame:
                changed = frame.copy()
            changed.isetitem(int(column), pd.to_numeric(values, errors="coerce"))
    return changed


def source_frame(estimator: Any, frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` as the fitted model takes it: its category columns as it knows them.

    LightGBM and XGBoost get their category columns as pandas categories with the categories
    they were fitted on; a value they never saw becomes missing, which is how LightGBM routes it
    and what XGBoost is given instead of an error. HistGradientBoosting gets a category column
    of numbers back as numbers. Every other column, and every other model, is unchanged.
    """
    model = _bare_model(estimator)
    if model is None or not isinstance(frame, pd.DataFrame):
        return frame
    frame = _numbers_back(model, frame)
    categories = native_categories(model)
    if not categories:
        return frame
    frame = frame.copy()
    for name, known in categories.items():
        if name in frame.columns:
            values = frame[name]
            if isinstance(values.dtype, pd.CategoricalDtype):
                values = values.astype(object)
            if np.asarray(known).dtype.kind in "fiu" and values.dtype == object:
                values = pd.to_numeric(values, errors="coerce")  # "3" is category 3
            values = values.where(values.isin(known))  # unseen -> missing
            frame[name] = pd.Categorical(values, categories=known)
    return frame


def _as_categories(estimator: Any, X: pd.DataFrame) -> pd.DataFrame:
    """Text columns as pandas categories, for a model that splits on them natively."""
    text = [c for c in X.columns if not pd.api.types.is_numeric_dtype(X[c])]
    if not text:
        return X
    return X.astype({c: "category" for c in text})
