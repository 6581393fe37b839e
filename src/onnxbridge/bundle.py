"""The bundle folder of a model and its ``card.json``.

::

    runs/iris-rf/
      card.json          data source, feature schema, target, task, classes, split, metrics,
                         library versions, content hashes of the files below
      model.skops        the fitted estimator (skops, never pickle)
      holdout.parquet    the held-out rows (features and target) used by validate and bench
      model.onnx         the converted graph (added by convert)
      reports/           validation.json, ...

Every write goes to a temporary file that is renamed into place, and a new bundle is built in a
temporary folder that is renamed into place only when complete: a failed command leaves an existing
bundle as it was.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import tempfile
import warnings
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from importlib import metadata as importlib_metadata
from pathlib import Path
from types import ModuleType
from typing import Any

import pandas as pd

from onnxbridge._files import _default_mode, atomic_write_path, file_sha256
from onnxbridge.data import FeatureSchema, normalize_features
from onnxbridge.errors import BundleError, DataError, UnsafeModelFileError

__all__ = [
    "CARD_NAME",
    "TRUSTED_NAMES",
    "Bundle",
    "atomic_write_path",
    "check_trees",
    "file_sha256",
    "library_versions",
    "load_estimator",
    "read_card",
    "save_estimator",
    "train_bundle",
]

CARD_NAME = "card.json"
MODEL_NAME = "model.skops"
HOLDOUT_NAME = "holdout.parquet"
ONNX_NAME = "model.onnx"
REPORTS_DIR = "reports"
CARD_FORMAT = 1

# What a .skops file may hold besides what skops trusts by itself (skops.io.get_untrusted_types
# leaves those out): the types and functions fitted scikit-learn, XGBoost, LightGBM and CatBoost
# models hold, by exact name. Found by dumping every estimator of the coverage run, the boosters
# (classifier, regressor, ranker), HistGradientBoosting on category columns and the pipelines
# `train --preprocess auto` builds, then reviewed one by one: restoring each only sets attributes
# or rebuilds the model inside its own library (no file, process or network access in
# __setstate__, __reduce__ or __del__), and each function only computes on its arguments. Never
# trust by module prefix: numpy.lib._datasource.DataSource's __del__ deletes a folder.
# functools.partial is safe here because skops loads the function it wraps as its own node,
# checked against this same list (HistGradientBoosting on category columns keeps
# partial(sklearn.utils.validation.check_array, ...)).
TRUSTED_NAMES: frozenset[str] = frozenset(
    {
        # Standard library and numpy.
        "collections.OrderedDict",  # LightGBM's parameters
        "functools.partial",  # see above: its function is checked on its own
        "numpy.dtype",  # SimpleImputer, KBinsDiscretizer and others keep a dtype
        "numpy.mean",  # FeatureAgglomeration's pooling_func
        # scipy.
        "scipy._lib.array_api_compat.numpy._aliases.asarray",  # SplineTransformer
        "scipy.interpolate._bsplines.BSpline",  # SplineTransformer
        "scipy.sparse._csr.csr_matrix",  # SparseRandomProjection
        # scikit-learn helpers (their estimators are trusted by skops).
        "sklearn._loss.loss.HalfTweedieLoss",
        "sklearn._loss.loss.HalfTweedieLossIdentity",
        "sklearn.calibration._CalibratedClassifier",
        "sklearn.calibration._SigmoidCalibration",
        "sklearn.cluster._bisect_k_means._BisectingTree",
        "sklearn.cluster._kmeans._kmeans_single_elkan",
        "sklearn.cluster._kmeans._kmeans_single_lloyd",
        "sklearn.ensemble._hist_gradient_boosting.predictor.TreePredictor",
        "sklearn.feature_selection._univariate_selection.f_classif",
        "sklearn.gaussian_process._gpc._BinaryGaussianProcessClassifierLaplace",
        "sklearn.gaussian_process.kernels.ConstantKernel",
        "sklearn.gaussian_process.kernels.DotProduct",
        "sklearn.gaussian_process.kernels.ExpSineSquared",
        "sklearn.gaussian_process.kernels.Exponentiation",
        "sklearn.gaussian_process.kernels.Matern",
        "sklearn.gaussian_process.kernels.Product",
        "sklearn.gaussian_process.kernels.RBF",
        "sklearn.gaussian_process.kernels.RationalQuadratic",
        "sklearn.gaussian_process.kernels.Sum",
        "sklearn.gaussian_process.kernels.WhiteKernel",
        "sklearn.metrics._classification.balanced_accuracy_score",
        "sklearn.metrics._dist_metrics.ChebyshevDistance64",
        "sklearn.metrics._dist_metrics.EuclideanDistance64",
        "sklearn.metrics._dist_metrics.ManhattanDistance64",
        "sklearn.metrics._dist_metrics.MinkowskiDistance64",
        "sklearn.metrics._scorer._CurveScorer",
        "sklearn.metrics._scorer._Scorer",
        "sklearn.multiclass._ConstantPredictor",
        "sklearn.neighbors._ball_tree.BallTree",
        "sklearn.neighbors._kd_tree.KDTree",
        "sklearn.neural_network._stochastic_optimizers.AdamOptimizer",
        "sklearn.neural_network._stochastic_optimizers.SGDOptimizer",
        "sklearn.tree._tree.Tree",
        "sklearn.utils._bunch.Bunch",
        "sklearn.utils._metadata_requests.MetadataRequest",
        "sklearn.utils._metadata_requests.MethodMetadataRequest",
        "sklearn.utils.validation.check_array",  # wrapped in a partial, see above
        # XGBoost.
        "xgboost.core.Booster",
        "xgboost.sklearn.XGBClassifier",
        "xgboost.sklearn.XGBRFClassifier",
        "xgboost.sklearn.XGBRFRegressor",
        "xgboost.sklearn.XGBRanker",
        "xgboost.sklearn.XGBRegressor",
        # LightGBM.
        "lightgbm.basic.Booster",
        "lightgbm.sklearn.LGBMClassifier",
        "lightgbm.sklearn.LGBMRanker",
        "lightgbm.sklearn.LGBMRegressor",
        "onnxbridge._labels.LabelEncodedClassifier",  # classes_ and the inner model, nothing else
        # CatBoost.
        "catboost.core.CatBoostClassifier",
        "catboost.core.CatBoostRanker",
        "catboost.core.CatBoostRegressor",
    }
)

_VERSIONED = (
    "onnxbridge",
    "scikit-learn",
    "skl2onnx",
    "onnx",
    "onnxruntime",
    "numpy",
    "pandas",
    "scipy",
    "skops",
    "protobuf",
)


def library_versions() -> dict[str, str]:
    """Versions of Python and the libraries that shape a model and its conversion."""
    versions = {"python": platform.python_version()}
    for name in _VERSIONED:
        try:
            versions[name] = importlib_metadata.version(name)
        except importlib_metadata.PackageNotFoundError:
            continue
    return versions


def _write_json(path: Path, payload: Any) -> None:
    with atomic_write_path(path) as tmp:
        tmp.write_text(json.dumps(payload, indent=2, sort_keys=False, default=str) + "\n")


def save_estimator(estimator: Any, path: str | Path) -> None:
    """Save a fitted estimator with skops, atomically."""
    import skops.io as sio

    with atomic_write_path(path) as tmp:
        sio.dump(estimator, tmp)


def load_estimator(
    path: str | Path, *, allow_pickle: bool = False, trusted: Sequence[str] = ()
) -> Any:
    """Load an estimator from ``.skops`` (safe) or, only if allowed, ``.pkl`` / ``.joblib``.

    Args:
        path: the model file.
        allow_pickle: permit pickle / joblib files. Unpickling runs arbitrary code from the file:
            only do it for files you made yourself.
        trusted: extra fully qualified names (types or functions) to trust in a ``.skops``
            file. Without them, a ``.skops`` file loads only when it holds nothing but what
            skops trusts by itself and the reviewed names of :data:`TRUSTED_NAMES` (what fitted
            scikit-learn, XGBoost, LightGBM and CatBoost models hold); trust is by exact name,
            never by module.

    Raises:
        DataError: missing file or unknown extension.
        UnsafeModelFileError: a pickle file without ``allow_pickle``, or a ``.skops`` file
            holding a type or function that is trusted neither by skops, nor by
            :data:`TRUSTED_NAMES`, nor by ``trusted``; nothing in the file ran. Also a model
            holding a damaged tree (:func:`check_trees`), refused before anything runs it.
        BundleError: the file cannot be read as its format.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"model file {str(path)!r} does not exist; check the path")
    suffix = path.suffix.lower()
    if suffix in (".pkl", ".pickle", ".joblib"):
        if not allow_pickle:
            raise UnsafeModelFileError(
                f"{str(path)!r} is a pickle file, and loading a pickle runs any code inside it; "
                "save the model with skops (skops.io.dump) or, if you made this file yourself, "
                "pass allow_pickle=True",
                arguments=("allow_pickle",),
            )
        warnings.warn(
            f"loading {path.name} with pickle: this runs any code in the file; only use files "
            "you made yourself",
            UserWarning,
            stacklevel=2,
        )
        import joblib

        try:
            estimator = joblib.load(path)
        except Exception as exc:
            raise BundleError(f"cannot unpickle {str(path)!r}: {exc}") from exc
        check_trees(estimator, path)
        return estimator
    if suffix != ".skops":
        raise DataError(
            f"cannot load a model from {str(path)!r}: unknown extension {suffix or '(none)'!r}; "
            "use a .skops file (or .pkl / .joblib with allow_pickle=True)",
            arguments=("allow_pickle",),
        )
    import skops.io as sio

    try:
        untrusted = sio.get_untrusted_types(file=path)
    except Exception as exc:
        raise BundleError(
            f"cannot read {str(path)!r} as a skops file: {exc}; re-save it with skops.io.dump"
        ) from exc
    # A lone name is one name, not the letters of one.
    extra = {trusted} if isinstance(trusted, str) else set(trusted)
    refused = sorted(set(untrusted) - TRUSTED_NAMES - extra)
    if refused:
        raise UnsafeModelFileError(
            f"{str(path)!r} holds types or functions onnxbridge does not trust: "
            f"{', '.join(refused)}; if you know where the file comes from, trust them by name: "
            "trusted=NAME for each of them",
            arguments=("trusted",),
        )
    try:
        # skops checks the file again against exactly the names accepted above.
        estimator = sio.load(path, trusted=sorted(set(untrusted)))
    except Exception as exc:
        raise BundleError(f"cannot load {str(path)!r} with skops: {exc}") from exc
    check_trees(estimator, path)
    return estimator


