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
LightGBM's ``dump_model()`` and CatBoost's ONNX export (see
:mod:`onnxbridge.convert.tree_ensemble`). When the trees sit at the end of a Pipeline, probe rows
are mapped back through the steps before them (scalers are inverted, imputers are the identity on
rows without missing values); when a step cannot be inverted only the sample rows are probed.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from onnxbridge.convert.tree_ensemble import (
    TreeEnsembleSpec,
    category_keys,
    from_hist_gradient_boosting,
    from_lightgbm,
    from_xgboost,
)
from onnxbridge.errors import ConversionError, first_line
from onnxbridge.train import unwrap_label_encoding

__all__ = [
    "PrecisionProbeReport",
    "convert_auto",
    "find_tree_ensemble",
    "fix_double_graph",
    "probe_float_precision",
    "threshold_probe_rows",
]

# Probe rows per conversion at most (three per threshold): a few seconds for the largest forests.
MAX_PROBE_ROWS = 15_000
# A decision "flips" when the float graph's output leaves float32 rounding of the source's.
PROBABILITY_TOLERANCE = 1e-4
VALUE_RTOL = 1e-5


@dataclass
class PrecisionProbeReport:
    """What the float32 graph did on the probe rows.

    Attributes:
        rows: probe rows run.
        threshold_rows: of which built at split thresholds.
        flipped: rows whose decision differs from the source model's.
        skipped: why threshold probes were not built (None when they were).
    """

    rows: int
    threshold_rows: int
    flipped: int
    skipped: str | None = None

    def note(self, switched: bool) -> str:
        """One sentence for :attr:`ConversionResult.notes`."""
        what = f"{self.flipped:,} of {self.rows:,} probe rows".replace(",", " ")
        where = (
            f" ({self.threshold_rows:,} at split thresholds)".replace(",", " ")
            if self.threshold_rows
            else ""
        )
        if switched and not self.flipped and self.skipped:
            text = (
                f"switched to double precision: {what} flipped in float32, but without "
                "threshold probes float32 could not be shown to keep the trees' decisions"
            )
        elif switched:
            text = f"switched to double precision: {what}{where} flipped in float32"
        else:
            text = f"kept float precision: {what}{where} flipped in float32"
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
            from onnxbridge.convert.converters.sklearn_trees import _handled, forest_spec

            return forest_spec(model) if _handled(model) else None
        if module.startswith("xgboost"):
            return from_xgboost(model)[0]
        if module.startswith("lightgbm"):
            return from_lightgbm(model)[0]
        if module.startswith("catboost"):
            from onnxbridge.convert.converters.catboost import catboost_spec

            return catboost_spec(model)[0]
    except (ConversionError, AttributeError, KeyError, ValueError):
        return None
    return None


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


def _satisfy(row: np.ndarray, feature: int, threshold: float, left: bool, rule: str) -> None:
    if not abs(threshold) < float(np.finfo(np.float32).max) / 2:
        return  # LightGBM's "missing or not" split at 1e300: no finite float32 row can tell
    value = row[feature]
    step = _float32_step(threshold)
    if left:
        ok = value <= threshold if rule == "leq" else value < threshold
        if not ok or np.isnan(value):
            row[feature] = threshold if rule == "leq" else threshold - step
    else:
        ok = value > threshold if rule == "leq" else value >= threshold
        if not ok or np.isnan(value):
            row[feature] = threshold + step


