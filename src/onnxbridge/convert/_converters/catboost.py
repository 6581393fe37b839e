"""CatBoostClassifier and CatBoostRegressor (registered when catboost is installed).

skl2onnx and onnxmltools have no converter for CatBoost; CatBoost exports ONNX itself
(``save_model(format="onnx")``). That export is the source of truth here: its one
``TreeEnsembleClassifier`` / ``TreeEnsembleRegressor`` node is read into a
:class:`~onnxbridge.convert._tree_ensemble.TreeEnsembleSpec` and rebuilt, so a CatBoost model gets
onnxbridge's input naming, output roles, metadata and precisions, also at the end of a numeric
Pipeline. ``[N, F] -> label [N], probabilities [N, C]`` / ``value [N, 1]``. CatBoost compares
``float32(x) > border`` and sends NaN below every border (its default ``nan_mode="Min"``).

Categorical features (``cat_features``): CatBoost's export takes only numeric features, and a
fitted model keeps its categories only as 32-bit hashes of their text (one-hot splits compare
them, CTR tables are keyed by them). :func:`catboost_categorical_spec` reads such a model from
its JSON form exactly when it is given every category's value: the converter takes them from the
rows of the conversion (:mod:`onnxbridge.convert._given_rows`: the sample, plus the training
categories a bundle records) and refuses, naming the column, when a category the model knows is
not among them. A value is given to CatBoost as :func:`onnxbridge.train.catboost_text` writes it
(a missing value as ``""``), so a missing value goes where CatBoost sends ``""``, and a category
it never saw where its CTR prior (or no one-hot match) sends it. Text and embedding features are
refused.
"""

from __future__ import annotations

import ast
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pandas as pd
from catboost import CatBoostClassifier, CatBoostRegressor
from onnx import helper
from skl2onnx._supported_operators import sklearn_classifier_list

from onnxbridge.convert._converters._tree_heads import (
    CLASSIFIER_OPTIONS,
    classifier_shape,
    example_target,
    regressor_shape,
    write_classifier,
    write_regressor,
)
from onnxbridge.convert._given_rows import find_conversion_rows
from onnxbridge.convert._registry import ConverterSpec, register_converter
from onnxbridge.convert._tree_ensemble import TreeEnsembleSpec
from onnxbridge.errors import ConversionError
from onnxbridge.train import catboost_text


def _exported_node(model: Any) -> onnx.NodeProto:
    """CatBoost's own ONNX export of ``model``: its tree-ensemble node."""
    special = []
    for kind in ("cat", "text", "embedding"):
        getter = getattr(model, f"get_{kind}_feature_indices", None)
        if getter is not None and list(getter()):
            special.append(f"{kind} features {list(getter())}")
    if special:
        # Categorical features: the fitted model holds 32-bit hashes of its categories, never
        # their text, so its own export cannot take them (the converters read such a model with
        # catboost_categorical_spec instead). Text and embedding features go through
        # CatBoost's own tokenizers and estimators.
        why = (
            "the model keeps only hashes of its categories, not their values"
            if special[0].startswith("cat")
            else "CatBoost's text and embedding features have no ONNX form"
        )
        raise ConversionError(
            f"{type(model).__name__} with {' and '.join(special)} cannot be converted: {why}; "
            "encode those columns in a Pipeline before the model (e.g. OrdinalEncoder) and fit "
            "without them as cat_features / text_features"
        )
    with tempfile.TemporaryDirectory(prefix="onnxbridge-catboost-") as folder:
        path = Path(folder) / "model.onnx"
        try:
            model.save_model(str(path), format="onnx")
        except Exception as exc:  # CatBoostError: categorical / text features, ...
            raise ConversionError(
                f"CatBoost could not export {type(model).__name__} to ONNX: "
                f"{str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__}; "
                "CatBoost exports only models on numeric features (encode categorical and text "
                "columns before the model)"
            ) from exc
        exported = onnx.load(str(path))
    for node in exported.graph.node:
        if node.op_type in ("TreeEnsembleClassifier", "TreeEnsembleRegressor"):
            return node
    raise ConversionError(
        "CatBoost's ONNX export has no tree-ensemble node; onnxbridge cannot rebuild it"
    )


def _attributes(node: onnx.NodeProto) -> dict[str, Any]:
    values = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    return {k: v.decode() if isinstance(v, bytes) else v for k, v in values.items()}