# Damaged trees ---------------------------------------------------------------------------------
# scikit-learn walks tree arrays in compiled code without bounds checks: a child index out of
# range, a cycle or a feature index beyond the rows reads outside memory or never ends. skops
# leaves Tree and TreePredictor untrusted for that reason; onnxbridge trusts them (every tree
# model holds them) and so checks their arrays after loading, before anything runs the model.

# How deep the check follows attributes, lists and object arrays: far beyond any real model
# (a stacking ensemble of pipelines of forests is about 10); anything deeper is refused, since
# a tree hidden below the limit would go unchecked.
_MAX_NESTING = 64
# Values that hold nothing to check.
_PLAIN = (str, bytes, int, float, complex, bool, type)


class _DamagedTree(Exception):
    """A damaged tree at ``where`` (attribute path inside the model); ``what`` says how."""

    def __init__(self, where: str, what: str) -> None:
        super().__init__(where, what)
        self.where = where
        self.what = what


def check_trees(estimator: Any, path: str | Path) -> None:
    """Refuse a loaded model whose tree arrays would make scikit-learn read outside them.

    Every ``sklearn.tree._tree.Tree`` and histogram gradient boosting ``TreePredictor`` found in
    ``estimator`` (through attributes, lists, dicts and object arrays) must have children after
    their node and inside the node array (so no cycle and no read beyond it), a leaf exactly
    where both children are absent, split features inside the rows that reach the tree, and a
    value array of the right shape; the tree estimators of an ensemble must have been fitted on
    the ensemble's columns.

    Raises:
        UnsafeModelFileError: naming the tree, the node and the bad value.
    """
    try:
        _visit(estimator, "model", None, None, 0, set())
    except _DamagedTree as exc:
        raise UnsafeModelFileError(
            f"{str(path)!r} holds a damaged tree ({exc.where}: {exc.what}); running it could "
            "crash the process, so it is refused; re-save the model from its source"
        ) from None


