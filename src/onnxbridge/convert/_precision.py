"""``precision="auto"``: convert in float32 unless that flips a tree's decisions, then in float64.

k-neighbours models (KNeighborsClassifier, KNeighborsRegressor, NearestNeighbors) always convert
in float64: their answer is which training rows are nearest, and float32 input merges or reorders
distances that scikit-learn, computing in float64, keeps apart.

A tree compares a feature with a threshold; ONNX Runtime's float path rounds the input to float32
first, so a value within one float32 step of a threshold may take the other branch than in the
source model (LightGBM and HistGradientBoosting compare in float64; around 1e6 a float32 step is
0.0625). :func:`convert_auto` converts in float32, builds *probe rows* — for every split threshold
a row that reaches that node with the feature set to the threshold and to one float32 step either
side, plus the sample rows — runs them through ONNX Runtime and the source model, and converts
again in float64 when any row's decision differs (a label, or a probability / value beyond
float32 rounding), saying so in :attr:`ConversionResult.notes`.

The trees are read (:func:`find_tree_ensemble`) from scikit-learn's ``tree_`` (trees, forests,
extra-trees, gradient boosting), HistGradientBoosting's ``_predictors``, XGBoost's JSON model,
LightGBM's text model (``model_to_string()``) and CatBoost's ONNX export (see
:mod:`onnxbridge.convert._tree_ensemble`). When the trees sit at the end of a Pipeline, each
threshold is carried back to the input column feeding the split column
(:mod:`onnxbridge.convert._input_map`: ColumnTransformer branches, scalers inverted, imputers the
identity on complete rows, encoded columns as categories) and the probe rows are input rows
(:func:`threshold_probes`, which validate's ``thresholds`` probe set uses too). Thresholds on
columns made by a step that cannot be inverted (PCA, ...) get no rows and are counted; float32
cannot be shown to keep those decisions, so ``auto`` then converts in float64.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from onnxbridge.convert._input_map import ColumnSource, column_sources
from onnxbridge.convert._tree_ensemble import (
    TreeEnsembleSpec,
    category_keys,
    from_hist_gradient_boosting,
    from_lightgbm,
    from_sklearn_trees,
    from_xgboost,
    member_features,
)
from onnxbridge.errors import ConversionError, first_line
from onnxbridge.train import unwrap_label_encoding

__all__ = [
    "PrecisionProbeReport",
    "ThresholdProbes",
    "convert_auto",
    "find_tree_ensemble",
    "fix_double_graph",
    "probe_float_precision",
    "probe_tree_ensemble",
    "threshold_probe_rows",
    "threshold_probes",
]

# Probe rows per conversion at most (three per threshold): a few seconds for the largest forests.
MAX_PROBE_ROWS = 15_000
# A decision "flips" when the float graph's output leaves float32 rounding of the source's.
PROBABILITY_TOLERANCE = 1e-4
VALUE_RTOL = 1e-5


# Said when float32 is kept for a model that compares in float64 (HistGradientBoosting,
# LightGBM): the probes show it on the values float32 holds, not on every float64 value.
FLOAT64_CAVEAT = (
    "the model compares in float64: float32 keeps its decisions on values float32 holds (as the "
    "sample's), but a float64 value between two float32 steps next to a threshold can take the "
    "other branch; precision double is exact on every value"
)


@dataclass
class PrecisionProbeReport:
    """What the float32 graph did on the probe rows.

    Attributes:
        rows: probe rows run.
        threshold_rows: of which built at split thresholds.
        flipped: rows whose decision differs from the source model's.
        skipped: why threshold probes were not run (None when they were).
        coverage: ``N of M thresholds probed`` (see :meth:`ThresholdProbes.summary`).
        not_inverted: thresholds behind steps that cannot be inverted (not probed).
    """

    rows: int
    threshold_rows: int
    flipped: int
    skipped: str | None = None
    coverage: str | None = None
    not_inverted: int = 0

    @property
    def complete(self) -> bool:
        """Whether every threshold could be probed (the probes ran, none sat behind a step
        that cannot be inverted)."""
        return self.skipped is None and self.not_inverted == 0

    def note(self, switched: bool) -> str:
        """One sentence for :attr:`ConversionResult.notes`."""
        what = f"{self.flipped:,} of {self.rows:,} probe rows".replace(",", " ")
        where = (
            f" ({self.threshold_rows:,} at split thresholds)".replace(",", " ")
            if self.threshold_rows
            else ""
        )
        if switched and not self.flipped and not self.complete:
            text = (
                f"switched to double precision: {what}{where} flipped in float32, but without "
                "threshold probes on every split float32 could not be shown to keep the trees' "
                "decisions"
            )
        elif switched:
            text = f"switched to double precision: {what}{where} flipped in float32"
        else:
            text = f"kept float precision: {what}{where} flipped in float32"
        if self.coverage and self.skipped is None:
            text += f"; {self.coverage}"
        if self.skipped:
            text += f"; threshold probes skipped: {self.skipped}"
        return text


def _final_step(estimator: Any) -> Any:
    while hasattr(estimator, "steps"):
        estimator = estimator.steps[-1][1]
    return estimator


def _compares_distances(estimator: Any) -> bool:
    """Whether the model's answer is the ranking of training rows by distance (k neighbours)."""
    from sklearn.neighbors import KNeighborsClassifier, KNeighborsRegressor, NearestNeighbors

    return isinstance(
        _final_step(estimator), KNeighborsClassifier | KNeighborsRegressor | NearestNeighbors
    )


