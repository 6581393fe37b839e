"""Tree ensembles as plain arrays, read from every library onnxbridge converts, and their graph.

:class:`TreeEnsembleSpec` holds one ensemble whatever trained it: per node its tree, feature,
threshold (or, for a categorical split, the category codes that go left), children, where a
missing value (NaN) goes, and per leaf its value(s). The readers walk
scikit-learn's ``tree_`` (trees, forests, extra-trees, gradient boosting), HistGradientBoosting's
``_predictors``, XGBoost's JSON model and LightGBM's text model. The same spec feeds the
converters (``converters/trees.py`` and kin) and the precision probes
(:mod:`onnxbridge.convert._precision`).

Two graphs are built from a spec, ``x [N, F] -> raw scores [N, K]``:

* **float**: one ``ai.onnx.ml`` ``TreeEnsembleRegressor`` on float32 input. Thresholds are rounded
  *down* to float32 (``x32 <= t64`` holds exactly when ``x32 <= floor32(t64)``), so models that
  compare in float32 (scikit-learn trees, XGBoost) keep every decision, and models that compare in
  float64 (HistGradientBoosting, LightGBM) keep them on float32-representable data.
* **double**: float64 input compared with float64 thresholds (``nodes_values_as_tensor``). ONNX
  Runtime's kernel for it always *outputs* float32, so the ensemble is asked for the index of the
  leaf each tree reaches (small integers, exact in float32) and the float64 leaf values are gathered
  and summed by ordinary operators: ``TreeEnsembleRegressor -> Cast -> Gather -> ReduceSum/MatMul``.
  Models that compare in float32 get ``Cast(float) -> Cast(double)`` in front, which is exactly
  what they do to their own input.

Categorical splits (``TreeEnsembleSpec.left_codes``) go in front of either graph: each
categorical feature's raw value becomes a code (text through ``ai.onnx.ml`` LabelEncoder, numbers
through ``Equal`` with the known values; missing and unknown values get codes of their own), a
``Gather`` from a ``[codes, splits]`` 0/1 table gives one column per split, appended to ``x``,
and the split becomes an ordinary numeric split on its column. Without categorical splits nothing
is added in front.

The float graph needs ``ai.onnx.ml`` 1, the double one 3 (``nodes_values_as_tensor``; the highest
skl2onnx's guards accept). Every integer attribute is written as ``int`` (protobuf 7 refuses a
``bool`` in an int list, which is how skl2onnx's HistGradientBoosting converter fails).

Forests have millions of nodes: the readers work per tree on numpy arrays, and the node's
attributes are written from arrays straight into protobuf (no Python object per node); inside
onnxbridge's conversion they are set once on the finished model (:func:`deferred_arrays`).
Ensembles from :data:`TENSOR_NODES` nodes or leaf weights (a many-class forest lists one weight
per leaf and class) write their float arrays as tensors (``ai.onnx.ml`` 3), which a model past
protobuf's 2 GiB can keep in an external data file.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from onnx import AttributeProto, ModelProto, NodeProto, TensorProto, numpy_helper
from onnx.helper import make_attribute

from onnxbridge._onnxfile import PROTOBUF_LIMIT
from onnxbridge.errors import ConversionError

__all__ = [
    "TreeEnsembleSpec",
    "add_float_forest_classifier",
    "add_raw_scores",
    "category_keys",
    "category_texts",
    "deferred_arrays",
    "floor_float32",
    "from_hist_gradient_boosting",
    "from_lightgbm",
    "from_sklearn_trees",
    "from_xgboost",
    "hist_gradient_boosting_columns",
    "member_features",
]

ML_DOMAIN = "ai.onnx.ml"


@dataclass
class TreeEnsembleSpec:
    """A fitted tree ensemble as arrays, one entry per node over all trees.

    Decisions: a node sends ``x[feature]`` left when ``x <= threshold`` (``rule="leq"``) or
    ``x < threshold`` (``rule="lt"``), and a missing value left when ``missing_left``. The raw
    score is ``base + sum over trees of the reached leaf's value`` (divided by the number of trees
    when ``average``), ``[N, K]``.

    Attributes:
        tree: ``[M]`` tree index of each node.
        node: ``[M]`` node id within its tree.
        feature: ``[M]`` feature index (-1 for leaves).
        threshold: ``[M]`` float64 thresholds (0 for leaves).
        left: ``[M]`` node id of the left (true) child (-1 for leaves).
        right: ``[M]`` node id of the right (false) child (-1 for leaves).
        missing_left: ``[M]`` whether NaN goes left.
        values: ``[M, K]`` leaf values (rows of internal nodes unused).
        base: ``[K]`` added to the sum.
        rule: ``"leq"`` or ``"lt"``.
        native: the dtype the source model compares in: ``"float32"`` or ``"float64"``.
        average: divide the sum over trees by the number of trees (random forests).
        tree_output: ``[T]`` the single output column each tree writes to, or None when every
            leaf has a value for all ``K`` columns.
        n_features: how many input features the model takes.
        notes: remarks a reader wants shown to the user.
        categories: feature index ``j`` -> the raw values the model knows for categorical
            feature ``j``, in code order (position ``k`` is code ``k``). Values are as they
            arrive in the ONNX input: ``str`` (object array) for a category / text column --
            onnxbridge feeds such a column as ``str(value)`` and a missing value as ``""`` -- or
            float64 for a numeric column the model treats as categorical.
        left_codes: spec row (index into the per-node arrays) of a categorical split -> ``int64``
            codes (positions in ``categories[feature]``) that go left.
        unknown_left: ``[M]`` bool, read at categorical nodes only: where a value that is not
            among ``categories[feature]`` goes; None means the same as ``missing_left``.
        truncate_codes: numeric categorical feature ``j`` -> how the model turns a value into
            an integer code before looking it up (LightGBM and XGBoost cast to ``int``):
            ``"toward_zero"`` (every value, ``-0.5`` is code 0) or ``"nonnegative"`` (negative
            values are left as they are, so they stay unknown). Features not listed are looked
            up as they are.

    A categorical node (a row in ``left_codes``) sends a known value left when its code is in
    ``left_codes[row]``, a missing value (NaN, or ``""`` for strings) left when
    ``missing_left[row]``, and any other value left when ``unknown_left[row]``; its
    ``threshold`` is unused.
    """

    tree: np.ndarray
    node: np.ndarray
    feature: np.ndarray
    threshold: np.ndarray
    left: np.ndarray
    right: np.ndarray
    missing_left: np.ndarray
    values: np.ndarray
    base: np.ndarray
    rule: str = "leq"
    native: str = "float64"
    average: bool = False
    tree_output: np.ndarray | None = None
    n_features: int = 0
    notes: list[str] = field(default_factory=list)
    categories: dict[int, np.ndarray] = field(default_factory=dict)
    left_codes: dict[int, np.ndarray] = field(default_factory=dict)
    unknown_left: np.ndarray | None = None
    truncate_codes: dict[int, str] = field(default_factory=dict)

    @property
    def n_trees(self) -> int:
        """How many trees."""
        return int(self.tree.max()) + 1 if len(self.tree) else 0

    @property
    def n_outputs(self) -> int:
        """Width ``K`` of the raw score."""
        return int(self.base.shape[0])

    @property
    def is_leaf(self) -> np.ndarray:
        """``[M]`` which nodes are leaves."""
        return self.feature < 0

    @property
    def is_categorical(self) -> np.ndarray:
        """``[M]`` which nodes are categorical splits (rows of ``left_codes``)."""
        mask = np.zeros(len(self.feature), dtype=bool)
        mask[list(self.left_codes)] = True
        return mask

    def splits(self) -> list[tuple[int, float]]:
        """Every distinct ``(feature, threshold)`` pair the ensemble's numeric splits test."""
        inner = ~self.is_leaf & ~self.is_categorical
        pairs = np.unique(
            np.stack([self.feature[inner].astype(np.float64), self.threshold[inner]], axis=1),
            axis=0,
        )
        return [(int(f), float(t)) for f, t in pairs]


# -- readers ---------------------------------------------------------------------------------


def member_features(spec: TreeEnsembleSpec, subsets: Sequence[Any]) -> np.ndarray:
    """``spec.feature`` of an ensemble whose tree ``t`` saw only the columns ``subsets[t]`` of
    the model's input (bagging's ``estimators_features_``): each split's feature as a column of
    the model's input; leaves keep theirs."""
    columns = [np.asarray(c, dtype=np.int64) for c in subsets]
    starts = np.r_[0, np.cumsum([len(c) for c in columns])[:-1]].astype(np.int64)
    inner = ~spec.is_leaf
    feature = spec.feature.copy()
    feature[inner] = np.concatenate(columns)[starts[spec.tree[inner]] + spec.feature[inner]]
    return feature


