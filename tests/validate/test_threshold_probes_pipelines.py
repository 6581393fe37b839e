"""The ``thresholds`` probe set reaches trees behind transformers, and CatBoost's trees.

A tree behind a ColumnTransformer splits on transformed columns; its thresholds are carried back
to the input columns (scalers inverted, imputers and passthrough as they are, one-hot columns as
categories), so the rows land on the thresholds the trees see.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.compose import make_column_transformer
from sklearn.decomposition import PCA
from sklearn.ensemble import BaggingClassifier, HistGradientBoostingRegressor
from sklearn.impute import SimpleImputer
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler
from sklearn.tree import DecisionTreeClassifier

from onnxbridge import convert_bundle, train_bundle, validate_bundle
from onnxbridge.data import FeatureSchema
from onnxbridge.validate import check_golden, write_golden
from onnxbridge.validate._probes import ProbeSpec, build_probe_sets, tree_thresholds


def _mixed(n: int = 500, seed: int = 0) -> pd.DataFrame:
    rng = np.random.RandomState(seed)
    frame = pd.DataFrame(
        {
            "a": rng.normal(size=n),
            "b": rng.normal(1000, 300, size=n),
            "count": rng.randint(0, 5, size=n),
            "flag": rng.rand(n) < 0.5,
            "city": rng.choice(["Lyon", "Paris", "Nice"], size=n).astype(object),
        }
    )
    score = frame["a"] + (frame["b"] - 1000) / 300 + (frame["city"] == "Lyon")
    frame.loc[rng.rand(n) < 0.05, "a"] = np.nan
    frame.loc[rng.rand(n) < 0.05, "city"] = None
    frame["y"] = (score > 0.3).astype(int)
    return frame


@pytest.fixture(scope="module")
def mixed_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("mixed") / "mixed.csv"
    _mixed().to_csv(path, index=False)
    return path


@pytest.fixture(scope="module")
def numeric_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("numeric") / "numeric.csv"
    _mixed()[["a", "b", "count", "y"]].dropna().to_csv(path, index=False)
    return path


@pytest.mark.parametrize(
    "spec",
    [
        "RandomForestClassifier(n_estimators=10, random_state=0)",
        "HistGradientBoostingClassifier(max_iter=20, random_state=0)",
        "LGBMClassifier(n_estimators=20, verbose=-1)",
    ],
)
def test_preprocess_auto_trees_are_threshold_probed(
    spec: str, mixed_csv: Path, tmp_path: Path
) -> None:
    bundle, _ = train_bundle(str(mixed_csv), spec, tmp_path / "b", target="y", preprocess="auto")
    result = convert_bundle(bundle)
    (note,) = [n for n in result.notes if "probe rows" in n]
    assert "at split thresholds" in note and "skipped" not in note, note
    assert "thresholds probed" in note and "cannot be inverted" not in note, note
    report = validate_bundle(bundle, write_report=False)
    thresholds = report.probe_set("thresholds")
    assert thresholds.skipped is None and thresholds.n_rows > 0
    assert thresholds.ok and report.verdict == "EQUIVALENT", report.failing_probe_sets


def test_catboost_on_a_numeric_table_is_threshold_probed(numeric_csv: Path, tmp_path: Path) -> None:
    pytest.importorskip("catboost")
    bundle, _ = train_bundle(
        str(numeric_csv), "CatBoostClassifier(iterations=50, verbose=0)", tmp_path / "b", target="y"
    )
    convert_bundle(bundle)
    report = validate_bundle(bundle, write_report=False)
    thresholds = report.probe_set("thresholds")
    assert thresholds.skipped is None and thresholds.n_rows > 0
    assert "thresholds probed" in thresholds.description
    assert report.verdict == "EQUIVALENT", report.failing_probe_sets


def _scaled_model(frame: pd.DataFrame, *extra: tuple) -> object:
    encode = make_column_transformer(
        (make_pipeline(SimpleImputer(strategy="median"), StandardScaler()), ["a", "b", "count"]),
        (
            make_pipeline(
                SimpleImputer(strategy="constant", fill_value="missing"),
                OneHotEncoder(handle_unknown="ignore"),
            ),
            ["city"],
        ),
        *extra,
    )
    model = make_pipeline(encode, HistGradientBoostingRegressor(max_iter=10, random_state=0))
    return model.fit(frame.drop(columns="y"), frame["y"])


def test_rows_land_on_thresholds_behind_a_standard_scaler() -> None:
    frame = _mixed()
    model = _scaled_model(frame)
    holdout = frame.drop(columns="y")
    (probe,) = build_probe_sets(
        holdout,
        FeatureSchema.from_frame(holdout),
        estimator=model,
        accepts_missing=True,
        spec=ProbeSpec(probes=("thresholds",)),
    )
    assert probe.skipped is None and len(probe.frame) == len(probe.meta) > 0
    seen = model[:-1].transform(probe.frame)
    names = list(model[:-1].get_feature_names_out())
    scaler = model[0].named_transformers_["pipeline-1"][-1]
    wheres = set()
    for i, meta in enumerate(probe.meta):
        wheres.add(meta["where"])
        threshold = meta["threshold"]
        if meta["feature"] == "city":
            assert meta["where"] in ("category", "other")
            assert probe.frame["city"].iloc[i] == meta["value"]
            continue
        column = seen[i, names.index(f"pipeline-1__{meta['feature']}")]
        step = float(np.spacing(np.abs(np.float32(threshold))))
        target = {"below": threshold - step, "on": threshold, "above": threshold + step}
        if meta["where"] in target:
            # As close as float64 allows: one float64 step of the input, scaled, at most.
            slope = 1 / scaler.scale_[["a", "b", "count"].index(meta["feature"])]
            allowed = np.spacing(abs(meta["value"])) * slope + np.spacing(abs(threshold))
            gap = abs(column - target[meta["where"]])
            assert gap <= allowed, (meta, column)
        else:  # the float32 neighbours of the input value on the threshold
            assert meta["where"] in ("below32", "above32")
            assert float(np.float32(meta["value"])) == meta["value"]
    assert {"below", "on", "above", "below32", "above32"} <= wheres


def test_thresholds_behind_a_step_that_cannot_be_inverted_are_counted() -> None:
    frame = _mixed().fillna({"a": 0.0, "city": "Lyon"})
    encode = make_column_transformer(
        (PCA(n_components=1), ["a", "b"]),
        (OneHotEncoder(handle_unknown="ignore"), ["city"]),
        remainder="passthrough",
    )
    model = make_pipeline(encode, HistGradientBoostingRegressor(max_iter=10, random_state=0))
    X = frame.drop(columns="y")
    model.fit(X, frame["y"])
    (probe,) = build_probe_sets(
        X,
        FeatureSchema.from_frame(X),
        estimator=model,
        accepts_missing=True,
        spec=ProbeSpec(probes=("thresholds",)),
    )
    assert probe.skipped is None and len(probe.frame) > 0
    assert "behind steps that cannot be inverted (PCA)" in probe.description
    assert {m["feature"] for m in probe.meta} <= {"city", "count", "flag"}


def test_bagging_on_feature_subsets_keeps_its_thresholds() -> None:
    frame = _mixed().dropna()
    X = frame[["a", "b", "count"]]
    model = BaggingClassifier(n_estimators=5, max_features=2, random_state=0).fit(X, frame["y"])
    splits = tree_thresholds(model)
    expected = {
        (int(columns[f]), float(t))
        for tree, columns in zip(model.estimators_, model.estimators_features_, strict=True)
        for f, t, left in zip(
            tree.tree_.feature, tree.tree_.threshold, tree.tree_.children_left, strict=True
        )
        if left >= 0
    }
    assert {(s.feature, s.threshold) for s in splits} == expected


@pytest.mark.parametrize(
    "spec",
    [
        "LGBMClassifier(n_estimators=20, verbose=-1)",
        "HistGradientBoostingClassifier(max_iter=20, random_state=0)",
    ],
)
def test_native_text_categories_are_threshold_probed(
    spec: str, mixed_csv: Path, tmp_path: Path
) -> None:
    # The models split on the text column themselves: threshold rows keep it text.
    bundle, _ = train_bundle(str(mixed_csv), spec, tmp_path / "b", target="y")
    result = convert_bundle(bundle)
    (note,) = [n for n in result.notes if "probe rows" in n]
    assert "at split thresholds" in note and "skipped" not in note, note
    write_golden(bundle)
    assert check_golden(bundle).ok
    report = validate_bundle(bundle, write_report=False)
    thresholds = report.probe_set("thresholds")
    assert thresholds.skipped is None and thresholds.n_rows > 0
    assert report.verdict == "EQUIVALENT", report.failing_probe_sets


def test_tree_thresholds_behind_a_scaler_that_does_not_center() -> None:
    # StandardScaler(with_mean=False) fits mean_ but only divides by scale_.
    rng = np.random.RandomState(0)
    frame = pd.DataFrame({"a": rng.normal(5, 2, size=400)})
    model = make_pipeline(StandardScaler(with_mean=False), DecisionTreeClassifier(max_depth=1))
    model.fit(frame, (frame["a"] > 5.3).astype(int))
    (split,) = tree_thresholds(model)
    (tree_threshold,) = model[-1].tree_.threshold[model[-1].tree_.feature >= 0]
    landed = model[0].transform(pd.DataFrame({"a": [split.threshold]}))[0, 0]
    assert split.feature == 0 and abs(landed - tree_threshold) <= 4 * np.spacing(tree_threshold)
    assert abs(split.threshold - 5.3) < 0.1


@pytest.mark.parametrize("imputer", ["KNNImputer", "IterativeImputer"])
def test_tree_thresholds_behind_an_imputer_that_drops_an_empty_column(imputer: str) -> None:
    # Column e is entirely missing in training: the imputer drops it, so the tree's column 1
    # is input column b (position 2), not a.
    from sklearn.experimental import enable_iterative_imputer  # noqa: F401
    from sklearn.impute import IterativeImputer, KNNImputer

    rng = np.random.RandomState(0)
    frame = pd.DataFrame(
        {"e": np.full(300, np.nan), "a": rng.normal(size=300), "b": rng.normal(size=300)}
    )
    step = KNNImputer() if imputer == "KNNImputer" else IterativeImputer(random_state=0)
    model = make_pipeline(step, DecisionTreeClassifier(max_depth=1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # IterativeImputer: "Skipping features without any ..."
        model.fit(frame, (frame["b"] > 0.2).astype(int))
        assert model[0].transform(frame).shape == (300, 2)
    (split,) = tree_thresholds(model)
    assert model[-1].tree_.feature[0] == 1
    assert split.feature == 2 and abs(split.threshold - 0.2) < 0.1
