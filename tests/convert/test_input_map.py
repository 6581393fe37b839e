"""Threshold probe rows land on the trees' thresholds through every invertible step.

The property is checked through public behaviour only: the probe rows convert builds
(:func:`onnxbridge.convert._precision.threshold_probes`) are pushed through the fitted steps in
front of the tree (``pipeline[:-1].transform``), and the column the tree splits on must read
the threshold (``on``) or one float32 step either side of it (``below`` / ``above``), as closely
as one float64 step of the input allows. Every scaler option, imputers that drop a column that
was entirely missing in training, plain Pipelines and ColumnTransformer branches are covered.
"""

from __future__ import annotations

import itertools
import warnings
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.compose import make_column_transformer
from sklearn.experimental import enable_iterative_imputer  # noqa: F401
from sklearn.impute import IterativeImputer, KNNImputer, SimpleImputer
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import (
    MaxAbsScaler,
    MinMaxScaler,
    Normalizer,
    RobustScaler,
    StandardScaler,
)
from sklearn.tree import DecisionTreeRegressor

from onnxbridge.convert._precision import threshold_probes

SCALERS: dict[str, Any] = {
    **{
        f"StandardScaler(with_mean={m}, with_std={s})": (
            lambda m=m, s=s: StandardScaler(with_mean=m, with_std=s)
        )
        for m, s in itertools.product([True, False], repeat=2)
    },
    **{
        f"RobustScaler(with_centering={c}, with_scaling={s})": (
            lambda c=c, s=s: RobustScaler(with_centering=c, with_scaling=s)
        )
        for c, s in itertools.product([True, False], repeat=2)
    },
    "MinMaxScaler()": MinMaxScaler,
    "MinMaxScaler(feature_range=(-1, 3))": lambda: MinMaxScaler(feature_range=(-1, 3)),
    "MinMaxScaler(clip=True)": lambda: MinMaxScaler(clip=True),
    "MaxAbsScaler()": MaxAbsScaler,
}

IMPUTERS: dict[str, Any] = {
    "SimpleImputer()": SimpleImputer,
    "SimpleImputer(keep_empty_features=True)": lambda: SimpleImputer(keep_empty_features=True),
    "KNNImputer()": KNNImputer,
    "KNNImputer(add_indicator=True)": lambda: KNNImputer(add_indicator=True),
    "IterativeImputer()": lambda: IterativeImputer(random_state=0),
}