def _visit(
    obj: Any, where: str, width: int | None, categorical: Any, depth: int, seen: set[int]
) -> None:
    """Check every tree below ``obj``. ``width``: columns of the rows that reach it (the nearest
    enclosing ``n_features_in_``); ``categorical``: which of them are categories for the
    nearest histogram gradient boosting model."""
    import numpy as np
    from sklearn.ensemble._hist_gradient_boosting.predictor import TreePredictor
    from sklearn.tree._tree import Tree

    if obj is None or isinstance(obj, _PLAIN) or id(obj) in seen:
        return
    if isinstance(obj, np.ndarray) and obj.dtype != object:
        return
    seen.add(id(obj))
    if depth > _MAX_NESTING:
        raise _DamagedTree(where, f"nested more than {_MAX_NESTING} levels deep")
    if isinstance(obj, Tree):
        _check_tree(obj, where, width)
        return
    if isinstance(obj, TreePredictor):
        _check_predictor(obj, where, width, categorical)
        return
    # (label, value, how the label joins the path): the path is only spelled out for values
    # that can hold a tree, so a vocabulary of a million strings costs no formatting.
    items: Iterable[tuple[Any, Any, str]]
    if isinstance(obj, dict):
        items = ((key, value, "[{!r}]") for key, value in obj.items())
    elif isinstance(obj, (list, tuple, set, frozenset)):
        items = ((i, value, "[{}]") for i, value in enumerate(obj))
    elif isinstance(obj, np.ndarray):
        items = ((i, value, "[{}]") for i, value in enumerate(obj.ravel()))
    elif hasattr(obj, "__dict__") and not callable(obj) and not isinstance(obj, ModuleType):
        attributes = vars(obj)
        own_width = attributes.get("n_features_in_")
        if isinstance(own_width, (int, np.integer)) and not isinstance(own_width, bool):
            width = int(own_width)
        # Histogram gradient boosting maps category splits through its bin mapper's mask
        # (the columns as its predictors see them), not through its own is_categorical_.
        binner = attributes.get("_bin_mapper")
        if binner is not None and hasattr(binner, "is_categorical_"):
            categorical = binner.is_categorical_
        if "estimators_" in attributes and width is not None and _feeds_unchecked(obj):
            _check_members(obj, where, width)
        items = ((name, value, ".{}") for name, value in attributes.items())
    else:
        return
    for label, value, join in items:
        if value is None or isinstance(value, _PLAIN):
            continue
        _visit(value, where + join.format(label), width, categorical, depth + 1, seen)