def find_tree_ensemble(estimator: Any) -> TreeEnsembleSpec | None:
    """The tree ensemble at the end of ``estimator`` (a model or Pipeline), or None.

    None also when the model's trees cannot be read (unusual settings): its converter reports
    that itself.
    """
    model = unwrap_label_encoding(_final_step(estimator))
    module = type(model).__module__
    try:
        if module.startswith("sklearn.ensemble._hist_gradient_boosting"):
            return from_hist_gradient_boosting(model)
        if module.startswith(("sklearn.tree", "sklearn.ensemble._forest", "sklearn.ensemble._gb")):
            from onnxbridge.convert._converters.sklearn_trees import _handled, forest_spec

            return forest_spec(model) if _handled(model) else None
        if module.startswith("sklearn.ensemble._iforest"):
            from onnxbridge.convert._converters.sklearn_trees import isolation_spec

            return isolation_spec(model)
        if module.startswith("xgboost"):
            return from_xgboost(model)[0]
        if module.startswith("lightgbm"):
            return from_lightgbm(model)[0]
        if module.startswith("catboost"):
            from onnxbridge.convert._converters.catboost import catboost_spec

            return catboost_spec(model)[0]
    except (ConversionError, AttributeError, KeyError, ValueError):
        return None
    return None


def probe_tree_ensemble(estimator: Any) -> TreeEnsembleSpec | None:
    """The splits of the trees at the end of ``estimator``, for building probe rows.

    :func:`find_tree_ensemble`, and for the other scikit-learn ensembles of trees that
    skl2onnx converts (bagging, AdaBoost, IsolationForest, RandomTreesEmbedding, forests
    onnxbridge leaves to skl2onnx) a spec of their splits only (leaf values unused), with each
    tree's features mapped to the model's through ``estimators_features_``.
    """
    spec = find_tree_ensemble(estimator)
    if spec is not None:
        return spec
    model = unwrap_label_encoding(_final_step(estimator))
    members = getattr(model, "estimators_", None)
    if members is None or not type(model).__module__.startswith("sklearn."):
        return None
    trees = list(np.asarray(members, dtype=object).reshape(-1))
    if not trees or not all(hasattr(t, "tree_") for t in trees):
        return None
    spec = from_sklearn_trees(trees, lambda v: np.zeros((len(v), 1)), 1, np.zeros(1))
    subsets = getattr(model, "estimators_features_", None)
    if subsets is not None and len(subsets) == len(trees):
        spec.feature = member_features(spec, subsets)
    spec.n_features = int(getattr(model, "n_features_in_", spec.n_features))
    return spec


def _float32_step(value: float) -> float:
    """One float32 step at ``value`` (the spacing of float32 there)."""
    return float(np.spacing(np.abs(np.float32(value))))