def catboost_spec(model: Any) -> tuple[TreeEnsembleSpec, str, list[Any]]:
    """Read CatBoost's exported ensemble.

    Returns:
        The spec (``x <= t`` goes left: CatBoost's ``x > t`` branches swapped), the export's
        ``post_transform`` (``NONE``, ``LOGISTIC``, ``SOFTMAX``) and its class labels.
    """
    attrs = _attributes(_exported_node(model))
    modes = [m.decode() if isinstance(m, bytes) else m for m in attrs["nodes_modes"]]
    unknown = sorted(set(modes) - {"BRANCH_GT", "LEAF"})
    if unknown:
        raise ConversionError(
            f"CatBoost's ONNX export uses node modes {unknown}; onnxbridge rebuilds only "
            "BRANCH_GT trees (numeric features)"
        )
    prefix = "class" if "class_ids" in attrs else "target"
    k = (
        len(attrs.get("classlabels_int64s") or attrs.get("classlabels_strings") or [])
        if prefix == "class"
        else int(attrs.get("n_targets", 1))
    )
    leaves: dict[tuple[int, int], np.ndarray] = {}
    for tree, node, column, weight in zip(
        attrs[f"{prefix}_treeids"],
        attrs[f"{prefix}_nodeids"],
        attrs[f"{prefix}_ids"],
        attrs[f"{prefix}_weights"],
        strict=True,
    ):
        row = leaves.setdefault((int(tree), int(node)), np.zeros(k))
        row[int(column)] += float(weight)
    is_leaf = np.array([m == "LEAF" for m in modes])
    tracks_true = np.asarray(attrs["nodes_missing_value_tracks_true"], dtype=bool)
    true_ids = np.asarray(attrs["nodes_truenodeids"], dtype=np.int64)
    false_ids = np.asarray(attrs["nodes_falsenodeids"], dtype=np.int64)
    trees = np.asarray(attrs["nodes_treeids"], dtype=np.int64)
    nodes = np.asarray(attrs["nodes_nodeids"], dtype=np.int64)
    features = np.where(is_leaf, -1, np.asarray(attrs["nodes_featureids"], dtype=np.int64))
    values = np.vstack(
        [leaves.get((int(t), int(n)), np.zeros(k)) for t, n in zip(trees, nodes, strict=True)]
    )
    base = np.asarray(attrs.get("base_values") or np.zeros(k), dtype=np.float64)
    spec = TreeEnsembleSpec(
        tree=trees,
        node=nodes,
        feature=features,
        threshold=np.where(is_leaf, 0.0, np.asarray(attrs["nodes_values"], dtype=np.float64)),
        # x > t is the true branch: x <= t goes to the false one, which becomes "left".
        left=np.where(is_leaf, -1, false_ids),
        right=np.where(is_leaf, -1, true_ids),
        missing_left=~tracks_true & ~is_leaf,
        values=values,
        base=base,
        rule="leq",
        native="float32",
        n_features=int(model.n_features_in_),
    )
    labels = list(attrs.get("classlabels_int64s") or attrs.get("classlabels_strings") or [])
    labels = [v.decode() if isinstance(v, bytes) else v for v in labels]
    return spec, attrs.get("post_transform", "NONE"), labels


# -- categorical features ----------------------------------------------------------------------
#
# CatBoost keeps no category text: a fitted model knows each category by a 32-bit hash of its
# text (one-hot splits compare it, CTR tables are keyed by it). The graph can only compare the
# text it is given, so the texts must come from data: the hashes of given values are computed by
# CatBoost itself (its Python export with a Pool of them), and every hash the model knows must be
# among them, or the conversion would be wrong for the categories left out.

_MAGIC = 0x4906BA494954CB65
_UINT64 = (1 << 64) - 1
_EMPTY_SLOT = _UINT64  # a free slot in a CTR hash table
_MISSING = catboost_text(None)  # "": how a missing value reaches CatBoost (and the graph)


def _projection_key(category_hash: int) -> int:
    """The CTR table key of one category (a projection on a single feature)."""
    return (_MAGIC * ((_MAGIC * category_hash) & _UINT64)) & _UINT64


