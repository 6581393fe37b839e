"""precision="auto": probe rows at the split thresholds decide between float32 and float64."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd
import pytest
from lightgbm import LGBMRegressor
from sklearn.decomposition import PCA
from sklearn.ensemble import (
    HistGradientBoostingClassifier,
    HistGradientBoostingRegressor,
    RandomForestClassifier,
)
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.tree import DecisionTreeRegressor
from xgboost import XGBClassifier

from onnxbridge import convert_estimator
from onnxbridge.convert._precision import find_tree_ensemble, threshold_probe_rows
from onnxbridge.convert._tree_ensemble import floor_float32
from onnxbridge.errors import ConversionError

# Float32 graphs that differ from scikit-learn on purpose: convert returns them only with
# allow_divergent, and warns.
pytestmark = pytest.mark.filterwarnings("ignore:NOT CHECKED:UserWarning")


NOTE = (
    r"^(switched to double|kept float) precision: (\d[\d ]*) of (\d[\d ]*) probe rows "
    r"\(\d[\d ]* at split thresholds\) flipped in float32"
)


def _run(result: Any, rows: np.ndarray) -> np.ndarray:
    import onnxruntime as ort

    session = ort.InferenceSession(result.model.SerializeToString())
    return session.run(None, {session.get_inputs()[0].name: rows})[0]


def _large(n: int = 1200, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.RandomState(seed)
    X = 1e6 + rng.rand(n, 3) * 50
    return X, ((X[:, 0] - 1e6) % 5 > 2.5).astype(int)


def test_floor_float32_rounds_down_and_keeps_float32_values() -> None:
    values = np.array([1e6 + 0.01, 1e6 + 0.0625, -1e6 - 0.01, 0.1, 1e300, -1e300])
    floors = floor_float32(values).astype(np.float64)
    assert np.all(floors[:4] <= values[:4])
    assert np.all(np.nextafter(floors[:4].astype(np.float32), np.float32(np.inf)) > values[:4])
    assert floors[1] == values[1]  # a float32 value stays as it is
    assert floors[4] == np.finfo(np.float32).max and floors[5] == -np.inf


def test_probe_rows_sit_on_each_threshold_and_one_float32_step_either_side() -> None:
    X, y = _large(300)
    model = DecisionTreeRegressor(max_depth=4, random_state=0).fit(X, y.astype(float))
    spec = find_tree_ensemble(model)
    rows = threshold_probe_rows(spec, X[:10])
    tree = model.tree_
    inner = np.flatnonzero(tree.children_left >= 0)
    assert rows.shape == (3 * len(inner), 3)
    paths = model.decision_path(rows).toarray()
    for number, node in enumerate(inner):  # one node per distinct threshold, in node order
        below, at, above = rows[3 * number : 3 * number + 3]
        f, t = tree.feature[node], tree.threshold[node]
        step = float(np.spacing(np.float32(t)))
        assert (below[f], at[f], above[f]) == (t - step, t, t + step)
        # The row really reaches the node it probes.
        assert paths[3 * number + 1, node] == 1, f"node {node} not reached"


def test_probe_rows_are_capped() -> None:
    X, y = _large(2000)
    model = RandomForestClassifier(n_estimators=30, random_state=0).fit(X, y)
    rows = threshold_probe_rows(find_tree_ensemble(model), X[:5], max_rows=600)
    assert rows.shape == (600, 3)


def test_auto_switches_to_double_when_float32_flips_and_says_so() -> None:
    X, y = _large()
    model = HistGradientBoostingClassifier(max_iter=30, random_state=0).fit(X, y)
    result = convert_estimator(model, X[:40])
    assert result.precision == "double"
    assert len(result.notes) == 1 and result.notes[0].startswith("switched to double precision")
    assert result.model.graph.input[0].type.tensor_type.elem_type == 11  # DOUBLE
    match = re.match(NOTE, result.notes[0])
    assert match, result.notes[0]
    flipped, total = (int(v.replace(" ", "")) for v in match.group(2, 3))
    assert 0 < flipped < total


def test_auto_keeps_float_for_models_that_compare_in_float32() -> None:
    X, y = _large()
    for model in (
        RandomForestClassifier(n_estimators=20, random_state=0),
        XGBClassifier(n_estimators=30, n_jobs=1),
    ):
        model.fit(X, y)
        result = convert_estimator(model, X[:40])
        assert result.precision == "float", result.notes
        assert result.notes[0].startswith("kept float precision: 0 of"), result.notes


@pytest.mark.parametrize(
    "make", [HistGradientBoostingRegressor, LGBMRegressor], ids=["HGB", "LGBM"]
)
def test_auto_says_what_float_keeps_for_models_that_compare_in_float64(make) -> None:
    # Whole-number features: the thresholds are float32 values and the probes cannot flip, but
    # a float64 value just above one (7.5000001 rounds to 7.5 in float32) goes the other way.
    rng = np.random.RandomState(0)
    X = rng.randint(0, 20, size=(400, 3)).astype(np.float64)
    y = X[:, 0] * 2 + (X[:, 1] > 7) * 5 + rng.rand(400)
    options = {"verbose": -1, "n_jobs": 1} if make is LGBMRegressor else {"random_state": 0}
    model = make(**options).fit(X, y)
    result = convert_estimator(model, X[:50])
    assert result.precision == "float"
    (note,) = result.notes
    assert note.startswith("kept float precision: 0 of")
    assert "the model compares in float64" in note and "precision double is exact" in note
    rows = np.column_stack([np.full(4, 7.0), [7.5000001, 6.5000001, 7.4999999, 7.5], np.ones(4)])
    float_graph = _run(result, rows.astype(np.float32)).ravel()
    double_graph = _run(convert_estimator(model, X[:50], precision="double"), rows).ravel()
    expected = model.predict(rows)
    assert np.any(np.abs(float_graph - expected) > 1.0)
    np.testing.assert_allclose(double_graph, expected, rtol=1e-9)


def test_auto_leaves_models_without_trees_alone() -> None:
    X, y = _large()
    X = X - 1e6  # near 0, where float32 keeps a linear model's answers
    model = make_pipeline(StandardScaler(), LogisticRegression()).fit(X, y)
    result = convert_estimator(model, X[:40], fold=False)
    assert result.precision == "float" and result.notes == []


def test_auto_probes_through_an_invertible_pipeline() -> None:
    X, _ = _large()
    model = make_pipeline(StandardScaler(), LGBMRegressor(n_estimators=30, verbose=-1, n_jobs=1))
    model.fit(X, (X[:, 0] - 1e6) % 5)
    result = convert_estimator(model, X[:40])
    assert result.precision == "double"
    note = result.notes[0]
    assert "at split thresholds" in note and "skipped" not in note


def test_auto_says_when_a_step_cannot_be_inverted() -> None:
    X, _ = _large()
    model = make_pipeline(PCA(n_components=3), HistGradientBoostingRegressor(max_iter=10))
    model.fit(X, (X[:, 0] - 1e6) % 5)
    result = convert_estimator(model, X[:40], allow_divergent=True)
    assert result.precision == "double"
    assert re.search(
        r"; 0 of (\d+) thresholds probed; \1 behind steps that cannot be inverted \(PCA\)$",
        result.notes[0],
    ), result.notes[0]


def test_explicit_precisions_are_not_probed() -> None:
    X, y = _large()
    model = HistGradientBoostingClassifier(max_iter=10, random_state=0).fit(X, y)
    for precision in ("float", "double"):
        result = convert_estimator(model, X[:40], precision=precision, allow_divergent=True)
        probed = [n for n in result.notes if not n.startswith("NOT CHECKED")]
        assert result.precision == precision and probed == []


def test_unknown_precision_is_refused() -> None:
    X, y = _large(100)
    model = DecisionTreeRegressor(max_depth=2).fit(X, y)
    with pytest.raises(ConversionError, match=r"precision='half' is not supported; use one of"):
        convert_estimator(model, X[:5], precision="half")


def test_double_pipeline_with_an_imputer_is_exact_on_missing_values() -> None:
    """ONNX Runtime has no float64 Imputer: the double graph uses IsNaN/Where with the float64
    statistics (skl2onnx's Imputer holds them as float32, off by up to 0.03 around 1e6)."""
    from lightgbm import LGBMClassifier
    from sklearn.impute import SimpleImputer

    from onnxbridge import Predictor

    X, y = _large(800)
    X[::7, 1] = np.nan
    model = make_pipeline(
        SimpleImputer(), StandardScaler(), LGBMClassifier(n_estimators=30, verbose=-1, n_jobs=1)
    ).fit(X[:400], y[:400])
    result = convert_estimator(model, X[:50])
    assert result.precision == "double"
    assert "Imputer" not in {n.op_type for n in result.model.graph.node}
    predictor = Predictor(result.model.SerializeToString())
    label, proba = predictor.run(predictor.prepare(X[400:]))
    np.testing.assert_array_equal(label, model.predict(X[400:]))
    np.testing.assert_allclose(proba, model.predict_proba(X[400:]), atol=1e-12)


def _mixed(n: int = 400, seed: int = 0, offset: float = 0.0) -> tuple[pd.DataFrame, np.ndarray]:
    """Numeric, boolean and text columns with missing values; ``offset`` moves ``a``."""
    rng = np.random.RandomState(seed)
    frame = pd.DataFrame(
        {
            "a": offset + rng.rand(n) * 3,
            "b": rng.normal(size=n),
            "flag": rng.rand(n) < 0.5,
            "city": rng.choice(["Lyon", "Paris", "Nice"], n).astype(object),
        }
    )
    y = np.sin((frame["a"] - offset) * 7) + frame["b"] + (frame["city"] == "Lyon")
    frame.loc[rng.rand(n) < 0.05, "b"] = np.nan
    frame.loc[rng.rand(n) < 0.05, "city"] = None
    return frame, y.to_numpy()


def _scaled_and_encoded(*columns: tuple, scale: bool = True) -> Any:
    from sklearn.compose import make_column_transformer
    from sklearn.impute import SimpleImputer
    from sklearn.preprocessing import OneHotEncoder

    return make_column_transformer(
        (
            make_pipeline(SimpleImputer(strategy="median"), *([StandardScaler()] if scale else [])),
            ["a", "b", "flag"],
        ),
        (
            make_pipeline(
                SimpleImputer(strategy="constant", fill_value="missing"),
                OneHotEncoder(handle_unknown="ignore"),
            ),
            ["city"],
        ),
        *columns,
    )


def test_auto_probes_thresholds_behind_a_column_transformer_and_keeps_float() -> None:
    # As --preprocess auto builds it for trees: imputed numbers, one-hot encoded text.
    frame, y = _mixed()
    model = make_pipeline(
        _scaled_and_encoded(scale=False), RandomForestClassifier(n_estimators=10, random_state=0)
    ).fit(frame, y > 1)
    result = convert_estimator(model, frame.head(40))
    assert result.precision == "float", result.notes
    match = re.match(NOTE + r"; (\d+) of \4 thresholds probed$", result.notes[0])
    assert match and match.group(2) == "0" and int(match.group(4)) > 50, result.notes


def test_auto_goes_double_when_float32_flips_behind_a_standard_scaler() -> None:
    # Around 1e6 a float32 step is 0.0625: the scaled column moves across splits.
    frame, y = _mixed(offset=1e6)
    model = make_pipeline(
        _scaled_and_encoded(), LGBMRegressor(n_estimators=30, verbose=-1, n_jobs=1)
    ).fit(frame, y)
    result = convert_estimator(model, frame.head(40))
    assert result.precision == "double"
    match = re.match(NOTE, result.notes[0])
    assert match and match.group(1) == "switched to double", result.notes
    assert int(match.group(2).replace(" ", "")) > 0 and "skipped" not in result.notes[0]


def test_auto_prefers_double_when_some_thresholds_sit_behind_a_step_it_cannot_invert() -> None:
    from sklearn.compose import make_column_transformer
    from sklearn.preprocessing import OneHotEncoder

    frame, y = _mixed()
    frame = frame.fillna({"b": 0.0, "city": "Lyon"})
    encode = make_column_transformer(
        (PCA(n_components=1), ["a", "b"]),
        (OneHotEncoder(handle_unknown="ignore"), ["city"]),
        remainder="passthrough",
    )
    model = make_pipeline(encode, RandomForestClassifier(n_estimators=5, random_state=0))
    model.fit(frame, y > 1)
    result = convert_estimator(model, frame.head(30))
    assert result.precision == "double"
    note = result.notes[0]
    assert note.startswith("switched to double precision: 0 of"), note
    assert "float32 could not be shown to keep the trees' decisions" in note
    match = re.search(
        r"; (\d+) of (\d+) thresholds probed; (\d+) behind steps that cannot be inverted "
        r"\(PCA\)$",
        note,
    )
    assert match, note
    probed, total, behind = map(int, match.groups())
    assert probed > 0 and behind > 0 and probed + behind == total


@pytest.mark.parametrize("labels", ["bool", "float"])
def test_boolean_and_float_labels_are_not_counted_as_flips(labels: str) -> None:
    """The graph writes True / 2.0 classes as int64; they are the same labels, not flips."""
    import pandas as pd
    from sklearn.ensemble import RandomForestClassifier

    from onnxbridge import convert_estimator

    rng = np.random.RandomState(0)
    X = pd.DataFrame({"a": rng.rand(300), "b": rng.rand(300)})
    y = X["a"] > 0.3 if labels == "bool" else (X["a"] > 0.3).astype(float) + 1.0
    model = RandomForestClassifier(n_estimators=5, random_state=0).fit(X, y)
    result = convert_estimator(model, X.head(50))
    assert result.precision == "float"
    assert any(note.startswith("kept float precision: 0 of") for note in result.notes)