def _parents(spec: TreeEnsembleSpec) -> tuple[np.ndarray, np.ndarray]:
    """``[M]`` parent row of each node (-1 for roots) and whether it is its parent's left child."""
    rows = np.arange(len(spec.tree))
    starts = np.flatnonzero(np.r_[True, spec.tree[1:] != spec.tree[:-1]])
    offset = np.zeros(spec.n_trees, dtype=np.int64)
    offset[spec.tree[starts]] = starts
    position = offset[spec.tree] + spec.node
    if not np.array_equal(position, rows):  # node ids not 0..n-1 in order: look them up
        lookup = {
            (int(t), int(n)): i for i, (t, n) in enumerate(zip(spec.tree, spec.node, strict=True))
        }

        def find(tree: np.ndarray, node: np.ndarray) -> np.ndarray:
            return np.array([lookup[(int(a), int(b))] for a, b in zip(tree, node, strict=True)])
    else:

        def find(tree: np.ndarray, node: np.ndarray) -> np.ndarray:
            return offset[tree] + node

    parent = np.full(len(rows), -1, dtype=np.int64)
    is_left = np.zeros(len(rows), dtype=bool)
    inner = rows[~spec.is_leaf]
    if len(inner):
        left = find(spec.tree[inner], spec.left[inner])
        right = find(spec.tree[inner], spec.right[inner])
        parent[left], is_left[left] = inner, True
        parent[right] = inner
    return parent, is_left


def _path(spec: TreeEnsembleSpec, parent: np.ndarray, is_left: np.ndarray, row: int) -> list:
    """``(node row, went_left)`` from the root down to node ``row``."""
    path = []
    while parent[row] >= 0:
        up = int(parent[row])
        path.append((up, bool(is_left[row])))
        row = up
    return path[::-1]


def _category_value(spec: TreeEnsembleSpec, row: int, left: bool) -> float:
    """A known category that categorical node ``row`` sends ``left`` (or right).

    NaN when no known category goes that way: the probe then follows the missing values' way
    (a row that does not reach the node only probes less, it is still checked).
    """
    feature = int(spec.feature[row])
    keys = category_keys(np.asarray(spec.categories.get(feature, [])))
    goes_left = np.zeros(len(keys), dtype=bool)
    goes_left[np.asarray(spec.left_codes[row], dtype=np.int64)] = True
    side = np.flatnonzero((goes_left == left) & ~np.isnan(keys))
    return float(keys[side[0]]) if len(side) else float("nan")


def threshold_probe_rows(
    spec: TreeEnsembleSpec, base: np.ndarray, *, max_rows: int = MAX_PROBE_ROWS, seed: int = 0
) -> np.ndarray:
    """Rows at the split thresholds of trees that take ``base``'s columns, ``[P, F]`` float64.

    :func:`threshold_probes` for a model without steps in front of its trees: for each distinct
    ``(feature, threshold)`` one node testing it, a base row moved into the region that reaches
    that node, and three rows with the feature one float32 step below, on and above the
    threshold.
    """
    base = np.asarray(base, dtype=np.float64)
    if base.ndim != 2 or len(base) == 0:
        return np.zeros((0, spec.n_features))
    frame = pd.DataFrame(base, columns=list(range(base.shape[1])))
    probes = threshold_probes(None, frame, spec, max_rows=max_rows, seed=seed)
    if probes is None or len(probes.frame) == 0:
        return np.zeros((0, base.shape[1]))
    return probes.frame.to_numpy(dtype=np.float64)


@dataclass
class ThresholdProbes:
    """Rows at a tree model's split thresholds, in the model's input columns.

    Attributes:
        frame: the rows, as the source model takes them (columns moved to a number are
            float64).
        meta: per row: ``feature`` (the input column set), ``threshold`` (as the trees hold
            it, in the columns the trees see), ``where`` and ``value`` (the input value).
            ``where`` is ``below`` / ``on`` / ``above`` (the trees' column one float32 step
            below, on and above the threshold), ``below32`` / ``above32`` (the float32
            neighbours of the input value that lands on it), ``category`` / ``other`` (an
            encoded column: its category, another one), ``missing`` / ``present`` (a
            missing-value indicator).
        thresholds: distinct numeric split thresholds in the trees.
        probed: of which rows were built for.
        behind: class name of a step that cannot be inverted -> thresholds on the columns it
            makes (no row can be built for them).
    """

    frame: pd.DataFrame
    meta: list[dict[str, Any]]
    thresholds: int
    probed: int
    behind: dict[str, int]

    @property
    def not_inverted(self) -> int:
        """Thresholds behind steps that cannot be inverted."""
        return sum(self.behind.values())

    def summary(self) -> str:
        """``N of M thresholds probed`` and, if any, how many sit behind which steps."""
        text = f"{self.probed:,} of {self.thresholds:,} thresholds probed".replace(",", " ")
        if self.not_inverted:
            names = ", ".join(sorted(self.behind))
            text += (
                f"; {self.not_inverted:,} behind steps that cannot be inverted ({names})".replace(
                    ",", " ", 1
                )
            )
        return text