def _feeds_unchecked(model: Any) -> bool:
    """Whether an ensemble hands its rows to its trees without their own width check
    (``check_input=False``). Others, such as RegressorChain and ClassifierChain, whose members
    are fitted on more columns than the chain, let each member check its own rows."""
    from sklearn import ensemble as sk

    return isinstance(
        model,
        (
            sk.BaggingClassifier,
            sk.BaggingRegressor,
            sk.ExtraTreesClassifier,
            sk.ExtraTreesRegressor,
            sk.GradientBoostingClassifier,
            sk.GradientBoostingRegressor,
            sk.IsolationForest,
            sk.RandomForestClassifier,
            sk.RandomForestRegressor,
            sk.RandomTreesEmbedding,
        ),
    )


def _check_members(ensemble: Any, where: str, width: int) -> None:
    """Tree estimators of an ensemble get the ensemble's rows unchecked (forests, gradient
    boosting, isolation forest call them with check_input=False): their width must match."""
    import numpy as np
    from sklearn.tree._tree import Tree

    members = ensemble.estimators_
    members = members.ravel() if isinstance(members, np.ndarray) else members
    if not isinstance(members, (list, tuple, np.ndarray)):
        return
    features = getattr(ensemble, "estimators_features_", None)
    if features is not None and (
        not isinstance(features, (list, tuple)) or len(features) != len(members)
    ):
        raise _DamagedTree(
            f"{where}.estimators_features_",
            f"not one column list per member of estimators_ ({len(members)})",
        )
    for i, member in enumerate(members):
        if not isinstance(getattr(member, "tree_", None), Tree):
            continue
        expected = width if features is None else int(np.size(features[i]))
        got = getattr(member, "n_features_in_", None)
        if got != expected:
            raise _DamagedTree(
                f"{where}.estimators_[{i}]",
                f"fitted on {got} columns where the ensemble gives it {expected}",
            )


def _first(mask: Any) -> int:
    import numpy as np

    return int(np.flatnonzero(mask)[0])


def _check_tree(tree: Any, where: str, width: int | None) -> None:
    import numpy as np

    n = int(tree.node_count)
    # node_count sizes every view of the node arrays: check it against what was allocated
    # before reading any of them.
    if not 0 < n <= int(tree.capacity):
        raise _DamagedTree(where, f"node_count {n} outside 1..{int(tree.capacity)}")
    n_features = int(tree.n_features)
    if width is not None and n_features != width:
        raise _DamagedTree(where, f"{n_features} features where its estimator has {width}")
    left, right, feature = tree.children_left, tree.children_right, tree.feature
    node = np.arange(n)
    leaf = left == -1
    odd = leaf != (right == -1)
    if odd.any():
        i = _first(odd)
        raise _DamagedTree(
            where, f"node {i}: children {int(left[i])} and {int(right[i])}, one a leaf marker"
        )
    internal = ~leaf
    for side, child in (("left", left), ("right", right)):
        # Trees are built depth-first from node 0: a child comes after its parent, which also
        # rules out cycles.
        bad = internal & ((child <= node) | (child >= n))
        if bad.any():
            i = _first(bad)
            raise _DamagedTree(
                where,
                f"node {i}: {side} child {int(child[i])} out of range {i + 1}..{n - 1}",
            )
    bad = internal & ((feature < 0) | (feature >= n_features))
    if bad.any():
        i = _first(bad)
        raise _DamagedTree(
            where, f"node {i}: feature {int(feature[i])} out of range 0..{n_features - 1}"
        )
    expected = (n, int(tree.n_outputs), int(tree.max_n_classes))
    if tuple(tree.value.shape) != expected:
        raise _DamagedTree(where, f"value array of shape {tree.value.shape}, not {expected}")