def _model_json(model: Any) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="onnxbridge-catboost-") as folder:
        path = Path(folder) / "model.json"
        model.save_model(str(path), format="json")
        return json.loads(path.read_text(encoding="utf-8"))


def _category_hashes(model: Any, known: dict[int, list[str]]) -> dict[int, dict[str, int]]:
    """Column -> text -> CatBoost's hash of it, computed by CatBoost (its Python export of
    the model with a Pool of the texts lists each one's hash)."""
    from catboost import Pool

    names = list(model.feature_names_)
    width = max((len(v) for v in known.values()), default=0)
    if width == 0:
        return {j: {} for j in known}
    columns: dict[str, list[Any]] = {}
    for j, name in enumerate(names):
        values = known.get(j)
        if values is None:
            columns[name] = [0.0] * width
        else:
            columns[name] = [values[i % len(values)] for i in range(width)]
    pool = Pool(pd.DataFrame(columns), cat_features=sorted(known))
    with tempfile.TemporaryDirectory(prefix="onnxbridge-catboost-") as folder:
        path = Path(folder) / "model.py"
        model.save_model(str(path), format="python", pool=pool)
        tree = ast.parse(path.read_text(encoding="utf-8"))
    table: dict[str, int] | None = None
    for statement in tree.body:
        if isinstance(statement, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "cat_features_hashes" for t in statement.targets
        ):
            table = ast.literal_eval(statement.value)
    if table is None:
        raise ConversionError(
            "CatBoost's Python export lists no category hashes; onnxbridge cannot read the "
            "model's categories with this CatBoost version"
        )
    return {j: {v: _listed_hash(table, v) for v in values} for j, values in known.items()}


def _listed_hash(table: dict[str, int], text: str) -> int:
    """The hash the Python export lists for ``text``.

    CatBoost writes each key's UTF-8 bytes as ``\\xNN`` escapes in a ``str`` literal, so a
    non-ASCII key reads back as its bytes taken for Latin-1 characters; a release that writes
    the text itself is read too.
    """
    for key in (text, text.encode("utf-8").decode("latin-1")):
        if key in table:
            return int(table[key])
    raise ConversionError(
        f"CatBoost's Python export lists no hash for the category {text!r}; onnxbridge cannot "
        "read this model's categories with this CatBoost version"
    )


@dataclass
class _Ctr:
    """One CTR of a single categorical feature: its borders and how its value is computed."""

    feature: int  # the input column
    kind: str
    target_border: int
    prior_num: float
    prior_denom: float
    shift: float
    scale: float
    borders: list[float]
    table: dict[int, list[float]]  # key -> counts (or sum, count)
    denominator: float

    def value(self, key: int | None) -> np.float32:
        """The CTR of a key (None or not in the table: the prior's value), in float32 as
        CatBoost computes it."""
        counts = None if key is None else self.table.get(key)
        if counts is None:
            good, total = 0.0, 0.0
        elif self.kind in ("Counter", "FeatureFreq"):
            good, total = counts[0], self.denominator
        elif self.kind == "Buckets":
            good, total = counts[self.target_border], sum(counts)
        else:  # Borders: the classes above the target border are "good"
            good, total = sum(counts[self.target_border + 1 :]), sum(counts)
        f = np.float32
        ctr = (f(good) + f(self.prior_num)) / (f(total) + f(self.prior_denom))
        return f((ctr + f(self.shift)) * f(self.scale))


def _read_ctrs(document: dict[str, Any], cat_columns: list[int]) -> list[_Ctr]:
    info = document["features_info"]
    data = document.get("ctr_data") or {}
    found: list[_Ctr] = []
    for ctr in info.get("ctrs") or []:
        elements = ctr["elements"]
        if len(elements) != 1 or elements[0].get("combination_element") != "cat_feature_value":
            raise ConversionError(
                "the CatBoost model splits on combinations of categorical features (CTRs of "
                "feature pairs), which onnxbridge cannot convert; refit with "
                "max_ctr_complexity=1"
            )
        if ctr["ctr_type"] not in ("Borders", "Buckets", "Counter", "FeatureFreq"):
            raise ConversionError(
                f"the CatBoost model uses {ctr['ctr_type']} CTRs, which onnxbridge cannot "
                "convert; refit with simple_ctr=['Borders', 'Counter'] (the defaults)"
            )
        stored = data[ctr["identifier"]]
        stride = int(stored["hash_stride"])
        flat = stored["hash_map"]
        table = {
            int(flat[i]): [float(v) for v in flat[i + 1 : i + stride]]
            for i in range(0, len(flat), stride)
            if int(flat[i]) != _EMPTY_SLOT
        }
        found.append(
            _Ctr(
                feature=cat_columns[int(elements[0]["cat_feature_index"])],
                kind=ctr["ctr_type"],
                target_border=int(ctr.get("target_border_idx", 0)),
                prior_num=float(ctr["prior_numerator"]),
                prior_denom=float(ctr["prior_denomerator"]),
                shift=float(ctr["shift"]),
                scale=float(ctr["scale"]),
                borders=[float(b) for b in ctr["borders"]],
                table=table,
                denominator=float(stored.get("counter_denominator", 0)),
            )
        )
    return found