def _rows_per_threshold(source: ColumnSource) -> int:
    if source.kind == "numeric":
        return 3 if source.raw else 5
    return 2


def _tree_space(estimator: Any, frame: pd.DataFrame, sources: list[ColumnSource]) -> np.ndarray:
    """``frame`` as the trees see it (``[N, F]`` float64); NaN where it cannot be computed."""
    values = _final_inputs(estimator, frame)
    if values is not None and values.ndim == 2 and values.shape[1] == len(sources):
        return values
    out = np.full((len(frame), len(sources)), np.nan)
    records = frame.to_dict("records")
    names = list(frame.columns)
    for j, source in enumerate(sources):
        if source.kind != "opaque" and 0 <= source.column < len(names):
            for i, record in enumerate(records):
                out[i, j] = _forward(source, record[names[source.column]])
    return out


def _forward(source: ColumnSource, value: Any) -> float:
    try:
        return source.forward(value)
    except (TypeError, ValueError):
        return float("nan")


def _native_category(spec: TreeEnsembleSpec, row: int, left: bool) -> Any:
    """A known category (as the input holds it) that categorical node ``row`` sends ``left``.

    None when no known text category goes that way (NaN for a numeric column, as
    :func:`_category_value` gives).
    """
    feature = int(spec.feature[row])
    known = np.asarray(spec.categories.get(feature, []))
    if known.dtype.kind not in "OUS":
        return _category_value(spec, row, left)
    goes_left = np.zeros(len(known), dtype=bool)
    goes_left[np.asarray(spec.left_codes[row], dtype=np.int64)] = True
    side = [k for k in np.flatnonzero(goes_left == left) if str(known[k]) != ""]
    return known[side[0]] if side else None


def _other_category(source: ColumnSource, current: Any) -> Any:
    """A category of ``source``'s input column other than ``source.category`` (None if none)."""
    if not source.categories or source.forward(current) == 0.0:
        return current
    others = [c for c in source.categories if not (c == source.category) and c is not None]
    others = [c for c in others if not (isinstance(c, float) and np.isnan(c))]
    return others[0] if others else None


def _ordinal_code(source: ColumnSource, threshold: float, left: bool, rule: str) -> int | None:
    codes = np.arange(len(source.categories), dtype=np.float64)
    if left:
        side = codes[codes <= threshold] if rule == "leq" else codes[codes < threshold]
        return int(side.max()) if len(side) else None
    side = codes[codes > threshold] if rule == "leq" else codes[codes >= threshold]
    return int(side.min()) if len(side) else None


def _move(
    record: dict[Any, Any],
    tx: np.ndarray,
    names: list[Any],
    sources: list[ColumnSource],
    by_column: dict[int, list[int]],
    feature: int,
    target: float,
    left: bool,
    threshold: float,
    rule: str,
) -> None:
    """Set the input column behind tree column ``feature`` so that it reads ``target``."""
    source = sources[feature]
    column = source.column
    if source.kind == "opaque" or not 0 <= column < len(names):
        return
    name = names[column]
    if source.kind == "numeric":
        value = source.inverse(target)
        if np.isnan(value):  # a value the steps never give (outside a clip): leave the row
            return
        record[name] = value
    elif source.kind == "onehot":
        if not left:
            record[name] = source.category
        else:
            other = _other_category(source, record[name])
            if other is not None:
                record[name] = other
    elif source.kind == "ordinal":
        code = _ordinal_code(source, threshold, left, rule)
        if code is not None:
            record[name] = source.categories[code]
    elif source.kind == "indicator" and not left:
        record[name] = np.nan
    for j in by_column.get(column, []):
        tx[j] = _forward(sources[j], record[name])


def _satisfied(value: float, threshold: float, left: bool, rule: str) -> bool:
    if np.isnan(value):
        return False
    if left:
        return value <= threshold if rule == "leq" else value < threshold
    return value > threshold if rule == "leq" else value >= threshold


