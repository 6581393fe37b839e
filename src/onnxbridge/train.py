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
import re
import warnings
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import numpy as np
import pandas as pd

from onnxbridge.data import Dataset, check_split, check_test_size, load_dataset, split_dataset
from onnxbridge.errors import ConversionError, DataError, ModelSpecError, first_line

__all__ = [
    "PREPROCESS_MODES",
    "TrainResult",
    "build_preprocessor",
    "catboost_text",
    "check_training_inputs",
    "class_labels",
    "estimator_task",
    "fit_model",
    "native_categories",
    "parse_model_spec",
    "score_model",
    "source_frame",
    "takes_categories",
    "training_categories",
    "unwrap_label_encoding",
    "xgboost_categories",
]


def __getattr__(name: str) -> Any:
    # LabelEncodedClassifier lives in onnxbridge._labels, imported on first use: it subclasses
    # scikit-learn's estimators, and importing onnxbridge must not import scikit-learn.
    if name == "LabelEncodedClassifier":
        from onnxbridge._labels import LabelEncodedClassifier

        return LabelEncodedClassifier
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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


@dataclass(frozen=True)
class _QuietDefault:
    """A booster setting a spec gets unless it sets the same thing under any of ``names``."""

    names: tuple[str, ...]
    value: Any


# Quiet defaults for the boosters (a spec may still set them): no progress printed, and CatBoost
# writes no catboost_info/ folder into the working directory. The first name is the one set; the
# others set the same thing (LightGBM's aliases of verbosity; CatBoost refuses two of its verbosity
# keywords at once), so a spec's own choice replaces the default instead of clashing with it.
_LGBM_QUIET = (_QuietDefault(("verbose", "verbosity"), -1),)
_CATBOOST_QUIET = (
    _QuietDefault(("verbose", "silent", "logging_level"), False),
    _QuietDefault(("allow_writing_files",), False),
)
_QUIET_DEFAULTS: dict[str, tuple[_QuietDefault, ...]] = {
    "LGBMClassifier": _LGBM_QUIET,
    "LGBMRegressor": _LGBM_QUIET,
    "CatBoostClassifier": _CATBOOST_QUIET,
    "CatBoostRegressor": _CATBOOST_QUIET,
}