def _frame(n: int = 300, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    """Columns ``e`` (entirely missing), ``a``, ``b`` (some missing) and ``c``."""
    rng = np.random.RandomState(seed)
    frame = pd.DataFrame(
        {
            "e": np.full(n, np.nan),
            "a": rng.normal(5, 2, size=n),
            "b": rng.normal(-300, 50, size=n),
            "c": rng.uniform(-1, 1, size=n),
        }
    )
    y = (frame["a"] > 5.3) * 2.0 + (frame["b"] > -290) + frame["c"]
    missing = rng.rand(n) < 0.1
    frame.loc[missing, "b"] = np.nan
    y += 3.0 * missing  # a reason to split on a missing-value indicator
    return frame, y.to_numpy()


def _fit(steps: Any, layout: str) -> Any:
    tree = DecisionTreeRegressor(max_depth=4, random_state=0)
    if layout == "pipeline":
        model = make_pipeline(*steps, tree)
    else:
        model = make_pipeline(
            make_column_transformer(
                ("passthrough", ["c"]), (make_pipeline(*steps), ["e", "a", "b"])
            ),
            tree,
        )
    frame, y = _frame()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Skipping features without any observed values"
        return model.fit(frame, y)


def _transform(model: Any, rows: pd.DataFrame) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.asarray(model[:-1].transform(rows), dtype=np.float64)


def _splits(tree: DecisionTreeRegressor) -> set[tuple[int, float]]:
    """``(column, threshold)`` of every split of a fitted tree, in the columns it sees."""
    nodes = zip(tree.tree_.feature, tree.tree_.threshold, strict=True)
    return {(int(f), float(t)) for f, t in nodes if f >= 0}


def _assert_rows_land(model: Any, behind: tuple[str, ...] = ()) -> None:
    """Every probe row lands on its threshold; every split is probed but those ``behind``."""
    frame, _ = _frame(seed=1)
    probes = threshold_probes(model, frame)
    assert probes is not None and len(probes.meta) == len(probes.frame) > 0
    splits = _splits(model[-1])
    seen = _transform(model, probes.frame)
    landed = set()
    for i, meta in enumerate(probes.meta):
        threshold, where, value = meta["threshold"], meta["where"], meta["value"]
        assert np.isfinite(value) or where == "missing", meta
        if where in ("below32", "above32"):
            assert float(np.float32(value)) == value, meta
            continue
        if where in ("missing", "present"):  # an indicator column: 1 when the input is missing
            columns = [f for f, t in splits if t == threshold]
            wanted = 1.0 if where == "missing" else 0.0
            assert any(seen[i, f] == wanted for f in columns), (meta, seen[i])
            landed.update((f, threshold) for f in columns)
            continue
        step = float(np.spacing(np.abs(np.float32(threshold))))
        target = {"below": threshold - step, "on": threshold, "above": threshold + step}[where]
        # The slope of the steps at this row, measured by moving the input one float64 step.
        nudged = probes.frame.iloc[[i]].copy()
        nudged[meta["feature"]] = np.nextafter(value, np.inf)
        moved = np.abs(_transform(model, nudged)[0] - seen[i])
        columns = [f for f, t in splits if t == threshold]
        gaps = [abs(seen[i, f] - target) - moved[f] - np.spacing(abs(target)) for f in columns]
        assert columns and min(gaps) <= 0, (meta, [seen[i, f] for f in columns])
        if where == "on":
            landed.update((f, threshold) for f in columns)
    # Every split is probed, except those counted as behind a step that cannot be inverted.
    assert len(splits) == probes.thresholds
    assert len(landed) == len(splits) - sum(probes.behind.values()), probes.behind
    assert set(probes.behind) <= set(behind)


@pytest.mark.parametrize("layout", ["pipeline", "column_transformer"])
@pytest.mark.parametrize("imputer", ["SimpleImputer()", "KNNImputer()"])
@pytest.mark.parametrize("scaler", list(SCALERS))
def test_rows_land_on_thresholds_behind_every_scaler(
    scaler: str, imputer: str, layout: str
) -> None:
    _assert_rows_land(_fit([IMPUTERS[imputer](), SCALERS[scaler]()], layout))


@pytest.mark.parametrize("layout", ["pipeline", "column_transformer"])
@pytest.mark.parametrize("imputer", list(IMPUTERS))
@pytest.mark.parametrize("scaler", ["StandardScaler(with_mean=True, with_std=True)", None])
def test_rows_land_on_thresholds_behind_imputers_that_drop_an_empty_column(
    scaler: str | None, imputer: str, layout: str
) -> None:
    steps = [IMPUTERS[imputer]()] + ([SCALERS[scaler]()] if scaler else [])
    # A scaled missing-value indicator is not carried back (only a raw one is).
    behind = ("StandardScaler",) if scaler and "add_indicator" in imputer else ()
    _assert_rows_land(_fit(steps, layout), behind)


def test_a_clipped_min_max_scaler_probes_only_thresholds_it_can_reach() -> None:
    # The tree was fitted on values outside the scaler's range (scaled without clipping):
    # thresholds beyond [0, 1] are never reached by a clipped column and get no rows.
    frame, y = _frame()
    complete = frame[["a", "c"]]
    scaler = MinMaxScaler(clip=True).fit(complete.iloc[:100])
    unclipped = MinMaxScaler().fit(complete.iloc[:100])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tree = DecisionTreeRegressor(max_depth=5, random_state=0)
        tree.fit(unclipped.transform(complete), y)
    model = make_pipeline(scaler, tree)
    thresholds = tree.tree_.threshold[tree.tree_.feature >= 0]
    assert (thresholds < 0).any() or (thresholds > 1).any()
    assert ((thresholds >= 0) & (thresholds <= 1)).any()
    frame_in = complete.copy()
    probes = threshold_probes(model, frame_in)
    assert probes is not None and len(probes.meta) > 0
    seen = _transform(model, probes.frame)
    splits = _splits(tree)
    landed = set()
    for i, meta in enumerate(probes.meta):
        if meta["where"] == "on":
            hits = [(f, t) for f, t in splits if t == meta["threshold"]]
            ulp = np.spacing(abs(meta["threshold"])) * 4
            assert any(abs(seen[i, f] - t) <= ulp for f, t in hits), meta
            landed.update(hits)
    assert landed == {(f, t) for f, t in splits if 0 <= t <= 1}


def test_a_normalizer_is_not_carried_back() -> None:
    # Normalizer divides each row by its norm: not a per-column map, so no rows are made.
    model = _fit([SimpleImputer(), Normalizer()], "pipeline")
    frame, _ = _frame(seed=1)
    probes = threshold_probes(model, frame)
    assert probes is not None and len(probes.frame) == 0
    assert probes.behind == {"Normalizer": probes.thresholds} and probes.thresholds > 0