def _probe_values(
    source: ColumnSource, threshold: float, current: Any, rule: str
) -> list[tuple[str, Any]]:
    """``(where, input value)`` for the rows that probe ``threshold`` on ``source``."""
    step = _float32_step(threshold)
    if source.kind == "numeric" and source.raw:
        return [("below", threshold - step), ("on", threshold), ("above", threshold + step)]
    if source.kind == "numeric":
        # float32 rounds the graph's input and again the transformed column: land on the
        # threshold and one float32 step either side of it in the trees' column, and on the
        # float32 neighbours of the input value that lands on it.
        on = source.inverse(threshold)
        near = np.float32(on)
        values = [
            ("below", source.inverse(threshold - step)),
            ("on", on),
            ("above", source.inverse(threshold + step)),
            ("below32", float(np.nextafter(near, np.float32(-np.inf)))),
            ("above32", float(np.nextafter(near, np.float32(np.inf)))),
        ]
        # No input value lands outside a clip: those rows are not made.
        return [(where, value) for where, value in values if not np.isnan(value)]
    if source.kind == "onehot":
        values = [("category", source.category)]
        other = _other_category(source, source.category if current is None else current)
        if other is not None and not (other == source.category):
            values.append(("other", other))
        return values
    if source.kind == "ordinal":
        found = []
        for where, left in (("below", True), ("above", False)):
            code = _ordinal_code(source, threshold, left, rule)
            if code is not None:
                found.append((where, source.categories[code]))
        return found
    if source.kind == "indicator":
        return [("missing", np.nan), ("present", current)]
    return []


def _as_frame(rows: list[dict[Any, Any]], like: pd.DataFrame, moved: set[Any]) -> pd.DataFrame:
    """``rows`` with ``like``'s columns and dtypes; numeric columns that were moved are float64."""
    out = pd.DataFrame.from_records(rows, columns=list(like.columns))
    for name in like.columns:
        dtype = like[name].dtype
        numeric = pd.api.types.is_numeric_dtype(dtype) or pd.api.types.is_bool_dtype(dtype)
        try:
            if name in moved and numeric:
                out[name] = pd.to_numeric(out[name], errors="coerce").astype(np.float64)
            else:
                out[name] = out[name].astype(dtype)
        except (TypeError, ValueError):
            pass
    return out