def _check_covered(name: str, needed: set[int], given: set[int], n_values: int, what: str) -> None:
    missing = needed - given
    if missing:
        raise ConversionError(
            f"the sample rows hold {n_values} value(s) of column {name!r} but miss "
            f"{len(missing)} of the categories the CatBoost model {what}; CatBoost keeps only "
            f"hashes of its categories, so give sample= the rows that hold every category of "
            f"column {name!r} (the training rows)",
            arguments=("sample",),
        )


def catboost_categorical_spec(
    model: Any, known: dict[int, list[Any]]
) -> tuple[TreeEnsembleSpec, str]:
    """Read a CatBoost model with categorical features from its JSON model and given values.

    Every split becomes one of the spec's: a float feature's ``x > border`` (NaN goes where
    ``nan_mode`` sends it), a one-hot feature's ``value == category``, and a CTR's
    ``ctr(category) > border``, where the CTR of each given category is computed from the
    model's tables as CatBoost does (float32); a category the model never saw gets the
    prior's CTR and is never equal to a one-hot category. A missing value (NaN, or ``""`` in a
    text input) goes where CatBoost sends the text ``""``, which is how onnxbridge gives it a
    missing value (:func:`onnxbridge.train.catboost_text`; CatBoost refuses NaN there): where
    a known category ``""`` goes, else where an unseen one goes. The oblivious trees are
    written out as ordinary binary trees.

    Args:
        model: the fitted model.
        known: input column -> the values of that categorical column in the sample rows
            (each is given to CatBoost as :func:`onnxbridge.train.catboost_text` writes it).

    Returns:
        The spec (raw formula value, ``[N, K]``) and the loss function's name.

    Raises:
        ConversionError: a category the model knows is not among ``known``; CTRs of feature
            combinations; CTR types other than counts.
    """
    document = _model_json(model)
    info = document["features_info"]
    names = list(model.feature_names_)
    cat_info = info.get("categorical_features") or []
    cat_columns = [int(c["flat_feature_index"]) for c in cat_info]
    float_info = info.get("float_features") or []
    # Each column's values by the text CatBoost is given (one value per text); "" is the text
    # of a missing value, hashed too: the model may know it as a category (onnxbridge train
    # fits on it) and sends it somewhere either way.
    values_of: dict[int, list[Any]] = {}
    texts_of: dict[int, list[str]] = {}
    for j in cat_columns:
        by_text: dict[str, Any] = {}
        for value in known.get(j, []):
            by_text.setdefault(catboost_text(value), value)
        by_text.pop(_MISSING, None)
        values_of[j] = list(by_text.values())
        texts_of[j] = list(by_text)
    hashes = _category_hashes(model, {j: [*texts_of[j], _MISSING] for j in cat_columns})
    ctrs = _read_ctrs(document, cat_columns)
    for ctr in ctrs:
        given = {_projection_key(h) for h in hashes[ctr.feature].values()}
        _check_covered(
            names[ctr.feature], set(ctr.table), given, len(texts_of[ctr.feature]), "counts"
        )
    for entry, column in zip(cat_info, cat_columns, strict=True):
        given = {h & 0xFFFFFFFF for h in hashes[column].values()}
        needed = {int(v) & 0xFFFFFFFF for v in entry.get("values") or []}
        _check_covered(names[column], needed, given, len(texts_of[column]), "splits on")
    # The binary features in CatBoost's order: float borders, one-hot values, CTR borders.
    ctr_of_split: list[tuple[_Ctr, float]] = [(c, b) for c in ctrs for b in c.borders]
    first_ctr = sum(len(f["borders"]) for f in float_info) + sum(
        len(c.get("values") or []) for c in cat_info
    )
    categories = {j: np.array(values_of[j], dtype=object) for j in cat_columns}

    def decision(split: dict[str, Any]) -> tuple[int, float, bool, np.ndarray | None, bool]:
        """(column, threshold, missing goes left, codes that go left, unknown goes left);
        left is CatBoost's 0 bit (``x <= border``, not equal, ``ctr <= border``)."""
        kind = split["split_type"]
        if kind == "FloatFeature":
            feature = float_info[int(split["float_feature_index"])]
            nan_left = feature.get("nan_value_treatment", "AsIs") != "AsTrue"
            return int(feature["flat_feature_index"]), float(split["border"]), nan_left, None, False
        if kind == "OneHotFeature":
            column = cat_columns[int(split["cat_feature_index"])]
            target = int(split["value"]) & 0xFFFFFFFF

            def equal(text: str) -> bool:
                return hashes[column][text] & 0xFFFFFFFF == target

            hits = np.array([equal(t) for t in texts_of[column]], dtype=bool)
            return column, 0.0, not equal(_MISSING), np.flatnonzero(~hits), True
        if kind == "OnlineCtr":
            ctr, border = ctr_of_split[int(split["split_index"]) - first_ctr]
            if not np.isclose(border, float(split["border"]), rtol=0, atol=1e-6):
                raise ConversionError(
                    "CatBoost's JSON model lists its CTR borders in an order onnxbridge does "
                    "not know; the model cannot be converted"
                )
            edge = np.float32(split["border"])
            column = ctr.feature

            def above(text: str) -> bool:
                return bool(ctr.value(_projection_key(hashes[column][text])) > edge)

            goes_right = np.array([above(t) for t in texts_of[column]], dtype=bool)
            unknown_left = not bool(ctr.value(None) > edge)
            return column, 0.0, not above(_MISSING), np.flatnonzero(~goes_right), unknown_left
        raise ConversionError(
            f"CatBoost split type {kind!r} cannot be converted; onnxbridge converts float, "
            "one-hot and CTR splits"
        )

    scale, bias = document.get("scale_and_bias", [1.0, [0.0]])
    bias = np.atleast_1d(np.asarray(bias, dtype=np.float64))
    k = len(bias)
    rows: list[tuple[int, int, int, float, int, int, bool]] = []
    leaf_values: list[np.ndarray] = []
    left_codes: dict[int, np.ndarray] = {}
    unknown_left: dict[int, bool] = {}
    for index, tree in enumerate(document["oblivious_trees"]):
        splits = tree.get("splits") or []
        depth = len(splits)
        leaves = np.asarray(tree["leaf_values"], dtype=np.float64).reshape(2**depth, k)
        decisions = [decision(s) for s in splits]
        # Level t tests splits[depth - 1 - t]; its bit is bit (depth - 1 - t) of the leaf index.
        for level in range(depth):
            column, threshold, nan_left, codes, unseen_left = decisions[depth - 1 - level]
            for prefix in range(2**level):
                node = 2**level - 1 + prefix
                child = 2 ** (level + 1) - 1 + 2 * prefix
                if codes is not None:
                    left_codes[len(rows)] = codes.astype(np.int64)
                    unknown_left[len(rows)] = unseen_left
                rows.append((index, node, column, threshold, child, child + 1, nan_left))
                leaf_values.append(np.zeros(k))
        for prefix in range(2**depth):
            # The path's decisions, root first, are the leaf index's bits from the highest.
            rows.append((index, 2**depth - 1 + prefix, -1, 0.0, -1, -1, False))
            leaf_values.append(leaves[prefix] * float(scale))
    table = np.array([(r[0], r[1], r[2], r[4], r[5]) for r in rows], dtype=np.int64)
    missing_left = np.array([r[6] for r in rows], dtype=bool)
    unknown = missing_left.copy()
    for row, goes_left in unknown_left.items():
        unknown[row] = goes_left
    spec = TreeEnsembleSpec(
        tree=table[:, 0],
        node=table[:, 1],
        feature=table[:, 2],
        threshold=np.array([r[3] for r in rows], dtype=np.float64),
        left=table[:, 3],
        right=table[:, 4],
        missing_left=missing_left,
        values=np.vstack(leaf_values),
        base=bias,
        rule="leq",
        native="float32",
        n_features=len(names),
        categories=categories,
        left_codes=left_codes,
        unknown_left=unknown,
    )
    params = document["model_info"].get("params") or {}
    if isinstance(params, str):
        params = json.loads(params)
    loss = str((params.get("loss_function") or {}).get("type", ""))
    return spec, loss