def from_sklearn_trees(
    trees: list[Any], values_of: Any, n_outputs: int, base: Any, **kwargs: Any
) -> TreeEnsembleSpec:
    """Read scikit-learn ``tree_`` objects (trees compare ``float32(x) <= threshold``).

    Args:
        trees: fitted DecisionTree*/ExtraTree* estimators.
        values_of: ``f(tree_.value[leaves]) -> [L, K]`` leaf values, vectorized.
        n_outputs: how many values each leaf holds (``K``, or 1 with ``tree_output``).
        base: ``[K]`` initial raw score.
        **kwargs: extra :class:`TreeEnsembleSpec` fields (``average``, ``tree_output``).
    """
    # Each column is allocated once at its full size and filled tree by tree: no list of
    # per-tree pieces to join (which would hold every column twice).
    counts = np.array([int(e.tree_.node_count) for e in trees], dtype=np.int64)
    starts = np.r_[0, np.cumsum(counts)]
    total = int(starts[-1])
    joined = {
        "tree": np.repeat(np.arange(len(trees), dtype=np.int64), counts),
        "node": np.arange(total, dtype=np.int64) - np.repeat(starts[:-1], counts),
        "feature": np.empty(total, dtype=np.int64),
        "threshold": np.empty(total, dtype=np.float64),
        "left": np.empty(total, dtype=np.int64),
        "right": np.empty(total, dtype=np.int64),
        "missing": np.zeros(total, dtype=bool),
        "values": np.zeros((total, n_outputs)),
    }
    for index, estimator in enumerate(trees):
        t = estimator.tree_
        rows = slice(int(starts[index]), int(starts[index + 1]))
        leaf = np.asarray(t.children_left) < 0
        for name, read, blank in (
            ("feature", t.feature, -1),
            ("threshold", t.threshold, 0.0),
            ("left", t.children_left, -1),
            ("right", t.children_right, -1),
        ):
            column = joined[name][rows]  # a view: filling it fills the joined column
            column[:] = read
            column[leaf] = blank
        missing = getattr(t, "missing_go_to_left", None)
        if missing is not None:
            joined["missing"][rows] = np.asarray(missing).astype(bool) & ~leaf
        values = np.asarray(values_of(np.asarray(t.value)[leaf]), dtype=np.float64)
        joined["values"][rows][leaf] = values.reshape(-1, n_outputs)
    n_features = int(getattr(trees[0], "n_features_in_", 0)) if trees else 0
    return TreeEnsembleSpec(
        tree=joined["tree"],
        node=joined["node"],
        feature=joined["feature"],
        threshold=joined["threshold"],
        left=joined["left"],
        right=joined["right"],
        missing_left=joined["missing"],
        values=joined["values"].reshape(-1, n_outputs),
        base=np.asarray(base, dtype=np.float64).reshape(-1),
        rule="leq",
        native="float32",
        n_features=n_features,
        **kwargs,
    )


def hist_gradient_boosting_columns(model: Any) -> np.ndarray:
    """``[F]`` the input column each of a fitted HistGradientBoosting's tree features reads.

    With categorical features the model's preprocessor (a ColumnTransformer) puts the encoded
    category columns first and the numeric ones after them, and its trees index that order;
    without, the trees read the input's own columns.
    """
    categorical = getattr(model, "is_categorical_", None)
    n_features = int(model.n_features_in_)
    if categorical is None or getattr(model, "_preprocessor", None) is None:
        return np.arange(n_features, dtype=np.int64)
    mask = np.asarray(categorical, dtype=bool)
    return np.concatenate([np.flatnonzero(mask), np.flatnonzero(~mask)]).astype(np.int64)


def _hgb_categories(model: Any) -> dict[int, np.ndarray]:
    """Input column -> the values HistGradientBoosting knows there, in code order.

    The model's OrdinalEncoder gives code ``k`` to ``categories_[k]`` (sorted values seen in
    fit, missing values left out), as the values they are (:func:`_known_categories`); the
    graph spells them as onnxbridge feeds them (:func:`category_texts`).
    """
    categorical = getattr(model, "is_categorical_", None)
    preprocessor = getattr(model, "_preprocessor", None)
    if categorical is None or preprocessor is None:
        return {}
    encoder = preprocessor.named_transformers_["encoder"]
    found: dict[int, np.ndarray] = {}
    for column, values in zip(
        np.flatnonzero(np.asarray(categorical, dtype=bool)), encoder.categories_, strict=True
    ):
        values = np.asarray(values)
        known = np.array([not _is_missing(v) for v in values], dtype=bool)
        found[int(column)] = _known_categories(values[known].tolist())
    return found


def _is_missing(value: Any) -> bool:
    return value is None or (isinstance(value, (float, np.floating)) and np.isnan(value))