def threshold_probes(
    estimator: Any,
    frame: pd.DataFrame,
    spec: TreeEnsembleSpec | None = None,
    *,
    max_rows: int = MAX_PROBE_ROWS,
    seed: int = 0,
) -> ThresholdProbes | None:
    """Rows at the split thresholds of the trees at the end of ``estimator``, as input rows.

    For each distinct ``(feature, threshold)`` of the trees one node testing it is chosen; a row
    of ``frame`` is moved into the region that reaches that node, and rows are made with the
    trees' column on the threshold and one float32 step either side. The trees' columns are
    carried back to the input through the steps in front of them (see
    :func:`~onnxbridge.convert._input_map.column_sources`): a scaled column lands on each value
    as closely as float64 allows (and the float32 neighbours of the input value on the threshold
    are added), an encoded column gets a row with its category and one with another category.
    Thresholds on columns made by a step that cannot be inverted (PCA, polynomial features,
    binning, ...) get no rows and are counted in :attr:`ThresholdProbes.behind`.

    Args:
        estimator: the fitted model or Pipeline.
        frame: rows in the model's input columns (complete rows are used when there are any).
        spec: the trees (default: :func:`find_tree_ensemble`).
        max_rows: at most this many rows (a random choice of thresholds, fixed ``seed``).
        seed: seed of that choice.

    Returns:
        The rows, or None when ``estimator`` has no readable tree ensemble at its end.
    """
    spec = spec if spec is not None else find_tree_ensemble(estimator)
    if spec is None:
        return None
    names = list(frame.columns)
    sources = column_sources(estimator, names)
    width = max(spec.n_features, int(spec.feature.max(initial=-1)) + 1)
    if len(sources) < width:
        sources = sources + [ColumnSource("opaque", step="unknown step")] * (width - len(sources))
    complete = frame.dropna()
    base = (complete if len(complete) else frame).reset_index(drop=True)
    largest = float(np.finfo(np.float32).max) / 2
    categorical = spec.is_categorical
    inner = np.flatnonzero(~spec.is_leaf & ~categorical & (np.abs(spec.threshold) < largest))
    chosen = _first_of_each_split(spec, inner)
    # Per feature (the spec's columns): whether a step that cannot be inverted hides it, and how
    # many rows a threshold on it takes; then per chosen node, with numpy (forests have millions).
    opaque = np.array([source.kind == "opaque" for source in sources], dtype=bool)
    costs = np.array([_rows_per_threshold(source) for source in sources], dtype=np.int64)
    features = spec.feature[chosen]
    behind: dict[str, int] = {}
    hidden, first, counts = np.unique(
        features[opaque[features]], return_index=True, return_counts=True
    )
    by_first = np.argsort(first)  # steps in the order their first threshold comes
    for feature, count in zip(hidden[by_first].tolist(), counts[by_first].tolist(), strict=True):
        step = sources[feature].step
        behind[step] = behind.get(step, 0) + count
    usable_rows = chosen[~opaque[features]]
    cost = costs[spec.feature[usable_rows]]
    if int(cost.sum()) > max_rows:
        order = np.random.RandomState(seed).permutation(len(usable_rows))
        keep, total, least = [], 0, int(cost.min())
        for k in order:  # element by element: a big forest's list would take gigabytes
            if total + int(cost[k]) <= max_rows:
                keep.append(int(k))
                total += int(cost[k])
            if max_rows - total < least:
                break  # nothing more fits
        usable_rows = usable_rows[np.sort(np.asarray(keep, dtype=np.int64))]
    usable = usable_rows.tolist()
    if not usable or len(base) == 0:
        empty = base.iloc[:0].copy()
        return ThresholdProbes(empty, [], len(chosen), 0, behind)
    records = base.to_dict("records")
    # A model may know a text column's categories by their codes (LightGBM on pandas
    # categories): such categories cannot be written into the text column.
    text = [
        not (pd.api.types.is_numeric_dtype(base[n]) or pd.api.types.is_bool_dtype(base[n]))
        for n in names
    ]
    tree_base = _tree_space(estimator, base, sources)
    by_column: dict[int, list[int]] = {}
    for j, source in enumerate(sources):
        if source.kind != "opaque":
            by_column.setdefault(source.column, []).append(j)
    parent, is_left = _parents(spec)
    rows: list[dict[Any, Any]] = []
    meta: list[dict[str, Any]] = []
    moved: set[Any] = set()
    for number, node_row in enumerate(usable):
        record = dict(records[number % len(records)])
        tx = tree_base[number % len(records)].copy()
        for up, went_left in _path(spec, parent, is_left, node_row):
            feature = int(spec.feature[up])
            source = sources[feature]
            if categorical[up]:
                value = _native_category(spec, up, went_left)
                # No known text category that way: the row keeps its own (it may not reach the
                # node, and then probes less; a missing text value is the missing set's job).
                if (
                    source.raw
                    and 0 <= source.column < len(names)
                    and value is not None
                    and isinstance(value, str) == text[source.column]
                ):
                    record[names[source.column]] = value
                    moved.add(names[source.column])
                continue
            threshold = float(spec.threshold[up])
            if not abs(threshold) < largest or _satisfied(
                tx[feature], threshold, went_left, spec.rule
            ):
                continue
            step = _float32_step(threshold)
            if went_left:
                target = threshold if spec.rule == "leq" else threshold - step
            else:
                target = threshold + step
            _move(
                record,
                tx,
                names,
                sources,
                by_column,
                feature,
                target,
                went_left,
                threshold,
                spec.rule,
            )
            if 0 <= source.column < len(names):
                moved.add(names[source.column])
        feature = int(spec.feature[node_row])
        threshold = float(spec.threshold[node_row])
        source = sources[feature]
        name = names[source.column]
        moved.add(name)
        for where, value in _probe_values(source, threshold, record[name], spec.rule):
            probe = dict(record)
            probe[name] = value
            rows.append(probe)
            meta.append(
                {"feature": str(name), "threshold": threshold, "where": where, "value": value}
            )
    frame_out = _as_frame(rows, base, moved)
    return ThresholdProbes(frame_out, meta, len(chosen), len(usable), behind)