def _classifier_parser(scope: Any, model: Any, inputs: Any, custom_parsers: Any = None) -> Any:
    """Declare label and probabilities (skl2onnx's default parser gives a non-``ClassifierMixin``
    model, which CatBoost is, a single output), then ZipMap when it is asked for."""
    from skl2onnx._parse import _apply_zipmap
    from skl2onnx._supported_operators import _get_sklearn_operator_name
    from skl2onnx.common.data_types import FloatTensorType, Int64TensorType

    operator = scope.declare_local_operator(_get_sklearn_operator_name(type(model)), model)
    operator.inputs = list(inputs)
    operator.outputs.append(scope.declare_local_variable("label", Int64TensorType()))
    operator.outputs.append(scope.declare_local_variable("probabilities", FloatTensorType()))
    options = scope.get_options(model, {"zipmap": True})
    if options["zipmap"] is False:
        return operator.outputs
    return _apply_zipmap(options["zipmap"], scope, model, inputs[0].type, operator.outputs)


def _check_label_type(model: Any) -> None:
    """Refuse boolean and float labels before CatBoost's export fails on them obscurely."""
    classes = np.asarray(model.classes_)
    if classes.dtype.kind in "bf":
        kind = "boolean" if classes.dtype.kind == "b" else "float"
        raise ConversionError(
            f"CatBoostClassifier fitted on {kind} labels {classes.tolist()[:10]} cannot be "
            "converted: CatBoost's ONNX export carries integer and string labels only; fit it "
            "on integers or strings, or wrap it as onnxbridge.train.LabelEncodedClassifier("
            "CatBoostClassifier(...)) before fitting (onnxbridge train does that itself)"
        )