def _bitset_codes(bitset: np.ndarray, n_codes: int) -> np.ndarray:
    """The codes below ``n_codes`` set in a scikit-learn bitset (``[8]`` uint32 words)."""
    codes = np.arange(n_codes)
    words = np.asarray(bitset, dtype=np.uint64)[codes // 32]
    return codes[((words >> (codes % 32).astype(np.uint64)) & 1) == 1].astype(np.int64)


def from_hist_gradient_boosting(model: Any) -> TreeEnsembleSpec:
    """Read a fitted HistGradientBoostingClassifier / Regressor (compares ``x64 <= t64``).

    Feature indices are the input's columns. A categorical split sends the codes in its
    ``raw_left_cat_bitsets`` row left and every other known code right; scikit-learn's encoder
    turns a value it did not see in fit into a missing value, so unseen values go where missing
    ones go (``unknown_left`` stays None).
    """
    predictors = model._predictors
    k = len(predictors[0]) if predictors else 1
    columns = hist_gradient_boosting_columns(model)
    categories = _hgb_categories(model)
    parts: list[dict[str, np.ndarray]] = []
    left_codes: dict[int, np.ndarray] = {}
    tree_output: list[int] = []
    rows = 0
    for iteration in predictors:
        for column, predictor in enumerate(iteration):
            part = _hgb_tree(predictor.nodes, len(parts), columns)
            for position in np.flatnonzero(part["categorical"]):
                feature = int(part["feature"][position])
                if feature not in categories:
                    raise ConversionError(
                        f"{type(model).__name__} has a categorical split on feature "
                        f"{feature}, which its encoder does not list as categorical; the "
                        "model file is inconsistent: refit it"
                    )
                bitset = predictor.raw_left_cat_bitsets[int(part["bitset"][position])]
                left_codes[rows + int(position)] = _bitset_codes(bitset, len(categories[feature]))
            parts.append(part)
            tree_output.append(column)
            rows += len(part["node"])
    base = np.asarray(model._baseline_prediction, dtype=np.float64).reshape(-1)
    if base.shape[0] == 1 and k > 1:
        base = np.repeat(base, k)
    return _joined_spec(
        parts,
        base=base,
        rule="leq",
        native="float64",
        n_features=int(model.n_features_in_),
        tree_output=np.asarray(tree_output, dtype=np.int64),
        categories=categories,
        left_codes=left_codes,
    )


def _joined_spec(parts: list[dict[str, np.ndarray]], **fields: Any) -> TreeEnsembleSpec:
    """One spec from per-tree column arrays (one value per leaf), plus the other ``fields``."""
    keys = ("tree", "node", "feature", "threshold", "left", "right", "missing", "value")
    joined = {k: np.concatenate([p[k] for p in parts]) if parts else np.zeros(0) for k in keys}
    return TreeEnsembleSpec(
        tree=joined["tree"].astype(np.int64),
        node=joined["node"].astype(np.int64),
        feature=joined["feature"].astype(np.int64),
        threshold=joined["threshold"].astype(np.float64),
        left=joined["left"].astype(np.int64),
        right=joined["right"].astype(np.int64),
        missing_left=joined["missing"].astype(bool),
        values=joined["value"].astype(np.float64).reshape(-1, 1),
        **fields,
    )


def _hgb_tree(nodes: np.ndarray, index: int, columns: np.ndarray) -> dict[str, np.ndarray]:
    """One HistGradientBoosting predictor's ``nodes`` (a structured array) as spec columns."""
    leaf = nodes["is_leaf"].astype(bool)
    categorical = nodes["is_categorical"].astype(bool) & ~leaf
    count = len(nodes)
    return {
        "tree": np.full(count, index, dtype=np.int64),
        "node": np.arange(count, dtype=np.int64),
        "feature": np.where(leaf, -1, columns[np.where(leaf, 0, nodes["feature_idx"])]),
        "threshold": np.where(leaf | categorical, 0.0, nodes["num_threshold"]),
        "left": np.where(leaf, -1, nodes["left"].astype(np.int64)),
        "right": np.where(leaf, -1, nodes["right"].astype(np.int64)),
        "missing": nodes["missing_go_to_left"].astype(bool) & ~leaf,
        "value": np.where(leaf, nodes["value"], 0.0),
        "categorical": categorical,
        "bitset": nodes["bitset_idx"],
    }


def _known_categories(values: Any) -> np.ndarray:
    """A model's stored categories, in code order, as the values they are (text or numbers).

    The graph spells them as onnxbridge feeds a category column (:func:`category_texts`).
    """
    return np.array(list(values), dtype=object)


def _integer_categories(highest: int) -> np.ndarray:
    """The known values of a numeric column a booster splits on as categories: ``0 … highest``.

    Code ``k`` is the value ``k`` itself; every other value (negative, larger, NaN) is unknown
    or missing to the graph, which is where both boosters route it too.
    """
    return np.arange(highest + 1, dtype=np.float64)


def _xgb_model_json(booster: Any) -> dict[str, Any]:
    raw = booster.save_raw("json")
    return json.loads(bytes(raw).decode("utf-8"))


def _parse_base_score(text: str) -> np.ndarray:
    text = str(text).strip()
    if text.startswith("["):
        text = text[1:-1]
    return np.array([float(v) for v in text.split(",") if v.strip()], dtype=np.float64)


def _xgboost_stored_categories(document: dict[str, Any]) -> dict[int, np.ndarray]:
    """The categories XGBoost (3.1 and later) stores for each DataFrame category column.

    Read by :func:`onnxbridge.train.xgboost_categories` (position ``k`` is code ``k``); XGBoost
    re-codes a DataFrame's categories by these at predict time.
    """
    from onnxbridge.train import xgboost_categories

    return {j: _known_categories(known) for j, known in xgboost_categories(document).items()}


def from_xgboost(
    model: Any, *, string_features: list[int] | None = None
) -> tuple[TreeEnsembleSpec, str]:
    """Read a fitted XGBClassifier / XGBRegressor (compares ``float32(x) < float32(t)``).

    Categorical splits (``enable_categorical=True``) send the categories a node lists *right*
    and every other one left; a missing value goes where the node learned (``default_left``).
    DataFrame category columns are read with the categories the model stores and re-codes by;
    a category the model never saw (XGBoost refuses it) is routed as missing. A numeric column
    declared categorical (``feature_types``) is read as its integer codes (a fractional value
    cut to its integer part): a negative one, or one above every listed category, goes left,
    as in XGBoost.

    Args:
        model: the fitted model.
        string_features: the features that arrive as text, checked to have stored categories;
            None skips the check.

    Returns:
        The spec (raw margin) and the objective's name (``binary:logistic``, ...).

    Raises:
        ConversionError: a booster other than ``gbtree``, multi-target trees, a categorical
            feature that arrives as text without stored categories.
    """
    booster = model.get_booster()
    document = _xgb_model_json(booster)
    learner = document["learner"]
    gradient_booster = learner["gradient_booster"]
    if gradient_booster.get("name") not in ("gbtree", None):
        raise ConversionError(
            f"XGBoost booster {gradient_booster.get('name')!r} cannot be converted; use "
            "booster='gbtree' (the default)"
        )
    trees_model = gradient_booster["model"]
    objective = learner["objective"]["name"]
    params = learner["learner_model_param"]
    limit = len(trees_model["trees"])
    best = getattr(model, "best_iteration", None)
    indptr = trees_model.get("iteration_indptr")
    if best is not None and indptr:
        # predict() stops at the best iteration whenever the booster records one (early
        # stopping, by early_stopping_rounds or an EarlyStopping callback).
        limit = min(limit, int(indptr[int(best) + 1]))
    stored = _xgboost_stored_categories(document)
    parts: list[dict[str, np.ndarray]] = []
    # row -> (feature, categories listed at the node: they go right)
    listed: dict[int, tuple[int, np.ndarray]] = {}
    rows = 0
    for index, tree in enumerate(trees_model["trees"][:limit]):
        part = _xgboost_tree(tree, index)
        node_categories = _xgboost_node_categories(tree)
        for node in np.flatnonzero(part["categorical"]):
            listed[rows + int(node)] = (
                int(part["feature"][node]),
                node_categories.get(int(node), np.zeros(0, dtype=np.int64)),
            )
        parts.append(part)
        rows += len(part["node"])
    spec = _xgboost_spec(parts, int(params["num_feature"]))
    spec.base = _xgboost_base(params, objective)
    tree_output = np.asarray([int(c) for c in trees_model["tree_info"]], dtype=np.int64)
    spec.tree_output = tree_output[:limit]
    if listed:
        _xgboost_categorical_splits(spec, listed, stored, string_features or [])
    return spec, objective


def _xgboost_tree(tree: dict[str, Any], index: int) -> dict[str, np.ndarray]:
    """One tree of XGBoost's JSON model as spec columns (its node ids are the array indices).

    XGBoost compares in float32 and stores a leaf's value in ``split_conditions``.
    """
    if int(tree["tree_param"].get("size_leaf_vector", "1")) > 1:
        raise ConversionError(
            "XGBoost multi_strategy='multi_output_tree' cannot be converted yet; use the "
            "default one_output_per_tree"
        )
    left = np.asarray(tree["left_children"], dtype=np.int64)
    count = len(left)
    leaf = left < 0
    split_type = np.asarray(tree.get("split_type") or np.zeros(count), dtype=np.int64)
    categorical = (split_type != 0) & ~leaf
    conditions = np.asarray(tree["split_conditions"], dtype=np.float64).reshape(count)
    conditions = conditions.astype(np.float32).astype(np.float64)
    features = np.asarray(tree["split_indices"], dtype=np.int64).reshape(count)
    default_left = np.asarray(tree["default_left"], dtype=np.int64).reshape(count) != 0
    return {
        "tree": np.full(count, index, dtype=np.int64),
        "node": np.arange(count, dtype=np.int64),
        "feature": np.where(leaf, -1, features),
        "threshold": np.where(leaf | categorical, 0.0, conditions),
        "left": np.where(leaf, -1, left),
        "right": np.where(leaf, -1, np.asarray(tree["right_children"], dtype=np.int64)),
        "missing": default_left & ~leaf,
        "value": np.where(leaf, conditions, 0.0),
        "categorical": categorical,
    }


def _xgboost_spec(parts: list[dict[str, np.ndarray]], n_features: int) -> TreeEnsembleSpec:
    """The spec of XGBoost's trees (base and per-tree outputs filled by the caller)."""
    return _joined_spec(
        parts,
        base=np.zeros(1),
        rule="lt",
        native="float32",
        n_features=n_features,
    )


def _xgboost_base(params: dict[str, Any], objective: str) -> np.ndarray:
    """``[K]`` the margin XGBoost starts from: ``base_score`` through the objective's link."""
    k = max(int(params.get("num_class", "0")), int(params.get("num_target", "1")), 1)
    base = _parse_base_score(params.get("base_score", "0"))
    if base.shape[0] == 1 and k > 1:
        base = np.repeat(base, k)
    if objective in ("binary:logistic", "reg:logistic"):
        # base_score is a probability there; the trees add to its logit.
        base = np.log(base / (1 - base))
    elif objective in ("count:poisson", "reg:gamma", "reg:tweedie", "survival:cox"):
        base = np.log(base)
    return base.astype(np.float32).astype(np.float64)


def _xgboost_node_categories(tree: dict[str, Any]) -> dict[int, np.ndarray]:
    """Node id -> the categories (codes) a categorical node lists, from the tree's JSON."""
    segments = tree.get("categories_segments") or []
    sizes = tree.get("categories_sizes") or []
    values = np.asarray(tree.get("categories") or [], dtype=np.int64)
    return {
        int(node): values[int(start) : int(start) + int(size)]
        for node, start, size in zip(
            tree.get("categories_nodes") or [], segments, sizes, strict=True
        )
    }


def _xgboost_categorical_splits(
    spec: TreeEnsembleSpec,
    listed: dict[int, tuple[int, np.ndarray]],
    stored: dict[int, np.ndarray],
    text: list[int],
) -> None:
    """Fill ``spec``'s categorical fields: the listed categories go right, the rest left."""
    highest: dict[int, int] = {}
    for feature, codes in listed.values():
        if feature not in stored and feature in text:
            raise ConversionError(
                f"XGBoost feature {feature} arrives as text, but the model stores no categories "
                "for it (fitted on codes, or saved by XGBoost before 3.1), so its text cannot "
                "be coded; pass that column as its numeric codes, or refit on a pandas "
                "category column with XGBoost 3.1 or later"
            )
        if feature not in stored:
            top = int(codes.max()) if codes.size else 0
            highest[feature] = max(highest.get(feature, 0), top)
    spec.categories = {
        **{j: stored[j] for j in sorted({f for f, _ in listed.values()} & set(stored))},
        **{j: _integer_categories(top) for j, top in sorted(highest.items())},
    }
    # XGBoost casts a value to int; a negative one is an invalid category.
    spec.truncate_codes = dict.fromkeys(sorted(highest), "nonnegative")
    unknown = spec.missing_left.copy()
    for row, (feature, codes) in listed.items():
        every = np.arange(len(spec.categories[feature]), dtype=np.int64)
        spec.left_codes[row] = every[~np.isin(every, codes)]
        if feature not in stored:
            # A negative code, or one past the node's bit field, is "not listed": left.
            unknown[row] = True
    spec.unknown_left = unknown


def from_lightgbm(
    model: Any, *, string_features: list[int] | None = None
) -> tuple[TreeEnsembleSpec, dict[str, Any]]:
    """Read a fitted LGBMClassifier / LGBMRegressor (compares ``x64 <= t64``).

    Categorical splits (``decision_type "=="``) send the categories they list left and every
    other value right: an unseen category, NaN and a negative value too. A pandas ``category``
    column reaches the trees as its code in the categories the model stored
    (``pandas_categorical``); a category it never saw becomes NaN. A numeric column fitted as
    ``categorical_feature`` is its own code, a fractional value cut toward zero as LightGBM's
    ``int`` cast does. A numeric split on a category
    column (an ordered category) becomes the set of codes at or below its threshold.

    The trees are read from the model's text form (``model_to_string()``), which keeps each
    tree's nodes as arrays; node ids are given in preorder (a node, its left subtree, its
    right subtree).

    Args:
        model: the fitted model.
        string_features: the features that arrive as text (the DataFrame's category columns,
            in order); None reads every feature as the number the trees see (a category
            column's code), which is the model on codes, not on the text onnxbridge feeds.

    Returns:
        The spec (raw score) and the model's header (``objective``, ``num_class``, ...).

    Raises:
        ConversionError: linear trees, ``zero_as_missing``, category columns that do not match
            the model's.
    """
    booster = model.booster_
    iteration = getattr(model, "best_iteration_", None) or None
    header, blocks = _lightgbm_model(booster.model_to_string(num_iteration=iteration))
    header["pandas_categorical"] = getattr(booster, "pandas_categorical", None)
    k = int(header.get("num_tree_per_iteration", header.get("num_class", 1)))
    codes = _LightGBMCategorical(_lightgbm_string_features(booster, header, string_features))
    forest = _LightGBMForest.read(blocks)
    rows = forest.rows()
    _lightgbm_refuse(forest, rows)
    spec = forest.spec(rows, codes)
    spec.n_features = int(header["max_feature_idx"]) + 1
    spec.base = np.zeros(k)
    spec.tree_output = np.asarray([int(b["Tree"]) % k for b in blocks], dtype=np.int64)
    spec.average = bool(header.get("average_output", False))
    if codes.left_codes:
        codes.fill(spec)
    return spec, header


_LIGHTGBM_INTEGERS = ("num_class", "num_tree_per_iteration", "label_index", "max_feature_idx")


def _lightgbm_model(text: str) -> tuple[dict[str, Any], list[dict[str, str]]]:
    """A LightGBM text model's header and its tree blocks (``key -> value`` text, per tree).

    The header's counts are ints, ``feature_names`` a list and ``average_output`` (a line of
    its own when set) a bool, as in ``dump_model()``.
    """
    head, _, rest = text.partition("\nTree=")
    lines = head.splitlines()
    header: dict[str, Any] = {"name": lines[0] if lines else ""}
    for line in lines[1:]:
        key, sep, value = line.partition("=")
        if key:
            header[key] = value if sep else True
    for key in _LIGHTGBM_INTEGERS:
        if key in header:
            header[key] = int(header[key])
    header["feature_names"] = str(header.get("feature_names", "")).split()
    header["average_output"] = bool(header.get("average_output", False))
    blocks: list[dict[str, str]] = []
    if rest:
        for chunk in rest.partition("\nend of trees")[0].split("\nTree="):
            index, _, body = chunk.partition("\n")
            block = {"Tree": index.strip()}
            for line in body.splitlines():
                key, sep, value = line.partition("=")
                if sep:
                    block[key] = value
            blocks.append(block)
    return header, blocks


@dataclass
class _LightGBMForest:
    """A LightGBM model's trees as arrays over all trees (from its text form).

    Each tree's nodes have ids ``0 … 2L-2`` here: its ``L-1`` internal nodes first (LightGBM's
    own numbering), then its ``L`` leaves (LightGBM's leaf ``~c`` is ``L-1+c``). ``start`` is the
    first id of each tree in the ids over all trees.
    """

    blocks: list[dict[str, str]]
    leaves: np.ndarray  # [T] leaves per tree
    start: np.ndarray  # [T] first id of each tree
    inner: np.ndarray  # [I] the id of each internal node
    inner_tree: np.ndarray  # [I] its tree
    leaf: np.ndarray  # [L] the id of each leaf
    leaf_tree: np.ndarray  # [L] its tree
    left: np.ndarray  # [U] left child's id (-1 for leaves)
    right: np.ndarray  # [U] right child's id (-1 for leaves)
    feature: np.ndarray  # [I]
    threshold: np.ndarray  # [I] as written (a categorical node's: its index in the tree)
    decision: np.ndarray  # [I] decision_type bits
    value: np.ndarray  # [L]

    @classmethod
    def read(cls, blocks: list[dict[str, str]]) -> _LightGBMForest:
        """Parse the arrays of every tree block at once (one numpy array per attribute)."""
        leaves = np.array([int(b["num_leaves"]) for b in blocks], dtype=np.int64)
        sizes = 2 * leaves - 1
        start = np.cumsum(sizes) - sizes
        inner_tree = np.repeat(np.arange(len(blocks)), leaves - 1)
        leaf_tree = np.repeat(np.arange(len(blocks)), leaves)
        inner = start[inner_tree] + _positions(leaves - 1)
        leaf = start[leaf_tree] + leaves[leaf_tree] - 1 + _positions(leaves)

        def column(key: str, dtype: Any, count: int) -> np.ndarray:
            values = np.array(" ".join(b.get(key, "") for b in blocks).split(), dtype=dtype)
            if len(values) != count:
                raise ConversionError(
                    f"the LightGBM model's trees list {len(values)} {key} values for {count} "
                    "nodes; the model text is damaged: save it again from the fitted model"
                )
            return values

        n_inner, n_leaves = len(inner), len(leaf)
        children = np.full((2, int(sizes.sum())), -1, dtype=np.int64)
        for side, key in enumerate(("left_child", "right_child")):
            child = column(key, np.int64, n_inner)
            offset = np.where(child >= 0, 0, leaves[inner_tree] - 1)
            children[side, inner] = start[inner_tree] + offset + np.where(child >= 0, child, ~child)
        return cls(
            blocks=blocks,
            leaves=leaves,
            start=start,
            inner=inner,
            inner_tree=inner_tree,
            leaf=leaf,
            leaf_tree=leaf_tree,
            left=children[0],
            right=children[1],
            feature=column("split_feature", np.int64, n_inner),
            # As dump_model() writes them: an infinite threshold as +-1e300, NaN as 0.
            threshold=np.clip(
                np.nan_to_num(column("threshold", np.float64, n_inner), nan=0.0), -1e300, 1e300
            ),
            decision=column("decision_type", np.int64, n_inner),
            value=column("leaf_value", np.float64, n_leaves),
        )

    def rows(self) -> np.ndarray:
        """``[U]`` each node's spec row: trees in order, each tree's nodes in preorder.

        Worked level by level over all trees at once: a subtree's size comes bottom-up, a
        node's preorder position top-down (a left child follows its parent, a right child
        follows its parent's left subtree).
        """
        levels = [self.start]
        inner = self.start[self.left[self.start] >= 0]
        while inner.size and sum(len(level) for level in levels) <= len(self.left):
            levels.append(np.concatenate([self.left[inner], self.right[inner]]))
            inner = levels[-1][self.left[levels[-1]] >= 0]
        if sum(len(level) for level in levels) != len(self.left):
            raise ConversionError(
                "the LightGBM model's trees do not link every node once; the model text is "
                "damaged: save it again from the fitted model"
            )
        size = np.ones(len(self.left), dtype=np.int64)
        for level in reversed(levels):
            inner = level[self.left[level] >= 0]
            size[inner] += size[self.left[inner]] + size[self.right[inner]]
        position = np.zeros(len(self.left), dtype=np.int64)
        for level in levels:
            inner = level[self.left[level] >= 0]
            position[self.left[inner]] = position[inner] + 1
            position[self.right[inner]] = position[inner] + 1 + size[self.left[inner]]
        tree = np.repeat(np.arange(len(self.leaves)), 2 * self.leaves - 1)
        return self.start[tree] + position

    def spec(self, rows: np.ndarray, codes: _LightGBMCategorical) -> TreeEnsembleSpec:
        """The trees as a spec, rows in ``rows`` order; categorical splits go to ``codes``.

        ``n_features``, ``base`` and ``tree_output`` are left for the caller.
        """
        count = len(self.left)
        order = np.empty(count, dtype=np.int64)
        order[rows] = np.arange(count, dtype=np.int64)
        tree = np.repeat(np.arange(len(self.leaves), dtype=np.int64), 2 * self.leaves - 1)
        position = rows - self.start[tree]
        categorical = (self.decision & 1) != 0
        threshold = _lightgbm_threshold(self.threshold)
        threshold[categorical] = 0.0
        missing_nan = ((self.decision >> 2) & 3) == 2
        # Without a missing type LightGBM reads NaN as 0; NaN is never in a category.
        nan_left = np.where(missing_nan, (self.decision & 2) != 0, 0.0 <= threshold)
        nan_left &= ~categorical
        text = np.isin(self.feature, list(codes.pandas)) & ~categorical
        special = np.flatnonzero(categorical | text)
        for g in special[np.argsort(rows[self.inner[special]])]:
            row, feature = int(rows[self.inner[g]]), int(self.feature[g])
            if categorical[g]:
                codes.category_split(row, feature, self.category_codes(int(g)))
            else:
                codes.numeric_split(row, feature, float(threshold[g]), bool(nan_left[g]))
        columns = {
            "feature": np.full(count, -1, dtype=np.int64),
            "threshold": np.zeros(count),
            "left": np.full(count, -1, dtype=np.int64),
            "right": np.full(count, -1, dtype=np.int64),
            "missing": np.zeros(count, dtype=bool),
            "value": np.zeros(count),
        }
        columns["feature"][self.inner] = self.feature
        columns["threshold"][self.inner] = np.where(text, 0.0, threshold)
        columns["left"][self.inner] = position[self.left[self.inner]]
        columns["right"][self.inner] = position[self.right[self.inner]]
        columns["missing"][self.inner] = nan_left
        columns["value"][self.leaf] = self.value
        return TreeEnsembleSpec(
            tree=tree[order],
            node=position[order],
            feature=columns["feature"][order],
            threshold=columns["threshold"][order],
            left=columns["left"][order],
            right=columns["right"][order],
            missing_left=columns["missing"][order],
            values=columns["value"][order].reshape(-1, 1),
            base=np.zeros(1),
            rule="leq",
            native="float64",
        )

    def category_codes(self, g: int) -> np.ndarray:
        """The codes internal node ``g`` (a categorical split) sends left: its bitset's bits."""
        block = self.blocks[int(self.inner_tree[g])]
        bounds = np.array(block.get("cat_boundaries", "").split(), dtype=np.int64)
        words = np.array(block.get("cat_threshold", "").split(), dtype=np.int64)
        index = int(self.threshold[g])
        part = words[bounds[index] : bounds[index + 1]]
        bits = (part[:, None] >> np.arange(32, dtype=np.int64)) & 1
        return np.flatnonzero(bits.reshape(-1)).astype(np.int64)


def _positions(counts: np.ndarray) -> np.ndarray:
    """``0 … c-1`` for each count ``c``, one after the other."""
    total = int(counts.sum())
    return np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)


