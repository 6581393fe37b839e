"""Probe sets: the rows a model is validated on, each aimed at one way a conversion goes wrong.

=============  ===========================================================================
probe set      rows
=============  ===========================================================================
``holdout``    the held-out rows (or the ``--data`` rows), as given
``range``      random rows, each feature uniform in its training range (from the holdout)
``thresholds`` tree models: held-out rows moved to reach each split, on its threshold and
               one float32 step either side (carried back through a Pipeline's steps)
``edge``       0, -0.0, tiny (±1e-38), large (±1e9, ±1e30) per feature, and rows of each
``missing``    held-out rows with NaN injected per column (only when the model accepts NaN)
``strings``    unseen, empty and non-ASCII values per string column (string inputs only)
``categories`` every category the model knows per string column, one column at a time
               (from the fitted encoders and native categorical splits, else the held-out
               values), and rows with every category column missing
``batch``      the same rows scored one at a time and in one batch: a row's result must not
               depend on its batch
=============  ===========================================================================

Every generator is deterministic for a given :class:`ProbeSpec` (sizes and seed).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from onnxbridge.data import FeatureSchema, blank_column, preview_names
from onnxbridge.errors import DataError

__all__ = [
    "PROBE_NAMES",
    "ProbeSet",
    "ProbeSpec",
    "SplitThreshold",
    "build_probe_sets",
    "known_categories",
    "tree_thresholds",
]

PROBE_NAMES = (
    "holdout",
    "range",
    "thresholds",
    "edge",
    "missing",
    "strings",
    "categories",
    "batch",
)
EDGE_VALUES = (0.0, -0.0, 1e-38, -1e-38, 1e9, -1e9, 1e30, -1e30)
# Unseen and awkward strings: never a training category, empty, non-ASCII, padded.
STRING_VALUES = ("__onnxbridge_unseen__", "", "é日本語🙂", " padded ", "NULL")


@dataclass(frozen=True)
class ProbeSpec:
    """Sizes and seed of the probe sets.

    Attributes:
        probes: which probe sets to build (names from :data:`PROBE_NAMES`).
        seed: seed of every random choice.
        range_rows: rows in ``range``.
        max_threshold_rows: cap on ``thresholds`` rows (thresholds are sampled beyond it).
        missing_rows: held-out rows copied per column in ``missing``.
        batch_rows: rows scored one at a time in ``batch``.
    """

    probes: tuple[str, ...] = PROBE_NAMES
    seed: int = 0
    range_rows: int = 200
    max_threshold_rows: int = 3000
    missing_rows: int = 20
    batch_rows: int = 20

    def __post_init__(self) -> None:
        unknown = [p for p in self.probes if p not in PROBE_NAMES]
        if unknown:
            raise DataError(
                f"unknown probe set {', '.join(map(repr, unknown))}; choose from "
                f"{', '.join(PROBE_NAMES)}"
            )
        for name in ("range_rows", "max_threshold_rows", "missing_rows", "batch_rows"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise DataError(
                    f"{name}={value!r} is not allowed: it must be an integer >= 1",
                    arguments=(name,),
                )


@dataclass
class ProbeSet:
    """One probe set: its rows and what they aim at.

    Attributes:
        name: one of :data:`PROBE_NAMES`.
        description: one line for the report.
        frame: ``[N, F]`` rows, as the source model takes them.
        skipped: why the set is not compared (then ``frame`` is empty), else None.
        meta: per-row detail, e.g. for ``thresholds`` the feature and threshold each row probes.
    """

    name: str
    description: str
    frame: pd.DataFrame
    skipped: str | None = None
    meta: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class SplitThreshold:
    """A split of a fitted tree: ``feature`` (column position) and its ``threshold``.

    ``left_is_le`` records the comparison: True when rows with ``x <= threshold`` go left
    (scikit-learn, LightGBM), False when rows with ``x < threshold`` go left (XGBoost).
    """

    feature: int
    threshold: float
    left_is_le: bool = True


# ------------------------------------------------------------------------------ tree walking
def tree_thresholds(estimator: Any) -> list[SplitThreshold] | None:
    """Every numeric split of a tree model, carried to the input columns, deduplicated.

    The trees are read as convert reads them
    (:func:`~onnxbridge.convert._precision.probe_tree_ensemble`: scikit-learn trees, forests,
    gradient boosting, bagging and AdaBoost, HistGradientBoosting, XGBoost, LightGBM,
    CatBoost). Behind steps in a Pipeline a split on a scaled (or passed-through, imputed)
    column becomes the input value that lands on it
    (:func:`~onnxbridge.convert._input_map.column_sources`); splits on encoded columns or on
    columns made by a step that cannot be inverted have no input threshold and are left out.

    Returns:
        The splits in a stable order, or None when the model is not a tree ensemble that
        onnxbridge reads.
    """
    from onnxbridge.convert._input_map import column_sources
    from onnxbridge.convert._precision import probe_tree_ensemble

    spec = probe_tree_ensemble(estimator) if estimator is not None else None
    if spec is None:
        return None
    known = getattr(estimator, "feature_names_in_", None)
    names = (
        [str(n) for n in known]
        if known is not None
        else [str(n) for n in range(int(getattr(estimator, "n_features_in_", 0)))]
    )
    sources = column_sources(estimator, names) if names else []
    left_is_le = spec.rule == "leq"
    found = set()
    for feature, threshold in spec.splits():
        if not sources:
            found.add(SplitThreshold(feature, threshold, left_is_le))
            continue
        source = sources[feature] if feature < len(sources) else None
        if source is None or source.kind != "numeric":
            continue
        value = source.inverse(threshold)
        if not np.isnan(value):  # NaN: no input value lands on it (outside a clip)
            found.add(SplitThreshold(source.column, value, left_is_le))
    return sorted(found, key=lambda s: (s.feature, s.threshold, s.left_is_le))


def _final_step(estimator: Any) -> Any:
    while hasattr(estimator, "steps"):
        estimator = estimator.steps[-1][1]
    return estimator


# ------------------------------------------------------------------------------- generators
def _numeric_columns(schema: FeatureSchema) -> list[str]:
    return [f.name for f in schema.features if f.is_numeric]


def _string_columns(schema: FeatureSchema) -> list[str]:
    return [f.name for f in schema.features if not f.is_numeric]


def _base_rows(holdout: pd.DataFrame, n: int) -> pd.DataFrame:
    """``n`` held-out rows, cycling through them."""
    index = np.arange(n) % len(holdout)
    return holdout.iloc[index].reset_index(drop=True).copy()


def _range_rows(holdout: pd.DataFrame, schema: FeatureSchema, spec: ProbeSpec) -> pd.DataFrame:
    rng = np.random.RandomState(spec.seed)
    rows = _base_rows(holdout, spec.range_rows)
    for name in _numeric_columns(schema):
        column = pd.to_numeric(holdout[name], errors="coerce").astype(np.float64).dropna()
        if column.empty:  # a column with no value: nothing to draw a range from
            continue
        low, high = float(column.min()), float(column.max())
        if not np.isfinite(low) or not np.isfinite(high):
            continue
        if pd.api.types.is_bool_dtype(holdout[name]):
            rows[name] = rng.rand(spec.range_rows) < 0.5
        elif pd.api.types.is_integer_dtype(holdout[name]):
            rows[name] = rng.randint(int(low), int(high) + 1, spec.range_rows).astype(
                holdout[name].dtype
            )
        else:
            rows[name] = rng.uniform(low, high, spec.range_rows)
    for name in _string_columns(schema):
        seen = holdout[name].dropna().unique()
        if len(seen):
            rows[name] = rng.choice(seen, spec.range_rows)
    return rows


def _as_float_column(rows: pd.DataFrame, name: str) -> None:
    if not pd.api.types.is_float_dtype(rows[name]):
        rows[name] = rows[name].astype(np.float64)


def _edge_rows(
    holdout: pd.DataFrame, schema: FeatureSchema
) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    numeric = _numeric_columns(schema)
    n = len(numeric) * len(EDGE_VALUES) + len(EDGE_VALUES)
    rows = _base_rows(holdout, n)
    for name in numeric:
        _as_float_column(rows, name)
    meta: list[dict[str, Any]] = []
    position = 0
    for name in numeric:
        for value in EDGE_VALUES:
            rows.loc[position, name] = value
            meta.append({"feature": name, "value": value})
            position += 1
    for value in EDGE_VALUES:  # every feature at once
        for name in numeric:
            rows.loc[position, name] = value
        meta.append({"feature": "*", "value": value})
        position += 1
    return rows, meta


def missing_columns(schema: FeatureSchema, accepts_missing: bool | Collection[str]) -> list[str]:
    """The columns, in schema order, where the source model takes a missing value.

    ``accepts_missing`` is True (every column), False (none) or the accepting columns by name.
    """
    if isinstance(accepts_missing, bool):
        return list(schema.names) if accepts_missing else []
    accepted = set(accepts_missing)
    return [name for name in schema.names if name in accepted]


def _missing_rows(
    holdout: pd.DataFrame, schema: FeatureSchema, spec: ProbeSpec, columns: list[str]
) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    """Held-out rows with one column missing at a time, then one row with all of ``columns``
    missing: NaN in a number column, None in a text column."""
    strings = set(_string_columns(schema))
    per_column = min(spec.missing_rows, len(holdout))
    parts: list[pd.DataFrame] = []
    meta: list[dict[str, Any]] = []
    for name in columns:
        block = _base_rows(holdout, per_column)
        blank_column(block, name)
        parts.append(block)
        meta.extend({"feature": name} for _ in range(per_column))
    everything = _base_rows(holdout, 1)
    for name in columns:
        blank_column(everything, name)
    parts.append(everything)
    meta.append({"feature": "*"})
    frame = pd.concat(parts, ignore_index=True)
    for name in columns:
        if name not in strings:
            _as_float_column(frame, name)
    return frame, meta


def _string_rows(
    holdout: pd.DataFrame, schema: FeatureSchema
) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    strings = _string_columns(schema)
    rows = _base_rows(holdout, len(strings) * len(STRING_VALUES))
    meta: list[dict[str, Any]] = []
    position = 0
    for name in strings:
        rows[name] = rows[name].astype(object)
        for value in STRING_VALUES:
            rows.loc[position, name] = value
            meta.append({"feature": name, "value": value})
            position += 1
    return rows, meta


def _encoder_categories(estimator: Any) -> dict[str, list[Any]]:
    """Categories of every fitted encoder in ``estimator`` that names its input columns.

    Encoders (OneHotEncoder, OrdinalEncoder, TargetEncoder, ...) inside pipelines and column
    transformers record ``feature_names_in_`` and ``categories_``; HistGradientBoosting on
    category columns keeps such an encoder as its preprocessor.
    """
    found: dict[str, list[Any]] = {}
    seen: set[int] = set()

    def visit(value: Any) -> None:
        if id(value) in seen or value is None or isinstance(value, (str, bytes, np.ndarray)):
            return
        seen.add(id(value))
        if isinstance(value, (list, tuple)):
            for item in value:
                visit(item)
            return
        if not hasattr(value, "get_params"):
            return
        names = getattr(value, "feature_names_in_", None)
        categories = getattr(value, "categories_", None)
        if names is not None and isinstance(categories, list) and len(categories) == len(names):
            for name, values in zip(names, categories, strict=True):
                found.setdefault(str(name), []).extend(np.asarray(values).tolist())
        for attribute in ("steps", "transformers_", "estimators_", "estimator", "_preprocessor"):
            visit(getattr(value, attribute, None))

    visit(estimator)
    return found


def _tree_categories(estimator: Any, schema: FeatureSchema) -> dict[str, list[Any]]:
    """Categories of a tree model's native categorical splits, by input column."""
    from onnxbridge.convert._precision import find_tree_ensemble

    if hasattr(estimator, "steps"):  # only a model that takes the input columns directly
        steps = [s for _, s in estimator.steps if s not in (None, "passthrough")]
        if len(steps) != 1:
            return {}
        estimator = steps[0]
    spec = find_tree_ensemble(estimator)
    known = getattr(spec, "categories", None) or {}
    names = schema.names
    return {names[j]: list(values) for j, values in known.items() if 0 <= j < len(names)}