def _first_of_each_split(spec: TreeEnsembleSpec, inner: np.ndarray) -> np.ndarray:
    """Of ``inner`` (spec rows), the first row testing each distinct (feature, threshold), in
    row order."""
    if not len(inner):
        return np.zeros(0, dtype=np.int64)
    features, thresholds = spec.feature[inner], spec.threshold[inner]
    order = np.lexsort((thresholds, features))  # stable: the first row of a pair comes first
    features, thresholds = features[order], thresholds[order]
    starts = np.r_[True, (features[1:] != features[:-1]) | (thresholds[1:] != thresholds[:-1])]
    return inner[np.sort(order[starts])]


def _final_inputs(estimator: Any, frame: pd.DataFrame) -> np.ndarray | None:
    if not hasattr(estimator, "steps"):
        try:
            return frame.to_numpy(dtype=np.float64, na_value=np.nan)
        except (TypeError, ValueError):
            return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            values = estimator[:-1].transform(frame)
    except Exception:
        return None
    if hasattr(values, "toarray"):
        values = values.toarray()
    try:
        return np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        return None


def _flipped(estimator: Any, result: Any, frame: pd.DataFrame) -> int:
    """How many rows of ``frame`` the float graph decides differently from the source model."""
    from threadpoolctl import threadpool_limits

    from onnxbridge.convert._steps import onnx_outputs

    by_role = onnx_outputs(result, frame)

    # One thread: OpenMP models (HistGradientBoosting, LightGBM) spin for seconds on a busy
    # machine for a few thousand rows.
    with warnings.catch_warnings(), threadpool_limits(limits=1):
        warnings.simplefilter("ignore")
        from onnxbridge.convert._roles import same_labels
        from onnxbridge.train import source_frame

        source = estimator
        frame = source_frame(estimator, frame)
        if "label" in by_role:
            expected = np.asarray(source.predict(frame)).reshape(len(frame), -1)
            got = np.asarray(by_role["label"]).reshape(len(frame), -1)
            bad = np.any(~same_labels(expected, got), axis=1)
            if "probabilities" in by_role and by_role["probabilities"].dtype.kind == "f":
                proba = np.asarray(source.predict_proba(frame), dtype=np.float64)
                onnx_proba = by_role["probabilities"].reshape(proba.shape)
                bad |= np.any(np.abs(onnx_proba - proba) > PROBABILITY_TOLERANCE, axis=1)
            return int(bad.sum())
        if "value" in by_role:
            expected = np.asarray(source.predict(frame), dtype=np.float64).reshape(len(frame), -1)
            got = by_role["value"].astype(np.float64).reshape(expected.shape)
            scale = np.median(np.abs(expected)) if expected.size else 0.0
            limit = VALUE_RTOL * (np.abs(expected) + scale) + 1e-12
            return int(np.any(np.abs(got - expected) > limit, axis=1).sum())
    return 0


def probe_float_precision(
    estimator: Any, result: Any, frame: pd.DataFrame, spec: TreeEnsembleSpec
) -> PrecisionProbeReport:
    """Run the probe rows through a float32 conversion ``result`` and the source model.

    Args:
        estimator: the fitted model or Pipeline.
        result: its float32 :class:`~onnxbridge.convert._core.ConversionResult`.
        frame: the sample rows (the model's input columns).
        spec: the trees at the end of ``estimator``.
    """
    skipped = None
    probes = threshold_probes(estimator, frame, spec)
    rows = probes.frame if probes is not None else frame.iloc[:0]
    coverage = probes.summary() if probes is not None else None
    not_inverted = probes.not_inverted if probes is not None else 0
    combined = _stack(frame, rows) if len(rows) else frame
    try:
        flipped = _flipped(estimator, result, combined)
    except Exception as exc:  # a model that refuses the probe rows: judge the sample rows only
        flipped = _flipped(estimator, result, frame)
        skipped = f"the model refused them ({first_line(exc)})"
        rows = frame.iloc[:0]
    return PrecisionProbeReport(
        rows=len(frame) + len(rows),
        threshold_rows=len(rows),
        flipped=flipped,
        skipped=skipped,
        coverage=coverage,
        not_inverted=not_inverted,
    )


def _stack(frame: pd.DataFrame, probes: pd.DataFrame) -> pd.DataFrame:
    """The sample rows and the probe rows in one frame (moved numeric columns as float64)."""
    frame = frame.copy()
    for name in frame.columns:
        if probes[name].dtype == np.float64 and frame[name].dtype != np.float64:
            if pd.api.types.is_numeric_dtype(frame[name]) or pd.api.types.is_bool_dtype(
                frame[name]
            ):
                frame[name] = frame[name].astype(np.float64)
    return pd.concat([frame, probes], ignore_index=True)