def _check_predictor(predictor: Any, where: str, width: int | None, categorical: Any) -> None:
    import numpy as np
    from sklearn.ensemble._hist_gradient_boosting.common import PREDICTOR_RECORD_DTYPE

    nodes = getattr(predictor, "nodes", None)
    if not (
        isinstance(nodes, np.ndarray)
        and nodes.ndim == 1
        and nodes.dtype == PREDICTOR_RECORD_DTYPE
        and len(nodes) > 0
    ):
        raise _DamagedTree(where, "its nodes are not a non-empty array of predictor nodes")
    n = len(nodes)
    node = np.arange(n)
    internal = nodes["is_leaf"] == 0
    for side in ("left", "right"):
        child = nodes[side].astype(np.int64)
        bad = internal & ((child <= node) | (child >= n))
        if bad.any():
            i = _first(bad)
            raise _DamagedTree(
                where, f"node {i}: {side} child {int(child[i])} out of range {i + 1}..{n - 1}"
            )
    feature = nodes["feature_idx"].astype(np.int64)
    limit = width if width is not None else 0
    bad = internal & ((feature < 0) | (feature >= limit))
    if bad.any():
        i = _first(bad)
        raise _DamagedTree(
            where, f"node {i}: feature {int(feature[i])} out of range 0..{limit - 1}"
        )
    split_on_category = internal & (nodes["is_categorical"] != 0)
    if not split_on_category.any():
        return
    mask = categorical.ravel() if isinstance(categorical, np.ndarray) else np.zeros(0, bool)
    mask = mask.astype(bool)
    known = np.zeros(n, dtype=bool)
    inside = feature < mask.size
    known[inside] = mask[feature[inside]]
    bad = split_on_category & ~known
    if bad.any():
        i = _first(bad)
        raise _DamagedTree(
            where, f"node {i}: a category split on feature {int(feature[i])}, not a category"
        )
    raw = getattr(predictor, "raw_left_cat_bitsets", None)
    bitsets = len(raw) if isinstance(raw, np.ndarray) and raw.ndim == 2 else 0
    index = nodes["bitset_idx"].astype(np.int64)
    bad = split_on_category & (index >= bitsets)
    if bad.any():
        i = _first(bad)
        raise _DamagedTree(
            where, f"node {i}: category bitset {int(index[i])} out of range 0..{bitsets - 1}"
        )


# What card.json holds, section by section: the JSON type each field must have, and the command
# that writes the section (to name in the error). Commands read these fields without checking
# them again, so a hand-edited card fails here, on open, with the file and the field named.
_OBJECT, _LIST, _TEXT, _NUMBER, _BOOL = dict, list, str, (int, float), bool
_TYPE_NAMES = {dict: "an object", list: "a list", str: "a text", bool: "true or false"}
_CARD_REQUIRED = ("features", "task", "target")
_CARD_FIELDS: dict[str, tuple[Any, str]] = {
    "format": (int, "train"),
    "name": (_TEXT, "train"),
    "created_at": (_TEXT, "train"),
    "data": (_OBJECT, "train"),
    "features": (_LIST, "train"),
    "target": (_OBJECT, "train"),
    "task": (_TEXT, "train"),
    "classes": ((list, type(None)), "train"),
    "target_names": ((list, type(None)), "train"),
    "categories": (_OBJECT, "train"),
    "model": (_OBJECT, "train"),
    "split": (_OBJECT, "train"),
    "metrics": (_OBJECT, "train"),
    "versions": (_OBJECT, "train"),
    "files": (_OBJECT, "train"),
    "conversion": (_OBJECT, "convert"),
    "golden": (_OBJECT, "convert"),
    "validation": (_OBJECT, "validate"),
    "bench": (_OBJECT, "bench"),
    "tuning": (_OBJECT, "tune"),
}
# Fields inside the sections that commands read.
_CARD_SUBFIELDS: dict[tuple[str, str], Any] = {
    ("target", "name"): _TEXT,
    ("model", "spec"): (str, type(None)),
    ("data", "kind"): _TEXT,
    ("data", "name"): _TEXT,
    ("data", "path"): _TEXT,
    ("data", "sha256"): _TEXT,
    ("split", "test_size"): _NUMBER,
    ("split", "seed"): int,
    ("split", "stratify"): _BOOL,
    ("golden", "sha256"): _TEXT,
    ("golden", "versions"): _OBJECT,
    ("golden", "stored_at"): _TEXT,
    ("conversion", "target_opsets"): _OBJECT,
}
_TASKS = ("classification", "regression")
# A card is a few kilobytes; a bigger file is not one (and is not read into memory).
MAX_CARD_BYTES = 16 * 2**20


def _type_name(expected: Any) -> str:
    kinds = expected if isinstance(expected, tuple) else (expected,)
    names: list[str] = []
    for kind in kinds:
        if kind is type(None):
            name = "null"
        elif kind in (int, float):
            name = "a number"
        else:
            name = _TYPE_NAMES.get(kind, kind.__name__)
        if name not in names:
            names.append(name)
    return " or ".join(names)


def _has_type(value: Any, expected: Any) -> bool:
    kinds = expected if isinstance(expected, tuple) else (expected,)
    if isinstance(value, bool) and bool not in kinds:
        return False  # JSON true/false is not a number here
    return isinstance(value, kinds)