def _lightgbm_refuse(forest: _LightGBMForest, rows: np.ndarray) -> None:
    """Refuse what cannot be converted, named by the first such node in preorder.

    Raises:
        ConversionError: a split that reads 0 as missing, a leaf of a linear tree.
    """
    count = len(forest.left)
    zero = np.zeros(count, dtype=bool)
    zero[rows[forest.inner]] = ((forest.decision >> 2) & 3) == 1
    linear_trees = np.array(
        [block.get("is_linear", "0").strip() not in ("", "0") for block in forest.blocks],
        dtype=bool,
    )
    linear = np.zeros(count, dtype=bool)
    linear[rows[forest.leaf]] = linear_trees[forest.leaf_tree]
    bad = np.flatnonzero(zero | linear)
    if not bad.size:
        return
    if zero[bad[0]]:
        raise ConversionError(
            "LightGBM models fitted with zero_as_missing=True cannot be converted; refit with "
            "zero_as_missing=False (the default)"
        )
    raise ConversionError(
        "LightGBM linear trees (linear_tree=True) cannot be converted; fit with linear_tree=False"
    )


def _lightgbm_string_features(
    booster: Any, dump: dict[str, Any], string_features: list[int] | None
) -> dict[int, np.ndarray]:
    """Feature index -> its pandas categories (code order) for a LightGBM model.

    ``pandas_categorical`` lists the categories of the DataFrame's category columns in column
    order, but not which columns they were (an integer column fitted as
    ``categorical_feature`` is categorical too): only the caller knows, by the columns that
    arrive as text. Without it (None) every feature is read as the number LightGBM's trees
    see, a category column as its code.

    Raises:
        ConversionError: not as many features arrive as text as the model has category columns.
    """
    pandas = dump.get("pandas_categorical") or getattr(booster, "pandas_categorical", None) or []
    names = list(dump.get("feature_names") or [])
    if string_features is None:
        return {}
    if len(string_features) != len(pandas):
        shown = [names[j] if j < len(names) else str(j) for j in string_features]
        raise ConversionError(
            f"the LightGBM model was fitted on {len(pandas)} pandas category column(s) but "
            f"{len(string_features)} column(s) arrive as text ({', '.join(shown) or 'none'}); "
            "pass sample rows with the training data's columns, category columns as text or "
            "category (not as codes)"
        )
    return {j: _known_categories(known) for j, known in zip(string_features, pandas, strict=True)}


