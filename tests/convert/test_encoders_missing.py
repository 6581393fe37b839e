"""Missing text values reach the encoders as scikit-learn treats NaN: the NaN category when the
encoder was fitted with one, an unknown value otherwise — whatever the encoder's options."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, OrdinalEncoder, StandardScaler, TargetEncoder

from onnxbridge import OnnxbridgeError, Predictor, convert_estimator

ENCODERS = {
    "onehot-ignore": lambda: OneHotEncoder(handle_unknown="ignore"),
    "onehot-infrequent": lambda: OneHotEncoder(
        handle_unknown="infrequent_if_exist", min_frequency=8, sparse_output=False
    ),
    "onehot-drop-first": lambda: OneHotEncoder(drop="first", handle_unknown="ignore"),
    "onehot-drop-if-binary": lambda: OneHotEncoder(drop="if_binary", handle_unknown="ignore"),
    "onehot-error": lambda: OneHotEncoder(),
    "ordinal-default": lambda: OrdinalEncoder(),
    "ordinal-encoded-value": lambda: OrdinalEncoder(
        handle_unknown="use_encoded_value", unknown_value=-1
    ),
    "ordinal-unknown-nan": lambda: OrdinalEncoder(
        handle_unknown="use_encoded_value", unknown_value=np.nan
    ),
    "ordinal-missing-set": lambda: OrdinalEncoder(
        handle_unknown="use_encoded_value", unknown_value=-1, encoded_missing_value=-2
    ),
    "target": lambda: TargetEncoder(random_state=0),
}
# What a missing text value may arrive as: all three are a missing value to onnxbridge.
MISSING = [None, np.nan, ""]


def _training(with_nan: bool) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.RandomState(0)
    n = 200
    frame = pd.DataFrame(
        {
            # "nan" is a real category here: it must not be taken for the missing one.
            "city": rng.choice(
                ["paris", "rome", "oslo", "nan", "lima"], n, p=[0.4, 0.3, 0.2, 0.07, 0.03]
            ),
            "job": rng.choice(["x", "y"], n),
        }
    ).astype(object)
    if with_nan:
        frame.loc[rng.rand(n) < 0.15, "city"] = np.nan
    y = (frame["city"].isna() | (frame["job"] == "x")).to_numpy().astype(int)
    return frame, y


def _probe_rows(missing: object, *, unknown: bool) -> pd.DataFrame:
    cities = ["paris", "nan", "lima", missing, missing] + (["atlantis"] if unknown else [])
    jobs = ["x", "y", "x", "x", "y"] + (["y"] if unknown else [])
    return pd.DataFrame({"city": cities, "job": jobs}, dtype=object)


def _as_sklearn_sees_it(rows: pd.DataFrame) -> pd.DataFrame:
    """onnxbridge hands scikit-learn a missing text value as NaN, "" included."""
    return rows.map(lambda v: np.nan if pd.isna(v) or v == "" else v)


def _transform(encoder: object, rows: pd.DataFrame) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # unknown values with drop / infrequent categories
        values = encoder.transform(rows)
    return _dense(values)


def _dense(values: object) -> np.ndarray:
    return np.asarray(values.toarray() if hasattr(values, "toarray") else values)


@pytest.mark.parametrize("with_nan", [True, False], ids=["fitted-with-nan", "fitted-without"])
@pytest.mark.parametrize("name", list(ENCODERS))
def test_missing_text_is_encoded_as_scikit_learn_encodes_nan(
    name: str, with_nan: bool, tmp_path
) -> None:
    X, y = _training(with_nan)
    encoder = ENCODERS[name]().fit(X, y)
    result = convert_estimator(encoder, X, precision="double")
    path = result.save(tmp_path / "encoder.onnx")
    predictor = Predictor(path)
    takes_unknown = getattr(encoder, "handle_unknown", "ignore") != "error"
    for missing in MISSING:
        rows = _probe_rows(missing, unknown=takes_unknown)
        try:
            expected = _transform(encoder, _as_sklearn_sees_it(rows))
        except ValueError:
            # scikit-learn refuses a missing value this encoder never saw: so does onnxbridge.
            with pytest.raises(OnnxbridgeError, match="missing values"):
                predictor.predict(rows)
            assert not with_nan
            continue
        got = predictor.predict(rows).transformed
        np.testing.assert_array_equal(
            got, expected.astype(got.dtype), err_msg=f"{name}, missing as {missing!r}"
        )


@pytest.mark.parametrize("name", ["onehot-error", "ordinal-default"])
def test_unknown_text_is_refused_where_scikit_learn_refuses_it(name: str, tmp_path) -> None:
    X, y = _training(with_nan=True)
    encoder = ENCODERS[name]().fit(X, y)
    path = convert_estimator(encoder, X).save(tmp_path / "encoder.onnx")
    rows = pd.DataFrame({"city": ["atlantis"], "job": ["x"]}, dtype=object)
    with pytest.raises(ValueError, match="unknown categor"):
        encoder.transform(rows)
    with pytest.raises(OnnxbridgeError):
        Predictor(path).predict(rows)


def test_pipeline_with_missing_city_predicts_as_scikit_learn(tmp_path) -> None:
    rng = np.random.RandomState(0)
    n = 1000
    X = pd.DataFrame(
        {
            "a": rng.randn(n),
            "b": rng.randn(n),
            "city": rng.choice(["paris", "rome", "oslo"], n).astype(object),
            "job": rng.choice(["x", "y"], n).astype(object),
        }
    )
    X.loc[rng.rand(n) < 0.1, "city"] = None
    y = (X["city"].isna() | (X["a"] > 1)).astype(int)
    pipe = make_pipeline(
        ColumnTransformer(
            [
                ("num", make_pipeline(SimpleImputer(), StandardScaler()), ["a", "b"]),
                ("cat", OneHotEncoder(handle_unknown="ignore"), ["city", "job"]),
            ]
        ),
        LogisticRegression(),
    ).fit(X, y)
    path = convert_estimator(pipe, X.head(100)).save(tmp_path / "model.onnx")
    missing = X["city"].isna().to_numpy()
    assert missing.sum() > 50
    got = Predictor(path).predict(X).probabilities
    np.testing.assert_allclose(got[missing], pipe.predict_proba(X)[missing], atol=1e-6)


NUMERIC_ENCODERS = {
    "onehot-ignore": lambda: OneHotEncoder(handle_unknown="ignore", sparse_output=False),
    "onehot-drop-first": lambda: OneHotEncoder(drop="first", handle_unknown="ignore"),
    "ordinal-default": lambda: OrdinalEncoder(),
    "ordinal-missing-set": lambda: OrdinalEncoder(
        handle_unknown="use_encoded_value", unknown_value=-1, encoded_missing_value=-2
    ),
}


@pytest.mark.parametrize("opset", [None, 15], ids=["default-opset", "opset-15"])
@pytest.mark.parametrize("name", list(NUMERIC_ENCODERS))
def test_numeric_categories_with_nan(name: str, opset: int | None, tmp_path) -> None:
    rng = np.random.RandomState(1)
    X = pd.DataFrame(
        {
            "rooms": rng.choice([1.0, 2.0, 3.0, 5.0, np.nan], 150),
            "floor": rng.choice([0.0, 1.0, 2.5], 150),
        }
    )
    encoder = NUMERIC_ENCODERS[name]().fit(X)
    path = convert_estimator(encoder, X, opset=opset).save(tmp_path / "encoder.onnx")
    rows = pd.DataFrame({"rooms": [1.0, np.nan, 5.0, 3.0], "floor": [2.5, 0.0, np.nan, 1.0]})
    if encoder.handle_unknown == "error":
        rows = rows[rows["floor"].notna()]  # 'floor' had no NaN in fit: unknown, refused
    else:
        rows = pd.concat([rows, pd.DataFrame({"rooms": [4.0], "floor": [7.0]})])  # unseen
    got = Predictor(path).predict(rows).transformed
    expected = _transform(encoder, rows)
    np.testing.assert_array_equal(got, expected.astype(got.dtype))


def test_text_encoders_build_at_an_older_opset(tmp_path) -> None:
    X, y = _training(with_nan=True)
    for name in ("onehot-infrequent", "ordinal-missing-set"):
        encoder = ENCODERS[name]().fit(X, y)
        path = convert_estimator(encoder, X, opset=15).save(tmp_path / f"{name}.onnx")
        rows = _probe_rows(None, unknown=True)
        got = Predictor(path).predict(rows).transformed
        expected = _transform(encoder, _as_sklearn_sees_it(rows))
        np.testing.assert_array_equal(got, expected.astype(got.dtype))