def _imputer_statistics(estimator: Any) -> list[np.ndarray]:
    """The float64 ``statistics_`` of every fitted SimpleImputer inside ``estimator``."""
    found: list[np.ndarray] = []

    def walk(item: Any) -> None:
        if type(item).__name__ == "SimpleImputer" and hasattr(item, "statistics_"):
            stats = np.asarray(item.statistics_)
            if stats.dtype.kind == "f":
                found.append(stats.astype(np.float64))
        for _, step in getattr(item, "steps", []) or []:
            walk(step)
        for entry in getattr(item, "transformers_", []) or []:
            walk(entry[1])

    walk(estimator)
    return found


def fix_double_graph(model: Any, estimator: Any = None) -> Any:
    """Rewrite what ONNX Runtime cannot run on float64 in a ``precision="double"`` graph.

    skl2onnx converts a numeric SimpleImputer to ``ai.onnx.ml`` ``Imputer``, which ONNX Runtime
    implements for float32 and int64 only, with float32 fill values; in a float64 graph each such
    node becomes ``Where(IsNaN(x), fill, x)`` (``[N, C] -> [N, C]``), the fill being the imputer's
    float64 ``statistics_`` when ``estimator`` holds one that matches (else the node's values).
    """
    statistics = _imputer_statistics(estimator) if estimator is not None else []
    from onnx import helper, numpy_helper

    graph = model.graph
    for node in list(graph.node):
        if node.op_type != "Imputer" or node.domain != "ai.onnx.ml":
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        replaced = attrs.get("replaced_value_float", float("nan"))
        fill = list(attrs.get("imputed_value_floats") or [])
        if not fill or not np.isnan(replaced):
            continue
        for stats in statistics:
            if stats.shape == (len(fill),) and np.array_equal(
                stats.astype(np.float32), np.asarray(fill, dtype=np.float32)
            ):
                fill = stats.tolist()
                break
        x, y = node.input[0], node.output[0]
        fill_name, mask = f"{y}_fill_double", f"{y}_is_missing"
        graph.initializer.append(
            numpy_helper.from_array(np.asarray([fill], dtype=np.float64), name=fill_name)
        )
        replacement = [
            helper.make_node("IsNaN", [x], [mask], name=f"{node.name}_isnan"),
            helper.make_node("Where", [mask, fill_name, x], [y], name=f"{node.name}_where"),
        ]
        index = list(graph.node).index(node)
        del graph.node[index]
        for offset, new in enumerate(replacement):
            graph.node.insert(index + offset, new)
    return model


def convert_auto(estimator: Any, frame: pd.DataFrame, convert: Callable[[str], Any]) -> Any:
    """Convert with ``precision="auto"``.

    Args:
        estimator: the fitted model or Pipeline.
        frame: the sample rows, in the model's input columns.
        convert: ``convert(precision) -> ConversionResult`` for ``"float"`` / ``"double"``.

    Returns:
        The float32 conversion when no tree decision flips (or the model has no trees), else the
        float64 one; either way with a note saying what was found. When the float64 graph
        cannot be built the float32 one is returned with a note saying why.
    """
    if _compares_distances(estimator):
        double = convert("double")
        double.notes.append(
            "precision auto: double, as a neighbours model ranks training rows by distance and "
            "float32 input would merge or reorder distances scikit-learn keeps apart"
        )
        return double
    result = convert("float")
    spec = find_tree_ensemble(estimator)
    if spec is None:
        return result
    report = probe_float_precision(estimator, result, frame, spec)
    if report.flipped == 0 and report.complete:
        note = report.note(switched=False)
        if spec.native == "float64":
            note += f"; {FLOAT64_CAVEAT}"
        result.notes.append(note)
        return result
    from onnxbridge.convert._steps import release_session

    release_session(result)  # not two big sessions at once while the float64 graph loads
    try:
        double = convert("double")
    except ConversionError as exc:
        result.notes.append(
            f"{report.note(switched=False)}, but the double-precision graph failed: "
            f"{first_line(exc)}"
        )
        return result
    double.notes.append(report.note(switched=True))
    return double