@dataclass
class _LightGBMCategorical:
    """Collects the categorical splits of a LightGBM model while its trees are read."""

    pandas: dict[int, np.ndarray]  # feature -> its pandas categories (code order)
    left_codes: dict[int, np.ndarray] = field(default_factory=dict)
    unknown_left: dict[int, bool] = field(default_factory=dict)
    highest: dict[int, int] = field(default_factory=dict)

    def category_split(self, row: int, feature: int, listed: np.ndarray) -> None:
        """A categorical split: the ``listed`` codes go left, anything else right."""
        self.left_codes[row] = listed
        self.unknown_left[row] = False
        if feature not in self.pandas:
            self.highest[feature] = max(self.highest.get(feature, 0), int(listed.max()))

    def numeric_split(self, row: int, feature: int, threshold: float, missing_left: bool) -> None:
        """A ``<=`` split on a category column's codes: the codes up to the threshold go left."""
        every = np.arange(len(self.pandas[feature]), dtype=np.int64)
        self.left_codes[row] = every[every <= threshold]
        # An unseen category is NaN to LightGBM, as a missing one.
        self.unknown_left[row] = missing_left

    def fill(self, spec: TreeEnsembleSpec) -> None:
        """Write the collected splits into ``spec``'s categorical fields."""
        used = {int(spec.feature[row]) for row in self.left_codes}
        spec.categories = {j: self.pandas[j] for j in sorted(used & set(self.pandas))}
        spec.categories.update(
            {j: _integer_categories(top) for j, top in sorted(self.highest.items())}
        )
        # LightGBM casts a value to int (toward zero) and sends a negative int right.
        spec.truncate_codes = dict.fromkeys(sorted(self.highest), "toward_zero")
        spec.left_codes = dict(self.left_codes)
        unknown = spec.missing_left.copy()
        for row, goes_left in self.unknown_left.items():
            unknown[row] = goes_left
        spec.unknown_left = unknown


# LightGBM reads an input value within 1e-35 of zero (its kZeroThreshold, a float) as 0.
_LIGHTGBM_ZERO = float(np.float32(1e-35))


def _lightgbm_threshold(threshold: np.ndarray) -> np.ndarray:
    """LightGBM thresholds for the raw input: ``x <= t`` as LightGBM decides it (a new array).

    LightGBM turns every value with ``|x| <= 1e-35`` into 0 before its trees see it, and puts
    splits between negative values and zero at -1e-35: there ``x <= t`` holds for LightGBM only
    when ``x < -1e-35``. A threshold within that band compares 0 for the whole band.
    """
    threshold = np.asarray(threshold, dtype=np.float64)
    below = (-_LIGHTGBM_ZERO <= threshold) & (threshold < 0.0)
    above = (0.0 <= threshold) & (threshold < _LIGHTGBM_ZERO)
    return np.where(
        below,
        np.nextafter(-_LIGHTGBM_ZERO, -np.inf),
        np.where(above, _LIGHTGBM_ZERO, threshold),
    )


# -- graph -----------------------------------------------------------------------------------


def floor_float32(values: np.ndarray) -> np.ndarray:
    """The largest float32 not above each value (``x32 <= t`` iff ``x32 <= floor32(t)``)."""
    values = np.asarray(values, dtype=np.float64)
    largest = float(np.finfo(np.float32).max)
    # Beyond float32's range (LightGBM splits at 1e300): every finite float32 is below it.
    values = np.where(values > largest, largest, np.where(values < -largest, -np.inf, values))
    rounded = values.astype(np.float32)
    above = rounded.astype(np.float64) > values
    rounded[above] = np.nextafter(rounded[above], np.float32(-np.inf))
    return rounded


def category_keys(values: np.ndarray) -> np.ndarray:
    """A categorical feature's known values as numbers (float64), for a numeric input.

    A text value that is not a number becomes NaN: it can never equal a number.
    """
    values = np.asarray(values)
    if values.dtype.kind in "fiub":
        return values.astype(np.float64)
    keys = np.full(len(values), np.nan)
    for position, value in enumerate(values):
        try:
            keys[position] = float(value)
        except (TypeError, ValueError):
            continue
    return keys


def category_texts(values: np.ndarray) -> list[tuple[str, int]]:
    """``(text, code)`` for a categorical feature's known values, for a text input: every
    spelling under which onnxbridge may feed each value (:func:`onnxbridge.data.category_spellings`:
    an integral number answers to ``"3"`` and ``"3.0"``)."""
    from onnxbridge.data import category_spellings

    return [
        (text, code)
        for code, value in enumerate(np.asarray(values).tolist())
        for text in category_spellings(value)
    ]


def _categorical_rows(spec: TreeEnsembleSpec) -> dict[int, list[int]]:
    """Feature -> the spec rows of its categorical splits, in row order."""
    by_feature: dict[int, list[int]] = {}
    for row in sorted(spec.left_codes):
        by_feature.setdefault(int(spec.feature[row]), []).append(int(row))
    return by_feature


def _text_codes(
    scope: Any,
    container: Any,
    raw: str,
    pairs: list[tuple[str, int]],
    n_codes: int,
    out: str,
) -> None:
    """``raw [N, 1]`` strings -> ``out [N]`` int64 (``ai.onnx.ml`` LabelEncoder): the code of
    each ``(text, code)`` pair, ``n_codes`` for ``""`` (missing), ``n_codes + 1`` otherwise."""
    name, op = scope.get_unique_variable_name, scope.get_unique_operator_name
    texts = [text for text, _ in pairs]
    if "" in texts or len(set(texts)) != len(texts):
        raise ConversionError(
            f"a categorical feature's known values {texts[:10]} hold an empty or repeated "
            "text; onnxbridge feeds a missing value as the empty text, so such a model cannot "
            "be converted: give the categories distinct, non-empty names and refit"
        )
    mapped, shape = name("category_code_2d"), name("flat_shape")
    ml_target = container.target_opset_any_domain(ML_DOMAIN)
    if ml_target >= 2:
        container.add_node(
            "LabelEncoder",
            [raw],
            [mapped],
            op_domain=ML_DOMAIN,
            op_version=2,
            name=op("LabelEncoder"),
            keys_strings=[*texts, ""],
            values_int64s=[code for _, code in pairs] + [n_codes],
            default_int64=n_codes + 1,
        )
    elif [code for _, code in pairs] == list(range(n_codes)):
        # Version 1 maps the i-th class to i: enough when each code has one spelling.
        container.add_node(
            "LabelEncoder",
            [raw],
            [mapped],
            op_domain=ML_DOMAIN,
            op_version=1,
            name=op("LabelEncoder"),
            classes_strings=[*texts, ""],
            default_int64=n_codes + 1,
        )
    else:
        raise ConversionError(
            f"numeric categories fed as text need ai.onnx.ml 2 or later (LabelEncoder with "
            f"keys), but the target is {ml_target}; leave out ml_opset= or pass ml_opset=3",
            arguments=("ml_opset",),
        )
    container.add_initializer(shape, TensorProto.INT64, [1], [-1])
    container.add_node("Reshape", [mapped, shape], [out], name=op("Reshape"))


def _number_codes(
    scope: Any, container: Any, raw: str, keys: np.ndarray, onnx_type: int, out: str
) -> None:
    """``raw [N, 1]`` numbers -> ``out [N]`` int64: ``k`` for ``keys[k]``, ``len(keys)`` for
    NaN, ``len(keys) + 1`` for anything else.

    ``ArgMax`` over ``[x == keys, isnan(x), 0.5]`` picks the first maximum: the matching key,
    else NaN's column, else the constant one.
    """
    name, op = scope.get_unique_variable_name, scope.get_unique_operator_name
    target = getattr(container, "target_opset", None)
    if isinstance(target, int) and target < 11:
        raise ConversionError(
            f"a categorical feature given as numbers needs opset 11 or later (Equal on "
            f"floats), but the target is {target}; leave out opset= or pass opset=11 or more",
            arguments=("opset",),
        )
    numpy_type = np.float64 if onnx_type == TensorProto.DOUBLE else np.float32
    table, equal, matched = name("category_keys"), name("category_equal"), name("category_match")
    container.add_initializer(
        table, onnx_type, [1, len(keys)], keys.astype(numpy_type).astype(np.float64).tolist()
    )
    container.add_node("Equal", [raw, table], [equal], name=op("Equal"))
    container.add_node("Cast", [equal], [matched], to=onnx_type, name=op("Cast"))
    nan, nan_value = name("category_isnan"), name("category_missing")
    container.add_node("IsNaN", [raw], [nan], name=op("IsNaN"))
    container.add_node("Cast", [nan], [nan_value], to=onnx_type, name=op("Cast"))
    zero, half = name("zero"), name("half")
    container.add_initializer(zero, onnx_type, [], [0.0])
    container.add_initializer(half, onnx_type, [], [0.5])
    zeros, other = name("category_zeros"), name("category_other")
    container.add_node("Mul", [nan_value, zero], [zeros], name=op("Mul"))
    container.add_node("Add", [zeros, half], [other], name=op("Add"))
    scores = name("category_scores")
    container.add_node("Concat", [matched, nan_value, other], [scores], axis=1, name=op("Concat"))
    container.add_node("ArgMax", [scores], [out], axis=1, keepdims=0, name=op("ArgMax"))