def threshold_probe_rows(
    spec: TreeEnsembleSpec, base: np.ndarray, *, max_rows: int = MAX_PROBE_ROWS, seed: int = 0
) -> np.ndarray:
    """Rows at the split thresholds, ``[P, F]`` float64.

    For each distinct ``(feature, threshold)`` one node testing it is chosen; a base row is moved
    into the region that reaches that node, and three rows are made with the feature at the
    threshold and one float32 step below and above. At most ``max_rows`` rows (a random choice of
    thresholds, fixed ``seed``, when there are more).
    """
    base = np.asarray(base, dtype=np.float64)
    if base.ndim != 2 or len(base) == 0:
        return np.zeros((0, spec.n_features))
    # Thresholds beyond float32's range (LightGBM's 1e300) cannot flip: no float32 is near them.
    largest = float(np.finfo(np.float32).max) / 2
    categorical = spec.is_categorical
    # Categorical splits compare codes, not thresholds: float32 cannot flip them.
    inner = np.flatnonzero(~spec.is_leaf & ~categorical & (np.abs(spec.threshold) < largest))
    if len(inner) == 0:
        return np.zeros((0, base.shape[1]))
    pairs = np.stack([spec.feature[inner].astype(np.float64), spec.threshold[inner]], axis=1)
    _, first = np.unique(pairs, axis=0, return_index=True)
    chosen_rows = inner[np.sort(first)]
    if 3 * len(chosen_rows) > max_rows:
        rng = np.random.RandomState(seed)
        chosen_rows = np.sort(rng.choice(chosen_rows, size=max_rows // 3, replace=False))
    parent, is_left = _parents(spec)
    chosen = [((int(spec.feature[r]), float(spec.threshold[r])), int(r)) for r in chosen_rows]
    rows = []
    for number, ((feature, threshold), node_row) in enumerate(chosen):
        row = base[number % len(base)].copy()
        for up, went_left in _path(spec, parent, is_left, node_row):
            if categorical[up]:
                row[int(spec.feature[up])] = _category_value(spec, up, went_left)
            else:
                _satisfy(
                    row, int(spec.feature[up]), float(spec.threshold[up]), went_left, spec.rule
                )
        step = _float32_step(threshold)
        for value in (threshold - step, threshold, threshold + step):
            probe = row.copy()
            probe[feature] = value
            rows.append(probe)
    return np.vstack(rows) if rows else np.zeros((0, base.shape[1]))


_IDENTITY_ON_COMPLETE_ROWS = ("SimpleImputer", "KNNImputer", "IterativeImputer", "MissingIndicator")


def _to_input_space(estimator: Any, rows: np.ndarray) -> tuple[np.ndarray | None, str | None]:
    """Map rows of the final step's input back to the model's input (None + why if impossible)."""
    steps = list(getattr(estimator, "steps", []))[:-1]
    for name, step in reversed(steps):
        if step is None or step == "passthrough":
            continue
        if type(step).__name__ in _IDENTITY_ON_COMPLETE_ROWS and not getattr(
            step, "add_indicator", False
        ):
            continue
        if hasattr(step, "inverse_transform") and type(step).__name__.endswith("Scaler"):
            rows = np.asarray(step.inverse_transform(rows), dtype=np.float64)
            continue
        return None, f"pipeline step {name!r} ({type(step).__name__}) cannot be inverted"
    return rows, None


def _final_inputs(estimator: Any, frame: pd.DataFrame) -> np.ndarray | None:
    if not hasattr(estimator, "steps"):
        return frame.to_numpy(dtype=np.float64, na_value=np.nan)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            values = estimator[:-1].transform(frame)
    except Exception:
        return None
    if hasattr(values, "toarray"):
        values = values.toarray()
    return np.asarray(values, dtype=np.float64)


def _run_onnx(model: Any, frame: pd.DataFrame, inputs: list[dict[str, Any]]) -> list[np.ndarray]:
    import onnxruntime as ort

    from onnxbridge.convert.metadata import input_block

    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    feeds = {i["name"]: input_block(frame, i["columns"], i["dtype"]) for i in inputs}
    return [np.asarray(v) for v in session.run(None, feeds)]


def _flipped(estimator: Any, result: Any, frame: pd.DataFrame) -> int:
    """How many rows of ``frame`` the float graph decides differently from the source model."""
    outputs = _run_onnx(result.model, frame, result.metadata.inputs)
    names = [o.name for o in result.model.graph.output]
    by_role = {role: outputs[names.index(name)] for role, name in result.metadata.outputs.items()}
    from threadpoolctl import threadpool_limits

    # One thread: OpenMP models (HistGradientBoosting, LightGBM) spin for seconds on a busy
    # machine for a few thousand rows.
    with warnings.catch_warnings(), threadpool_limits(limits=1):
        warnings.simplefilter("ignore")
        from onnxbridge.convert.roles import same_labels
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
        result: its float32 :class:`~onnxbridge.convert.core.ConversionResult`.
        frame: the sample rows (the model's input columns).
        spec: the trees at the end of ``estimator``.
    """
    skipped = None
    probes = np.zeros((0, frame.shape[1]))
    numeric = all(i["dtype"] != "string" for i in result.metadata.inputs)
    # Text columns (categories) are not numbers: no threshold row can be built from them.
    base = _final_inputs(estimator, frame) if numeric else None
    if base is None or not numeric:
        skipped = "the model's input has text columns" if not numeric else "no transformed rows"
    else:
        rows = threshold_probe_rows(spec, base)
        mapped, skipped = _to_input_space(estimator, rows)
        if mapped is not None:
            probes = mapped
    probe_frame = pd.DataFrame(probes, columns=frame.columns)
    combined = pd.concat([frame, probe_frame], ignore_index=True) if len(probes) else frame
    try:
        flipped = _flipped(estimator, result, combined)
    except Exception as exc:  # a model that refuses the probe rows: judge the sample rows only
        flipped = _flipped(estimator, result, frame)
        skipped = f"the model refused them ({first_line(exc)})"
        probes = np.zeros((0, frame.shape[1]))
    return PrecisionProbeReport(
        rows=len(frame) + len(probes), threshold_rows=len(probes), flipped=flipped, skipped=skipped
    )


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
    if report.flipped == 0 and report.skipped is None:
        result.notes.append(report.note(switched=False))
        return result
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
