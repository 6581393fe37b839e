"""Probe sets: what each generator builds, tree walking for every supported family, options."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import (
    GradientBoostingRegressor,
    HistGradientBoostingClassifier,
    RandomForestClassifier,
)
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.tree import DecisionTreeRegressor

from onnxbridge.data import FeatureSchema
from onnxbridge.errors import DataError
from onnxbridge.validate._probes import (
    EDGE_VALUES,
    STRING_VALUES,
    ProbeSpec,
    build_probe_sets,
    tree_thresholds,
)


@pytest.fixture(scope="module")
def data() -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.RandomState(0)
    frame = pd.DataFrame(rng.rand(120, 3) * [1, 10, 100], columns=["a", "b", "c"])
    return frame, (frame["a"] + frame["b"] / 10 > 1).astype(int).to_numpy()


def _by_name(sets):
    return {s.name: s for s in sets}


def test_thresholds_are_walked_for_every_tree_family(data) -> None:
    X, y = data
    tree = DecisionTreeRegressor(max_depth=3, random_state=0).fit(X, y)
    expected = sorted(
        (int(f), float(t))
        for f, t, left in zip(
            tree.tree_.feature, tree.tree_.threshold, tree.tree_.children_left, strict=True
        )
        if left >= 0
    )
    assert [(s.feature, s.threshold) for s in tree_thresholds(tree)] == sorted(set(expected))
    for model in (
        RandomForestClassifier(n_estimators=3, max_depth=2, random_state=0),
        GradientBoostingRegressor(n_estimators=3, max_depth=2, random_state=0),
        HistGradientBoostingClassifier(max_iter=3, random_state=0),
    ):
        splits = tree_thresholds(model.fit(X, y))
        assert splits and all(0 <= s.feature < 3 and s.left_is_le for s in splits), model
    assert tree_thresholds(LogisticRegression().fit(X, y)) is None
    # A tree behind a scaler sees scaled columns: its thresholds are carried back to the input.
    scaled = make_pipeline(StandardScaler(), DecisionTreeRegressor(max_depth=3, random_state=0))
    scaled.fit(X, y)
    inner = scaled[-1].tree_
    split = inner.children_left >= 0
    scaler = scaled[0]
    expected = sorted(
        (int(f), float(t * scaler.scale_[f] + scaler.mean_[f]))
        for f, t in zip(inner.feature[split], inner.threshold[split], strict=True)
    )
    found = [(s.feature, s.threshold) for s in tree_thresholds(scaled)]
    assert [f for f, _ in found] == [f for f, _ in expected]
    np.testing.assert_allclose([t for _, t in found], [t for _, t in expected], rtol=1e-15)
    assert tree_thresholds(make_pipeline(tree).fit(X, y))


def test_booster_thresholds(data) -> None:
    xgboost = pytest.importorskip("xgboost")
    lightgbm = pytest.importorskip("lightgbm")
    X, y = data
    xgb = xgboost.XGBClassifier(n_estimators=3, max_depth=2, random_state=0).fit(X, y)
    splits = tree_thresholds(xgb)
    assert splits and all(0 <= s.feature < 3 and not s.left_is_le for s in splits)
    lgbm = lightgbm.LGBMClassifier(n_estimators=3, num_leaves=4, verbose=-1).fit(X, y)
    splits = tree_thresholds(lgbm)
    assert splits and all(0 <= s.feature < 3 and s.left_is_le for s in splits)


def test_threshold_rows_sit_on_and_beside_each_split(data) -> None:
    X, y = data
    tree = DecisionTreeRegressor(max_depth=2, random_state=0).fit(X, y)
    (probe,) = build_probe_sets(
        X,
        FeatureSchema.from_frame(X),
        estimator=tree,
        accepts_missing=False,
        spec=ProbeSpec(probes=("thresholds",)),
    )
    splits = tree_thresholds(tree)
    assert len(probe.frame) == 3 * len(splits) == len(probe.meta)
    probed = set()
    paths = tree.decision_path(probe.frame).toarray()
    for i in range(0, len(probe.frame), 3):
        meta = probe.meta[i : i + 3]
        assert [m["where"] for m in meta] == ["below", "on", "above"]
        name, threshold = meta[0]["feature"], meta[0]["threshold"]
        step = float(np.spacing(np.abs(np.float32(threshold))))
        below, on, above = probe.frame[name].iloc[i : i + 3]
        assert (below, on, above) == (threshold - step, threshold, threshold + step)
        # The row on the threshold reaches a node that tests it.
        (_node,) = [
            n
            for n in np.flatnonzero(paths[i + 1])
            if tree.tree_.threshold[n] == threshold and X.columns[tree.tree_.feature[n]] == name
        ]
        probed.add((list(X.columns).index(name), threshold))
    assert probed == {(s.feature, s.threshold) for s in splits}


def test_edge_missing_range_and_batch_rows(data) -> None:
    X, _ = data
    schema = FeatureSchema.from_frame(X)
    sets = _by_name(build_probe_sets(X, schema, accepts_missing=True))
    edge = sets["edge"].frame
    assert len(edge) == (3 + 1) * len(EDGE_VALUES)
    assert np.signbit(edge["a"].iloc[1]) and edge["a"].iloc[1] == 0  # -0.0 kept
    assert (edge.iloc[-1] == -1e30).all()  # all features at once
    missing = sets["missing"].frame
    assert len(missing) == 3 * 20 + 1
    assert missing["a"].iloc[:20].isna().all() and not missing["b"].iloc[:20].isna().any()
    assert missing.iloc[-1].isna().all()
    ranged = sets["range"].frame
    assert len(ranged) == 200
    assert ranged["c"].between(X["c"].min(), X["c"].max()).all()
    assert len(sets["batch"].frame) == 20
    assert sets["thresholds"].skipped == "not a tree model onnxbridge reads"
    assert sets["strings"].skipped == "no string columns"
    refused = _by_name(build_probe_sets(X, schema, accepts_missing=False))["missing"]
    assert refused.skipped == "the source model refuses missing values (NaN)"


def test_strings_rows_for_text_columns() -> None:
    frame = pd.DataFrame({"x": [1.0, 2.0, 3.0], "city": ["Paris", "Lyon", "Paris"]})
    schema = FeatureSchema.from_frame(frame.astype({"city": object}))
    (strings,) = build_probe_sets(
        frame, schema, accepts_missing=False, spec=ProbeSpec(probes=("strings",))
    )
    assert list(strings.frame["city"]) == list(STRING_VALUES)
    assert [m["value"] for m in strings.meta] == list(STRING_VALUES)


def test_seeds_and_sizes(data) -> None:
    X, _ = data
    schema = FeatureSchema.from_frame(X)

    def ranged(seed: int) -> pd.DataFrame:
        spec = ProbeSpec(probes=("range",), seed=seed, range_rows=7)
        return build_probe_sets(X, schema, accepts_missing=False, spec=spec)[0].frame

    pd.testing.assert_frame_equal(ranged(1), ranged(1))
    assert len(ranged(1)) == 7 and not ranged(1).equals(ranged(2))


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"probes": ("holdout", "magic")}, r"unknown probe set 'magic'; choose from holdout"),
        ({"range_rows": 0}, r"range_rows=0 is not allowed: it must be an integer >= 1"),
        ({"batch_rows": 2.5}, r"batch_rows=2.5 is not allowed: it must be an integer >= 1"),
    ],
)
def test_bad_spec(kwargs, pattern) -> None:
    with pytest.raises(DataError, match=pattern):
        ProbeSpec(**kwargs)


def test_no_rows(data) -> None:
    X, _ = data
    with pytest.raises(DataError, match=r"the rows to validate on are empty"):
        build_probe_sets(X.iloc[:0], FeatureSchema.from_frame(X), accepts_missing=False)


def test_categories_rows_hold_every_category_the_model_knows() -> None:
    from sklearn.compose import make_column_transformer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder

    train = pd.DataFrame(
        {"x": [1.0, 2.0, 3.0, 4.0], "city": ["Paris", "Lyon", "Köln", "Paris"]}
    ).astype({"city": object})
    model = make_pipeline(
        make_column_transformer(
            (OneHotEncoder(handle_unknown="ignore"), ["city"]), remainder="passthrough"
        ),
        LogisticRegression(),
    ).fit(train, [0, 1, 1, 0])
    # The held-out rows never show "Köln" nor "Nice"; the model knows the first.
    holdout = pd.DataFrame({"x": [1.5, 2.5], "city": ["Paris", "Nice"]}).astype({"city": object})
    schema = FeatureSchema.from_frame(holdout)
    (categories,) = build_probe_sets(
        holdout,
        schema,
        estimator=model,
        accepts_missing=True,
        spec=ProbeSpec(probes=("categories",)),
    )
    values = [m["value"] for m in categories.meta]
    assert sorted(v for v in values if v is not None) == ["Köln", "Lyon", "Nice", "Paris"]
    assert values[-1] is None and categories.frame["city"].iloc[-1] is None
    assert list(categories.frame["city"].iloc[:-1]) == values[:-1]
    assert "each of 4 categories" in categories.description


def test_categories_skipped_without_string_columns(data) -> None:
    X, _ = data
    schema = FeatureSchema.from_frame(X)
    (categories,) = build_probe_sets(
        X, schema, accepts_missing=False, spec=ProbeSpec(probes=("categories",))
    )
    assert categories.skipped == "no string columns" and categories.frame.empty


def test_a_column_with_no_value_builds_every_probe_set_without_warnings() -> None:
    import warnings

    X = pd.DataFrame({"a": [np.nan] * 5, "b": np.arange(5.0)})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's "All-NaN slice" warning must not arise
        sets = _by_name(build_probe_sets(X, FeatureSchema.from_frame(X), accepts_missing=True))
    assert sets["range"].frame["a"].isna().all()
    assert sets["range"].frame["b"].between(0, 4).all()