def known_categories(
    estimator: Any, schema: FeatureSchema, holdout: pd.DataFrame
) -> dict[str, list[Any]]:
    """Every category the model knows, per string column of ``schema``.

    From the fitted encoders and the native categorical splits of ``estimator`` where it has
    them, plus the values of the held-out rows; missing values are not categories here.
    """
    found: dict[str, list[Any]] = {}
    sources = [_encoder_categories(estimator), _tree_categories(estimator, schema)]
    if estimator is None:
        sources = []
    for name in _string_columns(schema):
        values: list[Any] = []
        for source in sources:
            values.extend(source.get(name, []))
        values.extend(holdout[name].dropna().tolist())
        unique: dict[str, Any] = {}
        for value in values:
            if value is None or (isinstance(value, float) and np.isnan(value)):
                continue
            unique.setdefault(str(value), value)
        found[name] = list(unique.values())
    return found


def _category_rows(
    holdout: pd.DataFrame, schema: FeatureSchema, known: dict[str, list[Any]], missing: list[str]
) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    strings = _string_columns(schema)
    missing = [name for name in strings if name in set(missing)]
    total = sum(len(known[name]) for name in strings) + (1 if missing else 0)
    rows = _base_rows(holdout, max(total, 1))
    meta: list[dict[str, Any]] = []
    position = 0
    for name in strings:
        rows[name] = rows[name].astype(object)
        for value in known[name]:
            rows.loc[position, name] = value
            meta.append({"feature": name, "value": value})
            position += 1
    if missing:  # every category column the model takes missing at once
        for name in missing:
            rows.loc[position, name] = None
        meta.append({"feature": "*", "value": None})
        position += 1
    return rows.iloc[:position].reset_index(drop=True), meta


