"""score with a mixed-type model (one ONNX input per column, text as string tensors): CSV and
Parquet inputs, both engines, checked row for row against Predictor."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from onnxbridge import BadRowError, Predictor, convert_bundle, score, train_bundle


def _table(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.RandomState(seed)
    frame = pd.DataFrame(
        {
            "customer": np.arange(n, dtype=np.int64) + 10_000 * seed,
            "age years": rng.uniform(18, 80, n).round(1),
            "rooms": rng.randint(1, 6, n),
            "city": rng.choice(["Paris", "Lyon", "Zürich", "Köln"], n).astype(object),
            "zip": rng.choice(["01000", "69001", "8001"], n).astype(object),  # text of digits
            "has garden": rng.rand(n) > 0.5,
            "income": rng.lognormal(10, 1, n),
        }
    )
    frame.loc[rng.rand(n) < 0.1, "age years"] = np.nan
    frame.loc[rng.rand(n) < 0.1, "city"] = None
    value = frame["rooms"] + (frame["city"] == "Lyon") * 2 + frame["age years"].fillna(40) / 30
    frame["churn"] = np.where(value > 4.5, "yes", "no")
    return frame


@pytest.fixture(scope="module")
def mixed_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("mixed")
    train = folder / "train.csv"
    _table(300, seed=0).drop(columns=["customer"]).to_csv(train, index=False)
    bundle, _ = train_bundle(
        str(train),
        "RandomForestClassifier(n_estimators=15, random_state=0)",
        folder / "bundle",
        target="churn",
        preprocess="auto",
    )
    convert_bundle(bundle)
    return bundle.onnx_path


def test_mixed_model_takes_one_input_per_column(mixed_model: Path) -> None:
    predictor = Predictor(mixed_model)
    assert len(predictor.inputs) == 6
    assert {i.name: i.type for i in predictor.inputs}["city"] == "tensor(string)"


def test_mixed_csv_and_parquet_match_predictor_on_both_engines(
    tmp_path: Path, mixed_model: Path
) -> None:
    frames = [_table(230, seed=1), _table(170, seed=2)]
    frames[0].to_csv(tmp_path / "a.csv", index=False)
    frames[1].to_parquet(tmp_path / "b.parquet", index=False)
    inputs = [tmp_path / "a.csv", tmp_path / "b.parquet"]
    options = {"keep": ["customer"], "batch_size": 40}
    local = score(mixed_model, inputs, tmp_path / "local", **options)
    dask = score(mixed_model, inputs, tmp_path / "dask", engine="dask", workers=2, **options)
    predictor = Predictor(mixed_model, intra_op_num_threads=1)
    # What predict does with each file: pandas reads it, Predictor takes it as it is.
    # score keeps a CSV key column as text, as written.
    as_read = [pd.read_csv(tmp_path / "a.csv", dtype={"zip": str, "customer": str}), frames[1]]
    for i, frame in enumerate(as_read):
        want = predictor.predict(frame.drop(columns=["customer"])).to_frame()
        got = pd.read_parquet(local.parts[i].path)
        assert got["customer"].tolist() == frame["customer"].tolist()
        assert list(got.columns) == ["customer", "label", "proba_no", "proba_yes"]
        pd.testing.assert_frame_equal(got.drop(columns=["customer"]), want, check_exact=True)
        pd.testing.assert_frame_equal(pd.read_parquet(dask.parts[i].path), got, check_exact=True)


def test_mixed_bad_number_is_named_text_is_never_cast(tmp_path: Path, mixed_model: Path) -> None:
    frame = _table(60, seed=3).astype({"income": object})
    frame.loc[41, "income"] = "lots"
    frame.loc[5, "city"] = "12345"  # digits in a text column are text, not a bad row
    frame.to_csv(tmp_path / "in.csv", index=False)
    with pytest.raises(BadRowError, match=r"row 42, column 'income': value 'lots' is not a number"):
        score(mixed_model, tmp_path / "in.csv", tmp_path / "o")
    result = score(mixed_model, tmp_path / "in.csv", tmp_path / "o", on_error="skip")
    assert result.bad_rows == 1 and result.rows == 59