def _refuse_text_features(model: Any) -> None:
    """Text and embedding features go through CatBoost's own tokenizers and estimators."""
    for kind in ("text", "embedding"):
        getter = getattr(model, f"get_{kind}_feature_indices", None)
        if getter is not None and list(getter()):
            raise ConversionError(
                f"{type(model).__name__} with {kind} features {list(getter())} cannot be "
                "converted: CatBoost's text and embedding features have no ONNX form; encode "
                "those columns in a Pipeline before the model (e.g. TfidfVectorizer) and fit "
                "without them as text_features / embedding_features"
            )


def _category_columns(model: Any) -> list[int]:
    getter = getattr(model, "get_cat_feature_indices", None)
    return [int(j) for j in getter()] if getter is not None else []


def _known_values(model: Any) -> dict[int, list[Any]]:
    """Categorical feature -> its values in the rows of this conversion (by column name, or by
    position when the model was fitted on an array)."""
    name = type(model).__name__
    rows = find_conversion_rows()
    if rows is None:
        raise ConversionError(
            f"{name} with cat features {_category_columns(model)} needs the values of its "
            "categories (it keeps only hashes of them): convert it with "
            "onnxbridge.convert_estimator(model, training_rows) or `onnxbridge convert MODEL "
            "--sample TRAINING.csv`"
        )
    features = [str(n) for n in model.feature_names_]
    columns = rows.columns
    if set(features) <= set(columns):
        column_of = {j: features[j] for j in range(len(features))}
    elif len(features) == len(columns):
        column_of = dict(enumerate(columns))
    else:
        raise ConversionError(
            f"{name} with cat features takes the columns {features[:10]}, but the model's input "
            f"has {columns[:10]}; convert a CatBoost model with categorical features on its own "
            "(not after other pipeline steps), given rows of its training columns"
        )
    return {j: rows.values(column_of[j]) for j in _category_columns(model)}


# CatBoost losses whose prediction is the raw formula value (regressors) and the head that turns
# a classifier's raw scores into its predict_proba.
_IDENTITY_LOSSES = ("RMSE", "MAE", "Quantile", "MAPE", "Huber", "Expectile", "Lq")
_CLASSIFIER_LOSSES = {
    "Logloss": "logistic",
    "CrossEntropy": "logistic",
    "MultiClass": "softmax",
    "MultiClassOneVsAll": "ova",
}