def _with_quiet_defaults(name: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` plus the quiet defaults of estimator ``name`` that the spec does not set."""
    quiet = {
        default.names[0]: default.value
        for default in _QUIET_DEFAULTS.get(name, ())
        if not any(alias in kwargs for alias in default.names)
    }
    return {**quiet, **kwargs}


def _param_names(cls: type[Any]) -> set[str]:
    """The keyword parameters an estimator class declares (signature and ``get_params``).

    Boosters take more through ``**kwargs``; :func:`_check_booster_keywords` checks those
    against the library's own parameter list.
    """
    names: set[str] = set()
    with contextlib.suppress(AttributeError, TypeError):
        names |= set(cls._get_param_names())
    if cls.__module__.split(".")[0] in _BOOSTERS:
        params = inspect.signature(cls.__init__).parameters.values()
        kinds = (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        names |= {p.name for p in params if p.name != "self" and p.kind in kinds}
        # CatBoost lists a few more in a default instance's get_params().
        with contextlib.suppress(AttributeError, TypeError, ValueError):
            names |= set(cls().get_params())
    return names


def _unknown_parameter(name: str, keyword: str, allowed: set[str], why: str = "") -> ModelSpecError:
    close = difflib.get_close_matches(keyword, sorted(allowed), n=3, cutoff=0.6)
    hint = f"did you mean {', '.join(close)}? " if close else ""
    shown = sorted(allowed)
    listed = ", ".join(shown[:60]) + (f" … ({len(shown)} in all)" if len(shown) > 60 else "")
    return ModelSpecError(f"{name} has no parameter {keyword!r}{why}; {hint}allowed: {listed}")


def _lightgbm_aliases() -> dict[str, str] | None:
    """Every LightGBM parameter name and alias -> its main name; None when lightgbm does not
    give the list.

    LightGBM keeps the list in its C library (``LGBM_DumpParamAliases``); its Python package
    reads it through ``lightgbm.basic._ConfigAliases``, which is not public: if a release moves
    it, specs fall back to the constructor's own parameters with an error that says so. Read
    each time (well under a millisecond), so that a missing list is noticed when it goes.
    """
    try:
        from lightgbm.basic import _ConfigAliases

        table = _ConfigAliases._get_all_param_aliases()
    except (ImportError, AttributeError, TypeError, ValueError, OSError):
        return None
    if not isinstance(table, dict):
        return None
    return {str(alias): str(main) for main, aliases in table.items() for alias in [main, *aliases]}


def _resolve_lightgbm_keywords(
    name: str, cls: type, kwargs: dict[str, Any], extra: list[str], allowed: set[str]
) -> dict[str, Any]:
    """Check LightGBM keywords against its config names and aliases.

    An alias of a parameter the constructor declares becomes that parameter: LightGBM prefers
    a main name over its aliases, so ``num_leaf=3`` would otherwise lose to the constructor's
    ``num_leaves=31``. Two names for one setting are refused.
    """
    aliases = _lightgbm_aliases()
    if aliases is None:
        import lightgbm

        raise ModelSpecError(
            f"cannot check {name} parameter {extra[0]!r}: lightgbm {lightgbm.__version__} does "
            "not give its parameter list the way onnxbridge reads it (lightgbm.basic."
            "_ConfigAliases); use the constructor's own parameters: "
            f"{', '.join(sorted(allowed))}"
        )
    for keyword in extra:
        if keyword not in aliases:
            raise _unknown_parameter(name, keyword, allowed | set(aliases))
    declared = {aliases[d]: d for d in allowed if d in aliases}
    resolved: dict[str, Any] = {}
    written: dict[str, str] = {}
    for keyword, value in kwargs.items():
        main = aliases.get(keyword, keyword)
        if main in written:
            raise ModelSpecError(
                f"{name} sets {main!r} twice ({written[main]!r} and {keyword!r} are LightGBM "
                "names of one parameter); keep one of them"
            )
        written[main] = keyword
        target = keyword if keyword in allowed else declared.get(main, keyword)
        resolved[target] = value
    return resolved


# XGBoost reports the parameters a booster does not use ("Parameters: { "x" } are not used.")
# when validate_parameters is on; this name is always reported, which proves the report was read.
_XGB_SENTINEL = "onnxbridge_unused_parameter_probe"
_XGB_UNUSED = re.compile(r"Parameters:\s*\{(?P<names>[^}]*)\}\s*are not used")


def _xgboost_report(params: dict[str, Any]) -> tuple[set[str] | None, set[str]]:
    """What XGBoost's own parameter validation says of ``params``.

    A booster is configured on a two-row matrix (no training); what it uses depends on the
    booster and objective, as it does when the model is fitted.

    Returns:
        The names it reports unused (None if it gave no report), and the parameter names of
        the configured booster (for close-match hints).
    """
    import json

    import xgboost

    probe = {k: v for k, v in params.items() if v is not None}
    objective = probe.get("objective")
    if isinstance(objective, str) and objective.startswith("multi:"):
        probe.setdefault("num_class", 2)
    probe.update({"validate_parameters": True, "verbosity": 1, _XGB_SENTINEL: 1})
    rows = xgboost.DMatrix(np.zeros((2, 1)), label=np.array([0.0, 1.0]))
    with warnings.catch_warnings(record=True) as caught, xgboost.config_context(verbosity=1):
        warnings.simplefilter("always")
        config = json.loads(xgboost.Booster(probe, [rows]).save_config())
    unused: set[str] = set()
    for warning in caught:
        match = _XGB_UNUSED.search(str(warning.message))
        if match:
            unused |= set(re.findall(r'"([^"]+)"', match.group("names")))
    return (unused if _XGB_SENTINEL in unused else None), _config_names(config)


def _config_names(config: Any) -> set[str]:
    """Parameter names in an XGBoost configuration (the keys of its ``*_param`` sections)."""
    names: set[str] = set()
    if isinstance(config, dict):
        for key, value in config.items():
            if isinstance(value, dict):
                if key.endswith("param"):
                    names |= {k for k, v in value.items() if not isinstance(v, dict)}
                names |= _config_names(value)
    return names


# XGBoost's native names of parameters its scikit-learn estimators declare under another name
# (its parameter documentation lists them as aliases).
_XGBOOST_ALIASES = {
    "eta": "learning_rate",
    "min_split_loss": "gamma",
    "alpha": "reg_alpha",
    "seed": "random_state",
    "nthread": "n_jobs",
}


def _resolve_xgboost_keywords(
    name: str, cls: type, kwargs: dict[str, Any], extra: list[str], allowed: set[str]
) -> dict[str, Any]:
    """Check XGBoost keywords with XGBoost's own parameter validation (aliases included)."""
    import xgboost

    for keyword in extra:
        declared = _XGBOOST_ALIASES.get(keyword)
        if declared is not None and declared in kwargs:
            raise ModelSpecError(
                f"{name} sets {declared!r} twice ({declared!r} and {keyword!r} are XGBoost names "
                "of one parameter, and XGBoost would silently use only one); keep one of them"
            )

    try:
        params = cls(**kwargs).get_xgb_params()
        unused, known = _xgboost_report(params)
    except (xgboost.core.XGBoostError, TypeError) as exc:
        written = ", ".join(f"{k}={kwargs[k]!r}" for k in kwargs)
        raise ModelSpecError(
            f"XGBoost refused the parameters of {name}({written}): {first_line(exc)}; check "
            "the values against XGBoost's parameter documentation"
        ) from exc
    if unused is None:
        raise ModelSpecError(
            f"cannot check {name} parameter {extra[0]!r}: xgboost {xgboost.__version__} gave "
            "no parameter validation report; use the constructor's own parameters: "
            f"{', '.join(sorted(allowed))}"
        )
    for keyword in extra:
        if keyword in unused:
            booster = params.get("booster") or "gbtree"
            why = (
                f" (XGBoost does not use it with booster={booster!r}, "
                f"objective={params.get('objective')!r})"
            )
            raise _unknown_parameter(name, keyword, allowed | known, why)
    return kwargs


# Libraries whose estimators take more keywords than they declare, and the check of those.
_KEYWORD_CHECKS = {
    "lightgbm": _resolve_lightgbm_keywords,
    "xgboost": _resolve_xgboost_keywords,
}


def _resolve_keywords(name: str, cls: type, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The keywords to build the estimator with; refuses one it does not take, with close
    matches.

    Declared parameters are always fine; boosters' others (LightGBM's config names and aliases,
    XGBoost's booster parameters) are checked against the library's own list.
    """
    allowed = _param_names(cls)
    extra = [k for k in kwargs if k not in allowed]
    if not extra:
        return kwargs
    check = _KEYWORD_CHECKS.get(cls.__module__.split(".")[0])
    if check is None:
        raise _unknown_parameter(name, extra[0], allowed)
    return check(name, cls, kwargs, extra, allowed)


def _unknown_estimator(name: str, spec: str) -> ModelSpecError:
    names = sorted(_estimator_classes())
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
    hint = f"did you mean {', '.join(close)}?" if close else "see sklearn.utils.all_estimators()"
    return ModelSpecError(
        f"unknown estimator {name!r} in model={spec!r}; {hint}", arguments=("model",)
    )


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
        keys = [k for k in node.keys if k is not None]  # None stands for a ``**`` entry
        if len(keys) != len(node.keys):
            raise ModelSpecError(f"'**' is not allowed in model={spec!r}", arguments=("model",))
        return {
            _literal(k, spec): _literal(v, spec) for k, v in zip(keys, node.values, strict=True)
        }
    if isinstance(node, ast.Name) and node.id in _SPECIAL_NAMES:
        return _SPECIAL_NAMES[node.id]
    if isinstance(node, ast.Call) or (
        isinstance(node, ast.Name) and node.id in _estimator_classes()
    ):
        return _build(node, spec)
    text = ast.unparse(node) if hasattr(ast, "unparse") else type(node).__name__
    raise ModelSpecError(
        f"argument {text!r} in model={spec!r} is not a literal; only numbers, strings, "
        "True/False/None, lists, tuples, dicts and estimator calls are allowed",
        arguments=("model",),
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
            f"cannot read {text!r} in model={spec!r}; write an estimator call such as "
            "\"RandomForestClassifier(n_estimators=10)\", steps joined with '|'",
            arguments=("model",),
        )
    cls = _estimator_classes().get(name)
    if cls is None:
        raise _unknown_estimator(name, spec)
    kwargs: dict[str, Any] = {}
    for kw in keywords:
        if kw.arg is None:
            raise ModelSpecError(f"'**' is not allowed in model={spec!r}", arguments=("model",))
        kwargs[kw.arg] = _literal(kw.value, spec)
    kwargs = _resolve_keywords(name, cls, kwargs)
    kwargs = _with_quiet_defaults(name, kwargs)
    positional = [_literal(a, spec) for a in args]
    from sklearn.base import is_classifier

    try:
        estimator = cls(*positional, **kwargs)
        # CatBoost checks its parameters (e.g. two verbosity keywords) only when asked its tags.
        is_classifier(estimator)
    except _library_errors() as exc:
        raise ModelSpecError(
            f"cannot create {name} from model={spec!r}: {first_line(exc)}", arguments=("model",)
        ) from exc
    return estimator


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
        raise ModelSpecError(
            f'model={spec!r} is empty; give an estimator such as "LogisticRegression()"',
            arguments=("model",),
        )
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise ModelSpecError(
            f"cannot parse model={spec!r}: {exc.msg} at column {exc.offset}; write e.g. "
            '"StandardScaler() | LogisticRegression(max_iter=200)"',
            arguments=("model",),
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
    # Column -> training values, for models that keep only hashes of their categories.
    categories: dict[str, list[Any]] = field(default_factory=dict)

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


def unwrap_label_encoding(estimator: Any) -> Any:
    """The fitted inner model of a :class:`LabelEncodedClassifier` (it takes the same columns,
    so its trees are the ones to probe), else ``estimator`` itself."""
    from onnxbridge._labels import LabelEncodedClassifier

    if isinstance(estimator, LabelEncodedClassifier) and hasattr(estimator, "estimator_"):
        return estimator.estimator_
    return estimator


def _library_labels(final: Any) -> str | None:
    """Which labels ``final``'s library cannot take as they are, or None if it takes any.

    ``"not_0_to_k"``: XGBoost classifiers fit only on the integers ``0 … K-1`` (and answer in
    them); ``"bool_or_float"``: CatBoost's ONNX export carries integer and string labels only.
    """
    from sklearn.base import is_classifier

    module = type(final).__module__.split(".")[0]
    kind = getattr(final, "_estimator_type", None)
    if not (is_classifier(final) or kind == "classifier"):
        return None
    if module == "xgboost":
        return "not_0_to_k"
    if module == "catboost":
        return "bool_or_float"
    return None


def _encode_labels_if_needed(estimator: Any, y: pd.Series) -> Any:
    """``estimator`` with its final classifier wrapped in :class:`LabelEncodedClassifier` when
    its library cannot take the labels ``y`` as they are (XGBoost on labels other than
    ``0 … K-1``, CatBoost on booleans or floats); else ``estimator`` itself."""
    from sklearn.pipeline import Pipeline

    final = estimator.steps[-1][1] if isinstance(estimator, Pipeline) else estimator
    rule = _library_labels(final)
    if rule is None:
        return estimator
    types = pd.api.types
    boolean, floating = types.is_bool_dtype(y.dtype), types.is_float_dtype(y.dtype)
    if rule == "not_0_to_k":
        values = sorted(int(v) for v in pd.unique(y)) if types.is_integer_dtype(y.dtype) else None
        fits = not boolean and values == list(range(len(values or ())))
    else:
        fits = not (boolean or floating)
    if fits:
        return estimator
    from onnxbridge._labels import LabelEncodedClassifier

    wrapped = LabelEncodedClassifier(final)
    if isinstance(estimator, Pipeline):
        return Pipeline([*estimator.steps[:-1], (estimator.steps[-1][0], wrapped)])
    return wrapped


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
            f"feature columns {shown} are not numeric; pass preprocess='auto' to encode them, "
            "or start the model with a ColumnTransformer",
            arguments=("preprocess",),
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


def _library_errors() -> tuple[type[BaseException], ...]:
    """What building or fitting an estimator raises for bad data or parameter values:
    ValueError and TypeError, and the boosters' own error classes (CatBoost's and LightGBM's are
    neither)."""
    errors: list[type[BaseException]] = [ValueError, TypeError]
    with contextlib.suppress(ImportError):
        from catboost import CatBoostError

        errors.append(CatBoostError)
    with contextlib.suppress(ImportError):
        from lightgbm.basic import LightGBMError

        errors.append(LightGBMError)
    return tuple(errors)


def check_training_inputs(
    data: str | Dataset,
    model: str,
    *,
    target: str | None = None,
    test_size: float = 0.3,
    preprocess: str = "none",
) -> Dataset:
    """Check what :func:`fit_model` is asked for, cheapest first, before anything is fitted:
    the options, the model spec, then the data and its target, then whether the split leaves
    rows on both sides and the model can take the columns as they are; returns the loaded data.

    Raises:
        DataError, ModelSpecError: the first mistake found, naming its argument.
    """
    if preprocess not in PREPROCESS_MODES:
        raise DataError(
            f"preprocess={preprocess!r} is not supported; use one of {', '.join(PREPROCESS_MODES)}",
            arguments=("preprocess",),
        )
    check_test_size(test_size)
    estimator = parse_model_spec(model)
    dataset = data if isinstance(data, Dataset) else load_dataset(data, target=target)
    check_split(len(dataset.X), test_size)
    if preprocess == "none" and not takes_categories(estimator):
        _check_numeric(dataset, estimator)
    return dataset


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
    dataset = check_training_inputs(
        data, model, target=target, test_size=test_size, preprocess=preprocess
    )
    estimator = parse_model_spec(model)
    task = estimator_task(estimator)
    if preprocess == "auto":
        from sklearn.pipeline import Pipeline

        estimator = Pipeline(
            [("preprocess", build_preprocessor(dataset.schema, estimator)), ("model", estimator)]
        )
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
        estimator = _encode_labels_if_needed(estimator, y_train)
    fit_params: dict[str, Any] = {}
    if preprocess == "none" and takes_categories(estimator):
        X_fit = _as_categories(estimator, X_train)
        estimator, fit_params = _catboost_categories_at_fit(estimator)
    else:
        X_fit = X_train
    try:
        estimator.fit(X_fit, y_train, **fit_params)
    except _library_errors() as exc:
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
        categories=training_categories(estimator, X_train),
    )


# -- native category columns -------------------------------------------------------------------


def _bare_model(estimator: Any) -> Any | None:
    """The model itself when it takes the input columns directly (alone or a one-step pipeline).

    A :class:`LabelEncodedClassifier` passes the columns on as they are: its inner model.
    """
    if hasattr(estimator, "steps"):
        steps = [s for _, s in estimator.steps if s not in (None, "passthrough")]
        if len(steps) != 1:
            return None
        estimator = steps[0]
    from onnxbridge._labels import LabelEncodedClassifier

    if isinstance(estimator, LabelEncodedClassifier):
        fitted = unwrap_label_encoding(estimator)
        return fitted if fitted is not estimator else estimator.estimator
    return estimator


def takes_categories(estimator: Any) -> bool:
    """Whether an unfitted model splits natively on pandas ``category`` columns.

    HistGradientBoosting with ``categorical_features="from_dtype"`` (scikit-learn's default),
    LightGBM (``categorical_feature="auto"``, its default) and XGBoost with
    ``enable_categorical=True``; such a model is fitted on text columns as categories. CatBoost
    with ``cat_features``: fitted on its categorical columns as text (see :func:`source_frame`).
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
    if library == "catboost":
        return bool(params.get("cat_features"))
    return False


def native_categories(estimator: Any, like: pd.DataFrame | None = None) -> dict[str, list[Any]]:
    """The columns a fitted model took as pandas categories, with the categories it knows.

    LightGBM and XGBoost refuse text (``object``) columns where they were fitted on categories,
    so the rows a user brings (a CSV file has no category type) are cast back with
    :func:`source_frame`. HistGradientBoosting encodes text columns itself and needs nothing.

    Args:
        estimator: the fitted model.
        like: rows as onnxbridge gives them. LightGBM records its categories per category column
            but not which columns those were when some of its categorical features were numbers
            (``categorical_feature``); the category columns are then the ones that hold text.
    """
    model = _bare_model(estimator)
    if model is None:
        return {}
    library = type(model).__module__.split(".")[0]
    if library == "lightgbm" and hasattr(model, "booster_"):
        booster = model.booster_
        categories = booster.pandas_categorical or []
        names = booster.feature_name()
        columns = [names[int(c)] for c in booster.params.get("categorical_column") or []]
        if len(columns) != len(categories) and like is not None:
            # pandas_categorical lists every category column of the fit, in column order:
            # ordered ones too (LightGBM splits those on their codes, not as categories), and
            # not the numbers named in categorical_feature. Those are the columns of text.
            columns = [
                c for c in names if c in like.columns and not pd.api.types.is_numeric_dtype(like[c])
            ]
        if len(columns) != len(categories):
            return {}
        return {c: list(v) for c, v in zip(columns, categories, strict=True)}
    if library == "xgboost" and hasattr(model, "get_booster"):
        booster = model.get_booster()
        if "c" not in (booster.feature_types or []):
            return {}
        import json

        # Damaged categories (non-ASCII text) raise: XGBoost could not score text rows right.
        found = xgboost_categories(json.loads(bytes(booster.save_raw("json"))))
        names = booster.feature_names or [f"f{j}" for j in range(booster.num_features())]
        return {str(names[j]): known for j, known in found.items()}
    return {}


def xgboost_categories(document: dict[str, Any]) -> dict[int, list[Any]]:
    """The categories an XGBoost model (3.1 and later) stored per feature, from its JSON model.

    ``learner.gradient_booster.model.cats.enc`` has one entry per feature: numbers as
    ``values``, or text as the UTF-8 bytes of every category one after the other (signed) cut
    by ``offsets``. Position ``k`` is code ``k``.

    Raises:
        ConversionError: non-ASCII category text. XGBoost 3.2 counts the offsets in characters
            but keeps only that many bytes, so such categories come back cut apart and the
            last ones lost ("Zürich" as "Züric"; its own ``get_categories()`` shows the same):
            no reader can recover them.
    """
    from itertools import pairwise

    model = document["learner"]["gradient_booster"]["model"]
    names = document["learner"].get("feature_names") or []
    found: dict[int, list[Any]] = {}
    for j, entry in enumerate((model.get("cats") or {}).get("enc") or []):
        values = entry.get("values") or []
        if not values:
            continue
        offsets = [int(v) for v in entry.get("offsets") or []]
        if not offsets:
            found[j] = list(values)
            continue
        data = bytes(int(v) & 0xFF for v in values)
        if any(b >= 0x80 for b in data):
            raise ConversionError(
                f"XGBoost stored the categories of column "
                f"{names[j] if j < len(names) else j!r} damaged: they hold non-ASCII text, "
                "which this XGBoost release keeps cut apart; rename the categories to ASCII text "
                "(or ordinal-encode the column) and refit"
            )
        found[j] = [data[a:b].decode("ascii") for a, b in pairwise(offsets)]
    return found


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


def source_frame(
    estimator: Any, frame: pd.DataFrame, like: pd.DataFrame | None = None
) -> pd.DataFrame:
    """``frame`` as the fitted model takes it: its category columns as it knows them.

    LightGBM and XGBoost get their category columns as pandas categories with the categories
    they were fitted on; a value they never saw becomes missing, which is how LightGBM routes it
    and what XGBoost is given instead of an error. HistGradientBoosting gets a category column
    of numbers back as numbers. CatBoost gets its ``cat_features`` columns as the text
    :func:`catboost_text` gives (a missing value as ``""``, as the ONNX graph is fed it). Every
    other column, and every other model, is unchanged.
    ``like`` (default: ``frame``) tells which columns hold text, see :func:`native_categories`.
    """
    model = _bare_model(estimator)
    if model is None or not isinstance(frame, pd.DataFrame):
        return frame
    if type(model).__module__.split(".")[0] == "catboost":
        return _catboost_frame(frame, _catboost_columns(model, frame))
    frame = _numbers_back(model, frame)
    categories = native_categories(model, frame if like is None else like)
    if not categories:
        return frame
    frame = frame.copy()
    for name, known in categories.items():
        if name in frame.columns:
            values = frame[name]
            if isinstance(values.dtype, pd.CategoricalDtype):
                values = values.astype(object)
            if np.asarray(known).dtype.kind in "fiu" and not pd.api.types.is_numeric_dtype(values):
                values = pd.to_numeric(values, errors="coerce")  # "3" is category 3
            values = values.where(values.isin(known))  # unseen -> missing
            frame[name] = pd.Categorical(values, categories=known)
    return frame


def _as_categories(estimator: Any, X: pd.DataFrame) -> pd.DataFrame:
    """Text columns as pandas categories, for a model that splits on them natively; for
    CatBoost, its categorical columns as text (:func:`_catboost_fit_frame`)."""
    model = _bare_model(estimator)
    if model is not None and type(model).__module__.split(".")[0] == "catboost":
        return _catboost_fit_frame(model, X)
    text = [c for c in X.columns if not pd.api.types.is_numeric_dtype(X[c])]
    if not text:
        return X
    if type(model).__name__.startswith("HistGradientBoosting"):
        # scikit-learn's limit: at most 255 categories per column (one bin is for missing).
        wide = {c: int(X[c].nunique()) for c in text if X[c].nunique() > 255}
        if wide:
            column, count = next(iter(wide.items()))
            raise DataError(
                f"text column {column!r} has {count} distinct values, but "
                f"{type(model).__name__} splits on at most 255 categories per column; drop or "
                "group that column, or pass preprocess='auto' to one-hot encode text columns",
                arguments=("preprocess",),
            )
    return X.astype({c: "category" for c in text})


# -- CatBoost's categorical features ---------------------------------------------------------------


def catboost_text(value: Any) -> str:
    """The text CatBoost is given for one value of a categorical column.

    A missing value is ``""``, as onnxbridge feeds it to an ONNX graph (CatBoost refuses NaN in a
    categorical column, so the two must agree on one text); an integral number is written as an
    integer (``"3"`` for 3.0: a column of integers with missing values arrives as floats, and
    CatBoost writes an integer column that way); anything else is ``str(value)``.
    """
    if value is None or (isinstance(value, float | np.floating) and np.isnan(value)):
        return ""
    if isinstance(value, float | np.floating) and float(value).is_integer():
        return str(int(value))
    if isinstance(value, np.generic):
        value = value.item()
    return str(value)


def _catboost_columns(model: Any, frame: pd.DataFrame) -> list[str]:
    """The columns of ``frame`` a CatBoost model takes as categorical (by name or position)."""
    if model.is_fitted():
        listed: list[Any] = [int(j) for j in model.get_cat_feature_indices()]
    else:
        listed = list(model.get_params().get("cat_features") or [])
    columns = [str(c) for c in frame.columns]
    found = []
    for item in listed:
        if isinstance(item, str) and item in columns:
            found.append(item)
        elif isinstance(item, int | np.integer) and 0 <= int(item) < len(columns):
            found.append(columns[int(item)])
    return found


def _catboost_frame(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """``frame`` with ``columns`` as CatBoost's text (:func:`catboost_text`)."""
    if not columns:
        return frame
    frame = frame.copy()
    for name in columns:
        values = frame[name].astype(object).map(catboost_text)
        frame[name] = pd.Series(values.to_numpy(dtype=object), index=frame.index, dtype=object)
    return frame


def _catboost_fit_frame(model: Any, X: pd.DataFrame) -> pd.DataFrame:
    """The training rows for an unfitted CatBoost model with ``cat_features``.

    Text columns the spec did not list join ``cat_features`` (CatBoost reads any other column
    as numbers and fails on text); the categorical columns become CatBoost's text.
    """
    listed = list(model.get_params().get("cat_features") or [])
    chosen = _catboost_columns(model, X)
    text = [
        str(c)
        for c in X.columns
        if not pd.api.types.is_numeric_dtype(X[c]) and str(c) not in chosen
    ]
    if text:
        by_name = all(isinstance(item, str) for item in listed)
        columns = [str(c) for c in X.columns]
        extra = text if by_name else [columns.index(c) for c in text]
        model.set_params(cat_features=[*listed, *extra])
        chosen = [*chosen, *text]
    return _catboost_frame(X, chosen)


def _catboost_categories_at_fit(estimator: Any) -> tuple[Any, dict[str, Any]]:
    """``estimator`` and its fit parameters: a CatBoost model inside a
    :class:`LabelEncodedClassifier` is given ``cat_features`` at fit instead.

    The wrapper fits a clone of the model, and scikit-learn cannot clone CatBoost with
    ``cat_features`` set (CatBoost stores a copy of the list, which ``clone`` refuses).
    """
    from sklearn.pipeline import Pipeline

    from onnxbridge._labels import LabelEncodedClassifier

    wrapper, prefix = estimator, ""
    if isinstance(estimator, Pipeline):
        wrapper, prefix = estimator.steps[-1][1], f"{estimator.steps[-1][0]}__"
    if not isinstance(wrapper, LabelEncodedClassifier):
        return estimator, {}
    inner = wrapper.estimator
    params = inner.get_params()
    listed = params.pop("cat_features", None)
    if type(inner).__module__.split(".")[0] != "catboost" or not listed:
        return estimator, {}
    rebuilt = LabelEncodedClassifier(type(inner)(**params))
    if isinstance(estimator, Pipeline):
        estimator = Pipeline([*estimator.steps[:-1], (estimator.steps[-1][0], rebuilt)])
    else:
        estimator = rebuilt
    return estimator, {f"{prefix}cat_features": list(listed)}


def training_categories(estimator: Any, X: pd.DataFrame) -> dict[str, list[Any]]:
    """Column -> its distinct training values, for a fitted model that keeps no list of its
    categories: CatBoost with ``cat_features`` (it keeps hashes of them only, and its graph
    can recognise only categories it is given). Empty for every other model.

    The values are plain Python (JSON-ready) and leave missing values out.
    """
    model = _bare_model(estimator)
    if model is None or type(model).__module__.split(".")[0] != "catboost":
        return {}
    if not model.is_fitted():
        return {}
    found: dict[str, list[Any]] = {}
    for name in _catboost_columns(model, X):
        values = pd.unique(X[name].dropna())
        found[name] = [v.item() if isinstance(v, np.generic) else v for v in values]
    return found