def _truncated_codes(scope: Any, container: Any, raw: str, how: str, onnx_type: int) -> str:
    """``raw [N, 1]`` numbers cut to integers as a booster's ``int`` cast does (NaN stays NaN).

    ``how``: ``"toward_zero"`` (LightGBM: ``-0.5`` becomes 0) or ``"nonnegative"`` (XGBoost:
    negative values are invalid categories, kept as they are so that they stay unknown).
    """
    name, op = scope.get_unique_variable_name, scope.get_unique_operator_name
    zero, negative, floor = name("zero"), name("code_negative"), name("code_floor")
    container.add_initializer(zero, onnx_type, [], [0.0])
    container.add_node("Less", [raw, zero], [negative], name=op("Less"))
    container.add_node("Floor", [raw], [floor], name=op("Floor"))
    below = raw
    if how == "toward_zero":
        below = name("code_ceil")
        container.add_node("Ceil", [raw], [below], name=op("Ceil"))
    elif how != "nonnegative":  # pragma: no cover - readers pass one of the two
        raise ValueError(f"unknown truncation {how!r}")
    out = name("code_integer")
    container.add_node("Where", [negative, below, floor], [out], name=op("Where"))
    return out


def _add_categorical_columns(
    scope: Any,
    container: Any,
    x: str,
    spec: TreeEnsembleSpec,
    text_inputs: dict[int, str] | None,
    onnx_type: int,
) -> tuple[str, TreeEnsembleSpec]:
    """Turn every categorical split into a numeric split on a 0/1 column appended to ``x``.

    For each categorical feature the raw value becomes a code (known values ``0 … n-1``,
    missing ``n``, unknown ``n + 1``); a ``[n + 2, S]`` table says, for each of the feature's
    ``S`` splits, whether that code goes right (1) or left (0), and a ``Gather`` of it by code
    gives ``S`` columns. A split becomes ``column <= 0.5`` (or ``< 0.5``): left on 0. The new
    columns are never NaN. ``x [N, F] -> [N, F + sum S]``; the returned spec reads them.
    A spec without categorical splits comes back as it is, with ``x``.
    """
    by_feature = _categorical_rows(spec)
    if not by_feature:
        return x, spec
    name, op = scope.get_unique_variable_name, scope.get_unique_operator_name
    text_inputs = text_inputs or {}
    next_column = int(spec.n_features)  # x's width: the new columns follow it
    feature = spec.feature.copy()
    threshold = spec.threshold.copy()
    missing_left = spec.missing_left.copy()
    unknown_left = spec.missing_left if spec.unknown_left is None else spec.unknown_left
    pieces = [x]
    for column, rows in sorted(by_feature.items()):
        if column not in spec.categories:
            raise ConversionError(
                f"feature {column} has categorical splits but no list of known categories; "
                "the model cannot be converted"
            )
        known = np.asarray(spec.categories[column])
        n_codes = len(known)
        codes = name("category_code")
        if column in text_inputs:
            pairs = category_texts(known)
            _text_codes(scope, container, text_inputs[column], pairs, n_codes, codes)
        else:
            raw, index = name("category_raw"), name("column_index")
            container.add_initializer(index, TensorProto.INT64, [1], [column])
            container.add_node("Gather", [x, index], [raw], axis=1, name=op("Gather"))
            if spec.native == "float32" and onnx_type == TensorProto.DOUBLE:
                # The source model rounds its input to float32 before anything else.
                as_float, back = name("category_float32"), name("category_rounded")
                container.add_node("Cast", [raw], [as_float], to=TensorProto.FLOAT, name=op("Cast"))
                container.add_node("Cast", [as_float], [back], to=onnx_type, name=op("Cast"))
                raw = back
            if column in spec.truncate_codes:
                raw = _truncated_codes(
                    scope, container, raw, spec.truncate_codes[column], onnx_type
                )
            keys = category_keys(known)
            _number_codes(scope, container, raw, keys, onnx_type, codes)
        table = np.ones((n_codes + 2, len(rows)))
        for position, row in enumerate(rows):
            left = np.asarray(spec.left_codes[row], dtype=np.int64)
            if left.size and (left.min() < 0 or left.max() >= n_codes):
                raise ConversionError(
                    f"a categorical split on feature {column} sends codes {left.tolist()} "
                    f"left, but the feature has {n_codes} known categories; the model "
                    "cannot be converted"
                )
            table[left, position] = 0.0
            table[n_codes, position] = 0.0 if spec.missing_left[row] else 1.0
            table[n_codes + 1, position] = 0.0 if unknown_left[row] else 1.0
            feature[row] = next_column + position
            threshold[row] = 0.5
            missing_left[row] = False
        initializer, gathered = name("category_goes_right"), name("category_split")
        container.add_initializer(initializer, onnx_type, list(table.shape), table.ravel().tolist())
        container.add_node("Gather", [initializer, codes], [gathered], axis=0, name=op("Gather"))
        pieces.append(gathered)
        next_column += len(rows)
    extended = name("x_with_categories")
    container.add_node("Concat", pieces, [extended], axis=1, name=op("Concat"))
    numeric = replace(
        spec,
        feature=feature,
        threshold=threshold,
        missing_left=missing_left,
        n_features=next_column,
        categories={},
        left_codes={},
        unknown_left=None,
        truncate_codes={},
    )
    return extended, numeric


# -- node attributes from arrays ---------------------------------------------------------------
#
# A forest has millions of nodes: its attributes are written from numpy arrays straight into
# protobuf's wire format and parsed once (``ParseFromString``), never through Python lists of
# millions of numbers. The model is the same as one built with ``onnx.helper.make_node``.

_FLOATS_FIELD = 7  # AttributeProto.floats (repeated float)
_INTS_FIELD = 8  # AttributeProto.ints (repeated int64)
_STRINGS_FIELD = 9  # AttributeProto.strings (repeated bytes)


@dataclass(frozen=True)
class _Strings:
    """A ``strings`` attribute of few distinct values: entry ``i`` is ``table[codes[i]]``."""

    table: tuple[bytes, ...]
    codes: np.ndarray


def _repeated_strings(strings: _Strings) -> bytes:
    """``strings`` as protobuf ``strings`` fields, one record (tag, length, text) per entry."""
    records = [_length_prefix(_STRINGS_FIELD, len(text)) + text for text in strings.table]
    width = max(len(r) for r in records)
    padded = np.zeros((len(records), width), dtype=np.uint8)
    for row, record in enumerate(records):
        padded[row, : len(record)] = np.frombuffer(record, dtype=np.uint8)
    sizes = np.array([len(r) for r in records])
    codes = np.asarray(strings.codes, dtype=np.intp)
    keep = np.arange(width)[None, :] < sizes[codes][:, None]
    return padded[codes][keep].tobytes()


def _length_prefix(field_number: int, size: int) -> bytes:
    """The tag and length of a length-delimited (packed) field of ``size`` bytes."""
    out = bytearray([(field_number << 3) | 2])
    while True:
        byte, size = size & 0x7F, size >> 7
        out.append(byte | (0x80 if size else 0))
        if not size:
            return bytes(out)