def _thresholds_set(estimator: Any, base: pd.DataFrame, spec: ProbeSpec) -> ProbeSet:
    """Rows on every split threshold, carried back through the steps before the trees."""
    from onnxbridge.convert._precision import probe_tree_ensemble, threshold_probes

    name, what = "thresholds", "rows on every split threshold"
    empty = base.iloc[:0]
    trees = probe_tree_ensemble(estimator) if estimator is not None else None
    probes = (
        threshold_probes(estimator, base, trees, max_rows=spec.max_threshold_rows, seed=spec.seed)
        if trees is not None
        else None
    )
    if probes is None:
        return ProbeSet(name, what, empty, "not a tree model onnxbridge reads")
    if probes.thresholds == 0:
        return ProbeSet(name, what, empty, "the trees have no numeric splits")
    if len(probes.frame) == 0:
        return ProbeSet(name, what, empty, f"no row could be built: {probes.summary()}")
    described = (
        "rows reaching each split, on its threshold and one float32 step either side "
        f"(in the columns the trees see); {probes.summary()}"
    )
    return ProbeSet(name, described, probes.frame, meta=probes.meta)


def build_probe_sets(
    holdout: pd.DataFrame,
    schema: FeatureSchema,
    *,
    estimator: Any = None,
    accepts_missing: bool | Collection[str],
    spec: ProbeSpec | None = None,
) -> list[ProbeSet]:
    """Build the probe sets ``spec.probes`` asks for, in :data:`PROBE_NAMES` order.

    Args:
        holdout: ``[N, F]`` rows the model was not trained on; every other set starts from them.
        schema: the model's input columns.
        estimator: the source model (tree thresholds come from it); None skips ``thresholds``.
        accepts_missing: where the source model predicts on a missing value: True (every
            column), False (none: ``missing`` is skipped) or the accepting columns' names
            (the ``missing`` set blanks only those).
        spec: sizes and seed.

    Raises:
        DataError: ``holdout`` has no rows.
    """
    spec = spec or ProbeSpec()
    if len(holdout) == 0:
        raise DataError("the rows to validate on are empty; pass a data file with rows")
    holdout = holdout[schema.names].reset_index(drop=True)
    empty = holdout.iloc[:0]
    # The generated sets start from complete rows, so that each one tests what it aims at
    # (missing values are the missing set's job); held-out rows with NaN stay in holdout.
    complete = holdout.dropna().reset_index(drop=True)
    base = complete if len(complete) else holdout
    sets: list[ProbeSet] = []
    for name in PROBE_NAMES:
        if name not in spec.probes:
            continue
        if name == "holdout":
            sets.append(ProbeSet(name, "the held-out rows, as given", holdout.copy()))
        elif name == "range":
            sets.append(
                ProbeSet(
                    name,
                    f"{spec.range_rows} random rows inside each feature's range (seed {spec.seed})",
                    _range_rows(base, schema, spec),
                )
            )
        elif name == "thresholds":
            sets.append(_thresholds_set(estimator, base, spec))
        elif name == "edge":
            if not _numeric_columns(schema):
                sets.append(ProbeSet(name, "edge values", empty, "no numeric columns"))
                continue
            frame, meta = _edge_rows(base, schema)
            values = ", ".join(f"{v:g}" for v in EDGE_VALUES)
            sets.append(ProbeSet(name, f"edge values {values} per feature", frame, meta=meta))
        elif name == "missing":
            columns = missing_columns(schema, accepts_missing)
            if not columns:
                sets.append(
                    ProbeSet(
                        name,
                        "NaN per column",
                        empty,
                        "the source model refuses missing values (NaN)",
                    )
                )
                continue
            frame, meta = _missing_rows(base, schema, spec, columns)
            described = "held-out rows with a missing value injected per column"
            refused = [n for n in schema.names if n not in set(columns)]
            if refused:
                described += (
                    f" ({len(columns)} of {len(schema.names)} columns; the source model "
                    f"refuses missing values in {preview_names(refused, limit=5)})"
                )
            sets.append(ProbeSet(name, described, frame, meta=meta))
        elif name == "strings":
            if not _string_columns(schema):
                sets.append(
                    ProbeSet(name, "unseen / empty / non-ASCII strings", empty, "no string columns")
                )
                continue
            frame, meta = _string_rows(base, schema)
            sets.append(
                ProbeSet(
                    name, "unseen, empty and non-ASCII values per string column", frame, meta=meta
                )
            )
        elif name == "categories":
            if not _string_columns(schema):
                sets.append(ProbeSet(name, "every known category", empty, "no string columns"))
                continue
            known = known_categories(estimator, schema, holdout)
            blank = [
                n for n in missing_columns(schema, accepts_missing) if n in _string_columns(schema)
            ]
            frame, meta = _category_rows(base, schema, known, blank)
            count = sum(len(v) for v in known.values())
            described = (
                f"each of {count} categories (the model's and the rows') per string column"
                + (", and every string column the model takes missing, missing" if blank else "")
            )
            sets.append(ProbeSet(name, described, frame, meta=meta))
        elif name == "batch":
            n = min(spec.batch_rows, len(holdout))
            sets.append(
                ProbeSet(
                    name,
                    f"{n} held-out rows scored one at a time and in one batch",
                    holdout.head(n).copy(),
                )
            )
    return sets