def _categorical_spec(model: Any) -> tuple[TreeEnsembleSpec, str] | None:
    """The spec and loss of a model with categorical features, or None when it has none."""
    _refuse_text_features(model)
    if not _category_columns(model):
        return None
    return catboost_categorical_spec(model, _known_values(model))


def _classifier_convert(scope: Any, operator: Any, container: Any) -> None:
    model = operator.raw_operator
    _check_label_type(model)
    categorical = _categorical_spec(model)
    if categorical is not None:
        spec, loss = categorical
        if loss not in _CLASSIFIER_LOSSES:
            raise ConversionError(
                f"CatBoostClassifier(loss_function={loss!r}) with cat features cannot be "
                f"converted; use one of {', '.join(_CLASSIFIER_LOSSES)}"
            )
        transform = _CLASSIFIER_LOSSES[loss]
        write_classifier(scope, operator, container, spec, transform=transform)
        return
    spec, post, labels = catboost_spec(model)
    classes = [str(c) for c in np.asarray(model.classes_)]
    if [str(c) for c in labels] != classes:
        raise ConversionError(
            f"CatBoost's ONNX export orders the classes {labels}, the model {classes}; "
            "onnxbridge cannot map them"
        )
    transforms = {"LOGISTIC": "ova", "SOFTMAX": "softmax", "NONE": "none"}
    if post not in transforms:
        raise ConversionError(
            f"CatBoost's ONNX export uses post_transform {post!r}; onnxbridge handles "
            f"{', '.join(transforms)}"
        )
    write_classifier(scope, operator, container, spec, transform=transforms[post])


def _regressor_convert(scope: Any, operator: Any, container: Any) -> None:
    categorical = _categorical_spec(operator.raw_operator)
    if categorical is not None:
        spec, loss = categorical
        if loss not in _IDENTITY_LOSSES:
            raise ConversionError(
                f"CatBoostRegressor(loss_function={loss!r}) with cat features cannot be "
                f"converted; use one of {', '.join(_IDENTITY_LOSSES)}"
            )
        write_regressor(scope, operator, container, spec)
        return
    spec, post, _ = catboost_spec(operator.raw_operator)
    if post != "NONE":
        raise ConversionError(
            f"CatBoost's ONNX export uses post_transform {post!r} for a regressor; onnxbridge "
            "handles NONE (loss functions with an identity output)"
        )
    write_regressor(scope, operator, container, spec)


def _data(classes: int | None) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.RandomState(0)
    X = rng.normal(size=(300, 5)).astype(np.float32).astype(np.float64)
    X[rng.rand(*X.shape) < 0.1] = np.nan
    score = np.nan_to_num(X[:, 0], nan=-2.0) + 0.5 * np.nan_to_num(X[:, 1])
    return X, example_target(score, classes, rng)


_PARAMS = {
    "iterations": 15,
    "depth": 4,
    "random_seed": 0,
    "verbose": 0,
    "thread_count": 1,
    "allow_writing_files": False,  # no catboost_info/ folder in the working directory
}


def _classifier_example() -> tuple[Any, Any]:
    X, y = _data(3)
    return CatBoostClassifier(**_PARAMS).fit(X, y), X


def _regressor_example() -> tuple[Any, Any]:
    X, y = _data(None)
    return CatBoostRegressor(**_PARAMS).fit(X, y), X


# CatBoostClassifier is no ClassifierMixin: skl2onnx's generic parser (used for models inside
# meta-estimators, e.g. LabelEncodedClassifier) gives it its label and probabilities only when
# it is on this list.
if CatBoostClassifier not in sklearn_classifier_list:
    sklearn_classifier_list.append(CatBoostClassifier)
register_converter(
    ConverterSpec(
        CatBoostClassifier,
        classifier_shape,
        _classifier_convert,
        _classifier_example,
        parser=_classifier_parser,
        options=CLASSIFIER_OPTIONS,
        family=__name__,
    )
)
register_converter(
    ConverterSpec(
        CatBoostRegressor, regressor_shape, _regressor_convert, _regressor_example, family=__name__
    )
)
