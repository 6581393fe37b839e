"""Missing values are judged per column: a row is refused only where its missing value sits in a
column the source model refuses one in; older models (one word for the whole model) behave as
before; the refusal's column list says how many columns it left out."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pandas as pd
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

from onnxbridge import BadRowError, Predictor, SchemaMismatchError, convert_estimator, score
from onnxbridge.convert import read_metadata


def _table(n: int = 300) -> tuple[pd.DataFrame, pd.Series]:
    rng = np.random.RandomState(0)
    X = pd.DataFrame(
        {
            "a": rng.randn(n),
            "b": rng.randn(n),
            "city": rng.choice(["paris", "rome", "oslo"], n).astype(object),
        }
    )
    X.loc[rng.rand(n) < 0.1, "city"] = np.nan
    y = (X["city"].isna() | (X["a"] > 1)).astype(int)
    return X, y


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> tuple[Path, object]:
    """Numbers without an imputer (the source refuses NaN there), text one-hot encoded with
    NaN as a category (the source takes it)."""
    X, y = _table()
    pipe = make_pipeline(
        ColumnTransformer(
            [
                ("num", StandardScaler(), ["a", "b"]),
                ("cat", OneHotEncoder(handle_unknown="ignore"), ["city"]),
            ]
        ),
        LogisticRegression(),
    ).fit(X, y)
    result = convert_estimator(pipe, X.head(50))
    return result.save(tmp_path_factory.mktemp("missing") / "model.onnx"), pipe


def test_metadata_records_each_column(model) -> None:
    path, _ = model
    metadata = read_metadata(onnx.load(path))
    assert metadata.missing_by_column == {"a": "refused", "b": "refused", "city": "accepted"}
    # The one word older readers know: refused somewhere.
    assert metadata.missing_values == "refused"


def test_rows_missing_only_where_the_source_takes_it_are_predicted(model) -> None:
    path, pipe = model
    X, _ = _table(40)
    X["city"] = X["city"].astype(object)
    X.loc[:9, "city"] = None
    X.loc[10:14, "city"] = ""
    got = Predictor(path).predict(X).probabilities
    # onnxbridge hands scikit-learn every missing text value (None, "") as NaN.
    as_nan = X.assign(city=X["city"].map(lambda v: np.nan if pd.isna(v) or v == "" else v))
    expected = pipe.predict_proba(as_nan)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-6)


def test_rows_missing_where_the_source_refuses_are_refused(model) -> None:
    path, _ = model
    X, _ = _table(40)
    X.loc[[1, 4], "b"] = np.nan
    X.loc[:9, "city"] = None
    with pytest.raises(SchemaMismatchError) as caught:
        Predictor(path).predict(X)
    message = str(caught.value)
    assert "in 2 rows, columns: 'b' (2);" in message
    assert "'city'" not in message
    assert "allow_missing=True" in message
    assert Predictor(path).predict(X, allow_missing=True).probabilities.shape == (40, 2)


def _with_props(path: Path, out: Path, **props: str | None) -> Path:
    """The model with onnxbridge metadata entries replaced (None: removed), as an older
    onnxbridge wrote it."""
    proto = onnx.load(path)
    keep = [p for p in proto.metadata_props if p.key[len("onnxbridge.") :] not in props]
    del proto.metadata_props[:]
    for p in keep:
        proto.metadata_props.add(key=p.key, value=p.value)
    for key, value in props.items():
        if value is not None:
            proto.metadata_props.add(key=f"onnxbridge.{key}", value=value)
    onnx.save(proto, out)
    return out


def test_older_models_keep_their_one_word(model, tmp_path: Path) -> None:
    path, _ = model
    X, _ = _table(20)
    X["city"] = X["city"].fillna("rome")
    X.loc[:3, "city"] = None  # text only
    refused = _with_props(
        path, tmp_path / "old-refused.onnx", missing_by_column=None, missing_values="refused"
    )
    assert read_metadata(onnx.load(refused)).missing_by_column is None
    with pytest.raises(SchemaMismatchError, match=r"columns: 'city' \(4\)"):
        Predictor(refused).predict(X)
    accepted = _with_props(
        path, tmp_path / "old-accepted.onnx", missing_by_column=None, missing_values="accepted"
    )
    X.loc[:3, "a"] = np.nan
    assert Predictor(accepted).predict(X).labels.shape == (20,)


def test_the_column_list_says_how_many_it_left_out(tmp_path: Path) -> None:
    rng = np.random.RandomState(0)
    X = pd.DataFrame(rng.randn(100, 8), columns=[f"f{i}" for i in range(8)])
    y = (X["f0"] > 0).astype(int)
    path = convert_estimator(LogisticRegression().fit(X, y), X.head(20)).save(tmp_path / "lr.onnx")
    rows = X.head(3).copy()
    rows.iloc[0, :] = np.nan
    with pytest.raises(SchemaMismatchError) as caught:
        Predictor(path).predict(rows)
    assert "'f0' (1), 'f1' (1), 'f2' (1), 'f3' (1), 'f4' (1), … (3 more)" in str(caught.value)


def test_score_refuses_only_rows_missing_where_the_source_refuses(model, tmp_path: Path) -> None:
    path, pipe = model
    X, _ = _table(30)
    X.loc[:4, "city"] = None
    X.loc[[7], "a"] = np.nan
    X.to_parquet(tmp_path / "in.parquet", index=False)
    with pytest.raises(BadRowError, match=r"row 8, column 'a': missing value"):
        score(path, tmp_path / "in.parquet", tmp_path / "out.parquet")
    result = score(path, tmp_path / "in.parquet", tmp_path / "skip.parquet", on_error="skip")
    assert result.bad_rows == 1
    scored = pd.read_parquet(tmp_path / "skip.parquet")
    assert len(scored) == 29
    kept = X.drop(index=7)
    kept["city"] = kept["city"].map(lambda v: np.nan if pd.isna(v) else v)
    np.testing.assert_array_equal(scored["label"].to_numpy(), pipe.predict(kept))