def read_card(card_path: Path) -> dict[str, Any]:
    """Read and check a bundle's ``card.json``.

    Raises:
        BundleError: the file cannot be read, is not JSON, or a field the commands use is
            missing or of the wrong type; the message names the file and the field.
    """
    shown = str(card_path)

    def damaged(what: str, writer: str = "train") -> BundleError:
        fix = (
            "re-create the bundle with `onnxbridge train`"
            if writer == "train"
            else f"re-run `onnxbridge {writer}` on the bundle, which writes it"
        )
        return BundleError(
            f"{shown!r} is damaged: {what}; restore it from a copy of the bundle or {fix}"
        )

    try:
        size = card_path.stat().st_size
        if size > MAX_CARD_BYTES:
            raise damaged(f"it is {size} bytes, over the {MAX_CARD_BYTES} a card can be")
        text = card_path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise BundleError(
            f"cannot read {shown!r} ({exc.strerror or exc}); check its permissions"
        ) from exc
    except UnicodeDecodeError as exc:
        raise damaged(f"it is not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    try:
        card = json.loads(text)
    except ValueError as exc:
        raise damaged(f"it is not valid JSON ({exc})") from exc
    if not isinstance(card, dict):
        raise damaged(f"it holds {_type_name(type(card))}, not a JSON object")
    missing = [k for k in _CARD_REQUIRED if k not in card]
    if missing:
        raise damaged(f"it lacks the field{'s' if len(missing) > 1 else ''} {', '.join(missing)}")
    for key, (expected, writer) in _CARD_FIELDS.items():
        if key in card and not _has_type(card[key], expected):
            raise damaged(
                f"the field {key!r} should be {_type_name(expected)}, got {card[key]!r}", writer
            )
    for (section, key), expected in _CARD_SUBFIELDS.items():
        block = card.get(section)
        if block is None or (key not in block and (section, key) != ("target", "name")):
            continue
        value = block.get(key)
        if not _has_type(value, expected):
            raise damaged(
                f"the field '{section}.{key}' should be {_type_name(expected)}, got {value!r}",
                _CARD_FIELDS[section][1],
            )
    if card["task"] not in _TASKS:
        raise damaged(f"the field 'task' is {card['task']!r}; it must be one of {_TASKS}")
    if not card["features"]:
        raise damaged("the field 'features' is an empty list; a model takes at least one column")
    for index, item in enumerate(card["features"]):
        if not (
            isinstance(item, dict)
            and isinstance(item.get("name"), str)
            and isinstance(item.get("dtype"), str)
        ):
            raise damaged(
                f"features[{index}] should be an object with a text name and dtype, got {item!r}"
            )
    bad_values = [k for k, v in card.get("categories", {}).items() if not isinstance(v, list)]
    if bad_values:
        raise damaged(
            f"the field 'categories.{bad_values[0]}' should be a list (the column's training "
            f"values), got {card['categories'][bad_values[0]]!r}"
        )
    bad_hash = [k for k, v in card.get("files", {}).items() if not isinstance(v, str)]
    if bad_hash:
        raise damaged(f"the field 'files.{bad_hash[0]}' should be a text (a sha256)")
    return card


def _check_replaceable(path: Path, overwrite: bool) -> None:
    """Refuse a file, and a non-empty folder unless it is a bundle and ``overwrite`` is set."""
    if path.exists() and not path.is_dir():
        raise BundleError(
            f"out={str(path)!r} exists and is not a folder; choose another out=",
            arguments=("out",),
        )
    if not path.is_dir() or not any(path.iterdir()):
        return
    if not (path / CARD_NAME).is_file():
        raise BundleError(
            f"out={str(path)!r} is not empty and is not a bundle (no {CARD_NAME}); onnxbridge "
            "only replaces its own bundles, so choose another out=",
            arguments=("out",),
        )
    if not overwrite:
        raise BundleError(
            f"out={str(path)!r} already holds a bundle; choose another out= or pass "
            "overwrite=True to replace it",
            arguments=("out", "overwrite"),
        )


def _check_outside(data: Path, out: Path) -> None:
    """Refuse a data file inside the bundle folder ``out`` replaces (it would be deleted)."""
    if not data.is_file() or not out.is_dir():
        return
    if data.resolve().is_relative_to(out.resolve()):
        raise BundleError(
            f"data={str(data)!r} is inside out={str(out)!r}, which is replaced as a whole and "
            "would take the data with it; move the data file out of the folder or choose "
            "another out=",
            arguments=("data", "out"),
        )


class Bundle:
    """A model's bundle folder. Open one with :meth:`open`; make one with :meth:`create`."""

    def __init__(self, path: Path, card: dict[str, Any]) -> None:
        self.path = path
        self.card = card

    # Paths -------------------------------------------------------------------------------------
    @property
    def card_path(self) -> Path:
        """``card.json``."""
        return self.path / CARD_NAME

    @property
    def model_path(self) -> Path:
        """``model.skops``."""
        return self.path / MODEL_NAME

    @property
    def holdout_path(self) -> Path:
        """``holdout.parquet``."""
        return self.path / HOLDOUT_NAME

    @property
    def onnx_path(self) -> Path:
        """``model.onnx`` (present after convert)."""
        return self.path / ONNX_NAME

    @property
    def reports_dir(self) -> Path:
        """``reports/``."""
        return self.path / REPORTS_DIR

    # Card accessors ----------------------------------------------------------------------------
    @property
    def schema(self) -> FeatureSchema:
        """The feature schema recorded at training."""
        return FeatureSchema.from_list(self.card["features"])

    @property
    def task(self) -> str:
        """``"classification"`` or ``"regression"``."""
        return str(self.card["task"])

    @property
    def target(self) -> str:
        """The target column name."""
        return str(self.card["target"]["name"])

    @property
    def classes(self) -> list[Any] | None:
        """Class labels (classifiers) or None."""
        return self.card.get("classes")

    @property
    def categories(self) -> dict[str, list[Any]]:
        """Column -> its training values, for models that keep no list of their categories
        (CatBoost's ``cat_features``); empty when the card records none."""
        return dict(self.card.get("categories") or {})

    # Opening and creating ----------------------------------------------------------------------
    @classmethod
    def open(cls, path: str | Path) -> Bundle:
        """Open an existing bundle.

        Raises:
            BundleError: if the folder or its ``card.json`` is missing or unreadable.
        """
        path = Path(path)
        if path.is_file():
            raise BundleError(
                f"{str(path)!r} is a file, not a bundle folder; pass the folder that holds "
                f"{CARD_NAME} (e.g. runs/iris-rf)"
            )
        if not path.is_dir():
            raise BundleError(
                f"bundle {str(path)!r} does not exist or is not a folder; create one with "
                "`onnxbridge train --out DIR`"
            )
        card_path = path / CARD_NAME
        if not card_path.is_file():
            raise BundleError(
                f"{str(path)!r} is not a bundle: it has no {CARD_NAME}; create one with "
                "`onnxbridge train --out DIR`"
            )
        card = read_card(card_path)
        return cls(path, card)

    @classmethod
    def create(
        cls,
        path: str | Path,
        *,
        card: dict[str, Any],
        estimator: Any,
        holdout: pd.DataFrame | None,
        overwrite: bool = False,
    ) -> Bundle:
        """Write a new bundle folder atomically: built aside, then renamed into place.

        Raises:
            BundleError: if ``path`` exists and is not empty, unless ``overwrite``.
        """
        path = Path(path)
        _check_replaceable(path, overwrite)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError) as exc:
            raise OSError(exc.errno, "a folder on the way to it is a file", str(path)) from exc
        try:
            staging = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        os.chmod(staging, _default_mode(directory=True))
        try:
            bundle = cls(staging, dict(card))
            save_estimator(estimator, bundle.model_path)
            files = {MODEL_NAME: file_sha256(bundle.model_path)}
            if holdout is not None:
                with atomic_write_path(bundle.holdout_path) as tmp:
                    holdout.to_parquet(tmp, index=False)
                files[HOLDOUT_NAME] = file_sha256(bundle.holdout_path)
            bundle.card["files"] = files
            _write_json(bundle.card_path, bundle.card)
            if path.exists():
                # Swap: move the old bundle aside first so a failure can restore it.
                old = Path(tempfile.mkdtemp(prefix=f".{path.name}.old.", dir=path.parent))
                old.rmdir()
                os.replace(path, old)
                try:
                    os.replace(staging, path)
                except OSError:
                    os.replace(old, path)
                    raise
                shutil.rmtree(old, ignore_errors=True)
            else:
                os.replace(staging, path)
        except OSError as exc:
            # Files are written in the staging folder: name them where the user will look.
            name = str(exc.filename or "")
            if name.startswith(str(staging)):
                shown = str(path) + name[len(str(staging)) :]
                raise OSError(exc.errno, exc.strerror, shown) from exc
            raise
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)
        return cls(path, bundle.card)

    def own_files(self) -> list[Path]:
        """The files this bundle is made of: its card and every file the card records (the
        model, the holdout, the ONNX model and its data files, the golden predictions)."""
        names = [str(name) for name in self.card.get("files") or {}]
        golden = self.card.get("golden")
        if isinstance(golden, dict) and isinstance(golden.get("file"), str):
            names.append(golden["file"])
        return [self.card_path, *(self.path / name for name in names)]

    # Reading and updating ----------------------------------------------------------------------
    def save_card(self) -> None:
        """Rewrite ``card.json`` atomically."""
        _write_json(self.card_path, self.card)

    def record_file(self, name: str) -> None:
        """Record the content hash of a file in the bundle (call :meth:`save_card` after).

        For an ONNX model (``model.onnx``), the external data files it refers to are recorded
        too, and a data file recorded for an earlier version of it that it no longer uses is
        forgotten.
        """
        files = self.card.setdefault("files", {})
        files[name] = file_sha256(self.path / name)
        if name.endswith(".onnx"):
            from onnxbridge._onnxfile import data_file_name

            files.pop(data_file_name(name), None)
            for location in self._onnx_data(name):
                files[location] = file_sha256(self.path / location)

    def _onnx_data(self, name: str) -> list[str]:
        """The external data files of the bundle's ONNX file ``name``, checked, as the model
        names them (a file name in the bundle folder; a link there is hashed as its content)."""
        from onnxbridge._onnxfile import external_data_locations
        from onnxbridge.errors import OnnxModelError

        try:
            return list(external_data_locations(self.path / name))
        except OnnxModelError as exc:
            raise BundleError(f"{exc}, or re-run `onnxbridge convert` on the bundle") from exc

    def check_file(self, name: str) -> None:
        """Raise BundleError if a file is missing or its hash differs from the card's.

        For an ONNX model, its external data files are checked the same way: present beside
        it, inside the bundle, and with the hashes the card records.
        """
        target = self.path / name
        if not target.is_file():
            raise BundleError(
                f"bundle {str(self.path)!r} has no {name}; "
                + (
                    "run `onnxbridge convert` first"
                    if name == ONNX_NAME
                    else "re-create it with `onnxbridge train`"
                )
            )
        self._check_hash(name)
        if name.endswith(".onnx"):
            files = self.card.get("files", {})
            for location in self._onnx_data(name):
                if name in files and location not in files:
                    raise BundleError(
                        f"{name} in {str(self.path)!r} reads its tensors from {location!r}, "
                        f"which {CARD_NAME} does not record; re-run `onnxbridge convert` on the "
                        "bundle"
                    )
                self._check_hash(location)

    def _check_hash(self, name: str) -> None:
        expected = self.card.get("files", {}).get(name)
        if expected is not None and file_sha256(self.path / name) != expected:
            raise BundleError(
                f"{name} in {str(self.path)!r} changed since it was recorded in {CARD_NAME} "
                "(sha256 differs); re-create the bundle or re-run the step that writes it"
            )

    def load_estimator(self, *, trusted: Sequence[str] = ()) -> Any:
        """The fitted estimator from ``model.skops`` (hash-checked).

        Args:
            trusted: extra names to trust in ``model.skops``, as in :func:`load_estimator`.
                Trust is given per call and never stored: a name recorded in the same bundle
                would only show that whoever wrote the bundle trusted it.
        """
        self.check_file(MODEL_NAME)
        return load_estimator(self.model_path, trusted=trusted)

    def load_holdout(self) -> tuple[pd.DataFrame, pd.Series]:
        """The held-out rows: features in schema order and the target."""
        self.check_file(HOLDOUT_NAME)
        frame = pd.read_parquet(self.holdout_path)
        wanted = [*self.schema.names, self.target]
        missing = [name for name in wanted if name not in frame.columns]
        if missing:
            raise BundleError(
                f"{HOLDOUT_NAME} in {str(self.path)!r} has no column {missing[0]!r} that "
                f"{CARD_NAME} names (features, target); the card was edited or damaged: "
                "restore it from a copy of the bundle or re-create the bundle with "
                "`onnxbridge train`"
            )
        return normalize_features(frame[self.schema.names]), frame[self.target]

    def write_report(self, name: str, payload: dict[str, Any]) -> Path:
        """Write ``reports/<name>`` as JSON, atomically; returns its path."""
        target = self.reports_dir / name
        _write_json(target, payload)
        return target