def _packed_varints(values: np.ndarray) -> bytes:
    """Non-negative integers as packed varints, every one padded to the widest one's length.

    A padded varint (continuation bits on leading groups of zeros) is valid protobuf: the
    parser reads the same numbers, and writing the message again gives the shortest form.
    """
    width = max(1, -(-int(values.max()).bit_length() // 7)) if len(values) else 1
    unsigned = values.astype(np.uint64)
    table = np.empty((len(values), width), dtype=np.uint8)
    for k in range(width):
        table[:, k] = (unsigned >> np.uint64(7 * k)).astype(np.uint8) | np.uint8(0x80)
    table[:, width - 1] &= np.uint8(0x7F)
    return table.tobytes()


def _fill_attribute(attribute: AttributeProto, name: str, values: Any) -> None:
    """Make ``attribute`` an ``ints`` / ``floats`` / ``strings`` / ``tensor`` one, in place.

    ``values``: an integer array (ints), a float array (floats, rounded to float32 as protobuf
    does), :class:`_Strings` (strings) or a ``TensorProto``.
    """
    attribute.Clear()
    attribute.name = name
    if isinstance(values, TensorProto):
        attribute.CopyFrom(make_attribute(name, values))
        return
    if isinstance(values, _Strings):
        attribute.type = AttributeProto.STRINGS
        attribute.MergeFromString(_repeated_strings(values))
        return
    values = np.ascontiguousarray(values).reshape(-1)
    if values.dtype.kind in "iub":
        attribute.type = AttributeProto.INTS
        if len(values) and int(values.min()) < 0:
            attribute.ints.extend(values.astype(np.int64).tolist())
        else:
            body = _packed_varints(values)
            attribute.MergeFromString(_length_prefix(_INTS_FIELD, len(body)) + body)
    else:
        attribute.type = AttributeProto.FLOATS
        body = values.astype("<f4").tobytes()
        attribute.MergeFromString(_length_prefix(_FLOATS_FIELD, len(body)) + body)


def _set_array_attributes(
    node: NodeProto, arrays: dict[str, Any], *, check_size: bool = True
) -> None:
    """Give ``node`` the ``arrays`` as attributes, all of them in sorted order (``make_node``'s);
    ``check_size``: refuse a node whose lists pass protobuf's limit (the caller checks blocks
    of one ensemble together)."""
    kept = {a.name: a for a in node.attribute if a.name not in arrays}
    small = {name: AttributeProto() for name in kept}
    for name, attribute in kept.items():
        small[name].CopyFrom(attribute)
    del node.attribute[:]
    for name in sorted([*small, *arrays]):
        if name in small:
            node.attribute.append(small[name])
        else:
            # Parsed in a message of its own, which grows its arrays by doubling, then copied
            # at its exact size: the parse's spare room is freed with the temporary message.
            parsed = AttributeProto()
            _fill_attribute(parsed, name, arrays[name])
            node.attribute.add().CopyFrom(parsed)
            del parsed
    if check_size:
        _check_listed_size([node])


def _check_listed_size(nodes: list[NodeProto]) -> None:
    """Refuse an ensemble (its nodes) whose list attributes (all but tensors) alone reach
    protobuf's limit."""
    attributes = [a for node in nodes for a in node.attribute]
    entries = sum(len(a.ints) + len(a.floats) + len(a.strings) for a in attributes)
    if entries * 16 < PROTOBUF_LIMIT:
        return  # an entry takes at most 11 bytes, a mode 12: far below the limit
    listed = sum(a.ByteSize() for a in attributes if a.type != AttributeProto.TENSOR)
    if listed >= PROTOBUF_LIMIT:
        ids = ("nodes_treeids", "nodes_featureids")
        count = sum(
            max((len(a.ints) for a in node.attribute if a.name in ids), default=0) for node in nodes
        )
        raise ConversionError(
            f"the tree ensemble's {count:,} nodes need {listed / 2**30:.2f} GiB of integer and "
            "text attributes, over protobuf's 2 GiB limit for the ONNX file (only tensors can "
            "go to an external data file); train fewer or smaller trees (n_estimators, "
            "max_depth, min_samples_leaf)"
        )


# Node name -> its array attributes, while skl2onnx builds a model (see deferred_arrays).
_DEFERRED: ContextVar[dict[str, dict[str, Any]] | None] = ContextVar("deferred", default=None)


@contextmanager
def deferred_arrays(
    *, opset5: bool = False, block_nodes: int = 0
) -> Iterator[Callable[[ModelProto], None]]:
    """Within the block, tree-ensemble nodes get their big attributes only when attached.

    skl2onnx copies every node a few times on its way to a model; a forest's node is most of
    the model, so it goes through without its arrays and ``attach(model)`` sets them once on
    the finished model. Outside the block (a plain ``skl2onnx.convert_sklearn`` call) nodes are
    complete at once.

    Args:
        opset5: write the ensembles as ``ai.onnx.ml`` 5 ``TreeEnsemble`` nodes where the model
            allows it (:mod:`onnxbridge.convert._tree_v5`).
        block_nodes: a tree ensemble of more nodes is written as blocks of whole trees of at
            most this many nodes each (0: one node); see
            :func:`onnxbridge.convert._tree_v5.make_v5`, ``split_regressor`` and
            ``split_classifier``.

    Yields:
        ``attach(model)``: set the arrays on the model's nodes.
    """
    pending: dict[str, dict[str, Any]] = {}
    token = _DEFERRED.set(pending)

    def attach(model: ModelProto) -> None:
        from onnxbridge.convert import _tree_v5

        walked = list(_graph_nodes(model.graph))
        found = [
            (graph, node)
            for graph, node in walked
            if node.name in pending
            and not any(a.name in pending[node.name] for a in node.attribute)
        ]
        upgrade = opset5 and _tree_v5.can_use_v5(model, [node for _, node in walked], pending)
        for graph, node in found:
            arrays = pending.pop(node.name)
            if node.op_type == "TreeEnsembleClassifier":
                blocks = _tree_v5.split_classifier(graph, node, arrays, block_nodes)
            elif node.op_type != "TreeEnsembleRegressor":
                _set_array_attributes(node, arrays)
                continue
            elif upgrade:
                blocks = _tree_v5.make_v5(graph, node, arrays, block_nodes)
            else:
                blocks = _tree_v5.split_regressor(graph, node, arrays, block_nodes)
            for block, block_arrays in blocks:
                _set_array_attributes(block, block_arrays, check_size=False)
            _check_listed_size([block for block, _ in blocks])
        if upgrade:
            _tree_v5.set_ml_opset(model)
        if pending:
            raise ConversionError(
                f"tree-ensemble node(s) {sorted(pending)} were lost on the way to the model; "
                "report this model (its trees would predict nothing)"
            )

    try:
        yield attach
        if pending:
            # A node left without its arrays still loads, and predicts zeros: never return it.
            raise ConversionError(
                f"tree-ensemble node(s) {sorted(pending)} never got their arrays; report this "
                "model (its trees would predict nothing)"
            )
    finally:
        _DEFERRED.reset(token)


def _graph_nodes(graph: Any) -> Iterator[tuple[Any, NodeProto]]:
    """``(graph, node)`` for the nodes of ``graph`` and of the subgraphs its nodes hold."""
    for node in graph.node:
        yield graph, node
        for attribute in node.attribute:
            for sub in [attribute.g] if attribute.HasField("g") else attribute.graphs:
                yield from _graph_nodes(sub)


def _add_ensemble_node(
    scope: Any,
    container: Any,
    op_type: str,
    inputs: list[str],
    outputs: list[str],
    op_version: int,
    attrs: dict[str, Any],
) -> None:
    """Add an ``ai.onnx.ml`` tree-ensemble node whose array attributes come from numpy.

    Small attributes (strings, numbers, short lists) go through the container as usual; the
    arrays are set on the node it made, or kept for :func:`deferred_arrays`'s ``attach``.
    """
    arrays = {k: v for k, v in attrs.items() if isinstance(v, (np.ndarray, TensorProto, _Strings))}
    small = {k: v for k, v in attrs.items() if k not in arrays}
    name = scope.get_unique_operator_name(op_type)
    container.add_node(
        op_type,
        inputs,
        outputs,
        op_domain=ML_DOMAIN,
        op_version=op_version,
        name=name,
        **small,
    )
    pending = _DEFERRED.get()
    if pending is not None and name not in pending:
        pending[name] = arrays
    else:
        _set_array_attributes(container.nodes[-1], arrays)


def _tensor(values: np.ndarray) -> TensorProto:
    """A float64 initializer's content, from the array's bytes."""
    return numpy_helper.from_array(np.ascontiguousarray(values, dtype=np.float64))


def _modes(spec: TreeEnsembleSpec) -> _Strings:
    """``nodes_modes``: ``LEAF`` or the ensemble's branch rule, one per node."""
    branch = b"BRANCH_LEQ" if spec.rule == "leq" else b"BRANCH_LT"
    return _Strings((branch, b"LEAF"), spec.is_leaf)


# Ensembles from this many nodes or leaf weights on write their float arrays as tensors
# (``*_as_tensor``, ``ai.onnx.ml`` 3): a model past protobuf's 2 GiB limit can keep tensors in an
# external data file, not lists of numbers. Smaller ones keep the float lists every
# ``ai.onnx.ml`` version reads.
TENSOR_NODES = 1 << 22


def _floats_as_tensors(container: Any, spec: TreeEnsembleSpec, weights: int) -> bool:
    """Whether the float graph writes its float arrays (``weights`` leaf weights) as tensors
    (big ensembles, ml >= 3)."""
    big = max(len(spec.tree), weights) >= TENSOR_NODES
    return big and container.target_opset_any_domain(ML_DOMAIN) >= 3


def _floats(name: str, values: np.ndarray, as_tensor: bool) -> dict[str, Any]:
    """``{name: float32 values}``, or ``{name_as_tensor: float32 tensor}``."""
    if as_tensor:
        tensor = numpy_helper.from_array(np.ascontiguousarray(values, dtype=np.float32), name="")
        return {f"{name}_as_tensor": tensor}
    return {name: np.asarray(values, dtype=np.float32)}


def _local_indexes(local: np.ndarray, as_tensor: bool) -> dict[str, Any]:
    """The double graph's ``target_weights``: a float64 tensor for big ensembles (the kernel
    reads float64 weights with float64 input), else the float list."""
    if as_tensor:
        return {"target_weights_as_tensor": numpy_helper.from_array(local.astype(np.float64))}
    return {"target_weights": local.astype(np.float32)}


def _ensemble_attributes(
    spec: TreeEnsembleSpec, thresholds: np.ndarray, *, as_tensors: bool = False
) -> dict[str, Any]:
    """The ``nodes_*`` attributes; float64 thresholds always as a tensor, float32 ones as
    ``nodes_values`` unless ``as_tensors``."""
    attrs: dict[str, Any] = {
        "nodes_treeids": spec.tree,
        "nodes_nodeids": spec.node,
        "nodes_featureids": np.maximum(spec.feature, 0),
        "nodes_modes": _modes(spec),
        "nodes_truenodeids": np.maximum(spec.left, 0),
        "nodes_falsenodeids": np.maximum(spec.right, 0),
        "nodes_missing_value_tracks_true": spec.missing_left.astype(np.int64),
    }
    if thresholds.dtype == np.float64:
        attrs["nodes_values_as_tensor"] = numpy_helper.from_array(thresholds, name="")
    else:
        attrs.update(_floats("nodes_values", thresholds, as_tensors))
    return attrs


def _leaf_targets(spec: TreeEnsembleSpec) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per leaf entry: its spec row, its output column and its value, leaves in order.

    With ``tree_output`` a leaf writes one value, to its tree's column; else each leaf writes
    its ``K`` values, one per column.
    """
    leaf = np.flatnonzero(spec.is_leaf)
    if spec.tree_output is not None:
        return leaf, spec.tree_output[spec.tree[leaf]], spec.values[leaf, 0]
    k = spec.n_outputs
    rows = np.repeat(leaf, k)
    columns = np.tile(np.arange(k, dtype=np.int64), len(leaf))
    return rows, columns, spec.values[leaf].reshape(-1)


def _float_thresholds(spec: TreeEnsembleSpec) -> np.ndarray:
    """float32 thresholds rounded down (leaves 0), as the float graph compares."""
    return np.where(spec.is_leaf, 0.0, floor_float32(spec.threshold)).astype(np.float32)


def _float_graph(scope: Any, container: Any, x: str, spec: TreeEnsembleSpec, out: str) -> None:
    rows, columns, weights = _leaf_targets(spec)
    as_tensors = _floats_as_tensors(container, spec, len(weights))
    attrs = _ensemble_attributes(spec, _float_thresholds(spec), as_tensors=as_tensors)
    attrs.update(
        target_treeids=spec.tree[rows],
        target_nodeids=spec.node[rows],
        target_ids=columns,
        **_floats("target_weights", weights, as_tensors),
        n_targets=int(spec.n_outputs),
        aggregate_function="SUM",
        post_transform="NONE",
    )
    if np.any(spec.base != 0):
        attrs["base_values"] = [float(v) for v in spec.base]
    summed = out if not spec.average else scope.get_unique_variable_name("tree_sum")
    version = 3 if as_tensors else 1
    _add_ensemble_node(scope, container, "TreeEnsembleRegressor", [x], [summed], version, attrs)
    if spec.average:
        _divide(scope, container, summed, spec.n_trees, TensorProto.FLOAT, out)


def _divide(scope: Any, container: Any, source: str, by: int, onnx_type: int, out: str) -> None:
    count = scope.get_unique_variable_name("n_trees")
    container.add_initializer(count, onnx_type, [], [float(by)])
    container.add_node("Div", [source, count], [out], name=scope.get_unique_operator_name("Div"))


def _double_graph(scope: Any, container: Any, x: str, spec: TreeEnsembleSpec, out: str) -> None:
    name = scope.get_unique_variable_name
    op = scope.get_unique_operator_name
    if spec.native == "float32":
        # The source model rounds its input to float32 before comparing: do the same.
        as_float, back = name("x_float32"), name("x_rounded")
        container.add_node("Cast", [x], [as_float], to=TensorProto.FLOAT, name=op("Cast"))
        container.add_node("Cast", [as_float], [back], to=TensorProto.DOUBLE, name=op("Cast"))
        x = back
    ml_target = container.target_opset_any_domain(ML_DOMAIN)
    if ml_target < 3:
        raise ConversionError(
            f"double precision for trees needs ai.onnx.ml 3 (float64 thresholds), but the "
            f"target is {ml_target}; leave out ml_opset= or pass ml_opset=3, or use "
            "precision='float'",
            arguments=("ml_opset", "precision"),
        )
    # Leaves in tree order; the leaf table below follows it.
    leaf_rows = np.flatnonzero(spec.is_leaf)
    leaf_rows = leaf_rows[np.argsort(spec.tree[leaf_rows], kind="stable")]
    n_leaves = len(leaf_rows)
    leaf_tree = spec.tree[leaf_rows]
    first = np.searchsorted(leaf_tree, np.arange(spec.n_trees))  # each tree's first leaf
    local = np.arange(n_leaves) - first[leaf_tree]
    if n_leaves and local.max() >= 2**24:
        raise ConversionError(
            f"a tree has {int(local.max()) + 1} leaves; double precision supports fewer than "
            "2**24 a tree (use precision='float')",
            arguments=("precision",),
        )
    thresholds = np.where(spec.is_leaf, 0.0, spec.threshold).astype(np.float64)
    attrs = _ensemble_attributes(spec, thresholds)
    # Each tree writes the index of its leaf among its own (exact in float32 below 2**24) to
    # its own target column; adding the tree's first leaf makes it an index into the table.
    attrs.update(
        target_treeids=leaf_tree,
        target_nodeids=spec.node[leaf_rows],
        target_ids=leaf_tree,
        **_local_indexes(local, _floats_as_tensors(container, spec, n_leaves)),
        n_targets=int(spec.n_trees),
        aggregate_function="SUM",
        post_transform="NONE",
    )
    leaf_index_f, local_index = name("leaf_index_f"), name("local_leaf_index")
    leaf_index, starts = name("leaf_index"), name("tree_first_leaf")
    _add_ensemble_node(scope, container, "TreeEnsembleRegressor", [x], [leaf_index_f], 3, attrs)
    container.add_node("Cast", [leaf_index_f], [local_index], to=TensorProto.INT64, name=op("Cast"))
    container.add_initializer(starts, TensorProto.INT64, [spec.n_trees], first.tolist())
    container.add_node("Add", [local_index, starts], [leaf_index], name=op("Add"))
    k = spec.n_outputs
    summed = name("tree_sum")
    if spec.tree_output is not None:
        # One value per leaf; a [T, K] 0/1 matrix adds each tree to its column (adding zeros is
        # exact, so this is the plain sum).
        table, gathered, onehot = name("leaf_values"), name("leaf_value"), name("tree_to_output")
        container.add_initializer(
            table, TensorProto.DOUBLE, [n_leaves], _tensor(spec.values[leaf_rows, 0])
        )
        matrix = np.zeros((spec.n_trees, k))
        matrix[np.arange(spec.n_trees), spec.tree_output] = 1.0
        container.add_initializer(
            onehot, TensorProto.DOUBLE, list(matrix.shape), matrix.ravel().tolist()
        )
        container.add_node("Gather", [table, leaf_index], [gathered], axis=0, name=op("Gather"))
        container.add_node("MatMul", [gathered, onehot], [summed], name=op("MatMul"))
    else:
        table, gathered, axes = name("leaf_values"), name("leaf_value"), name("tree_axis")
        values = spec.values[leaf_rows]
        container.add_initializer(table, TensorProto.DOUBLE, list(values.shape), _tensor(values))
        container.add_initializer(axes, TensorProto.INT64, [1], [1])
        container.add_node("Gather", [table, leaf_index], [gathered], axis=0, name=op("Gather"))
        container.add_node(
            "ReduceSum", [gathered, axes], [summed], keepdims=0, name=op("ReduceSum")
        )
    current = summed
    if spec.average:
        averaged = name("tree_mean")
        _divide(scope, container, current, spec.n_trees, TensorProto.DOUBLE, averaged)
        current = averaged
    if np.any(spec.base != 0):
        base = name("base")
        container.add_initializer(base, TensorProto.DOUBLE, [1, k], spec.base.tolist())
        container.add_node("Add", [current, base], [out], name=op("Add"))
    else:
        container.add_node("Identity", [current], [out], name=op("Identity"))


def add_float_forest_classifier(
    scope: Any,
    container: Any,
    x: str,
    spec: TreeEnsembleSpec,
    classes: np.ndarray,
    label: str,
    probabilities: str,
    text_inputs: dict[int, str] | None = None,
) -> None:
    """One ``TreeEnsembleClassifier`` on float32 input whose leaves hold class probabilities.

    The single-operator form (what ONNX Runtime is fastest at) for ensembles whose raw scores are
    the probabilities (trees and forests). Every leaf lists every class, so ONNX Runtime never
    takes its one-class binary shortcut. A forest's leaves keep their own probabilities and the
    sum is divided by the number of trees afterwards (``Div``), as scikit-learn does: with pure
    leaves (0 or 1) the float32 sums are exact integers, so a tie stays a tie — also when the
    trees are summed in blocks (:mod:`onnxbridge.runtime._rewrites.tree_blocks`) — instead of
    depending on how ``n * (1 / n_trees)`` rounds. Categorical splits and ``text_inputs`` as in
    :func:`add_raw_scores`.
    """
    x, spec = _add_categorical_columns(scope, container, x, spec, text_inputs, TensorProto.FLOAT)
    rows, columns, weights = _leaf_targets(replace(spec, tree_output=None))
    as_tensors = _floats_as_tensors(container, spec, len(weights))
    attrs = _ensemble_attributes(spec, _float_thresholds(spec), as_tensors=as_tensors)
    attrs.update(
        class_treeids=spec.tree[rows],
        class_nodeids=spec.node[rows],
        class_ids=columns,
        **_floats("class_weights", weights, as_tensors),
        post_transform="NONE",
    )
    if np.asarray(classes).dtype.kind in "OUS":
        attrs["classlabels_strings"] = [str(c) for c in classes]
    else:
        attrs["classlabels_int64s"] = [int(c) for c in classes]
    summed = probabilities if not spec.average else scope.get_unique_variable_name("tree_votes")
    version = 3 if as_tensors else 1
    _add_ensemble_node(
        scope, container, "TreeEnsembleClassifier", [x], [label, summed], version, attrs
    )
    if spec.average:
        _divide(scope, container, summed, spec.n_trees, TensorProto.FLOAT, probabilities)


def add_raw_scores(
    scope: Any,
    container: Any,
    x: str,
    spec: TreeEnsembleSpec,
    *,
    double: bool,
    text_inputs: dict[int, str] | None = None,
) -> str:
    """Add the nodes computing ``raw [N, K]`` from input ``x`` and return the output's name.

    ``double`` picks the float64 graph (``x`` must then be float64), else the float32 one.
    ``text_inputs``: feature -> ``[N, 1]`` string tensor holding a category column's raw values
    (its column in ``x`` is then unused); other categorical features are read from ``x``.
    """
    x, spec = _add_categorical_columns(
        scope,
        container,
        x,
        spec,
        text_inputs,
        TensorProto.DOUBLE if double else TensorProto.FLOAT,
    )
    out = scope.get_unique_variable_name("raw_scores")
    if double:
        _double_graph(scope, container, x, spec, out)
    else:
        _float_graph(scope, container, x, spec, out)
    return out