def now_iso() -> str:
    """The current UTC time, ISO 8601, seconds precision."""
    return datetime.now(UTC).replace(microsecond=0).isoformat()


def train_bundle(
    data: str,
    model: str,
    out: str | Path,
    *,
    target: str | None = None,
    test_size: float = 0.3,
    seed: int = 42,
    stratify: bool = False,
    overwrite: bool = False,
    preprocess: str = "none",
) -> tuple[Bundle, Any]:
    """Fit ``model`` on ``data`` and write the bundle folder ``out``.

    Returns:
        The new bundle and the :class:`onnxbridge.train.TrainResult`.

    Raises:
        DataError, ModelSpecError, BundleError: nothing is written on error.
    """
    from onnxbridge.train import check_training_inputs, fit_model

    out = Path(out)
    # The caller's own mistakes first (a bad option, model spec, data file or target), then
    # the folder; both before fitting, so a long fit is not wasted.
    dataset = check_training_inputs(
        data, model, target=target, test_size=test_size, preprocess=preprocess
    )
    _check_replaceable(out, overwrite)
    _check_outside(Path(data), out)
    result = fit_model(
        dataset,
        model,
        target=target,
        test_size=test_size,
        seed=seed,
        stratify=stratify,
        preprocess=preprocess,
    )
    dataset = result.dataset
    target_name = str(dataset.y.name)
    card: dict[str, Any] = {
        "format": CARD_FORMAT,
        "name": out.name,
        "created_at": now_iso(),
        "data": {**dataset.source, "rows": len(dataset.X), "columns": dataset.X.shape[1]},
        "features": dataset.schema.to_list(),
        "target": {"name": target_name, "dtype": str(dataset.y.dtype)},
        "task": result.task,
        "classes": result.classes,
        "model": {
            "spec": model,
            "class": type(result.estimator).__name__,
            "preprocess": preprocess,
        },
        "split": {
            "test_size": test_size,
            "seed": seed,
            "stratify": result.stratify,
            "train_rows": len(result.X_train),
            "test_rows": len(result.X_test),
        },
        "metrics": result.metrics,
        "versions": library_versions(),
    }
    if dataset.target_names is not None:
        card["target_names"] = dataset.target_names
    if result.categories:
        card["categories"] = result.categories
    holdout = result.X_test.copy()
    holdout[target_name] = result.y_test.to_numpy()
    bundle = Bundle.create(
        out, card=card, estimator=result.estimator, holdout=holdout, overwrite=overwrite
    )
    return bundle, result
