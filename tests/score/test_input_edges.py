"""score on inputs as other tools write them: a CSV with a byte order mark, booleans written as
1.0 / 0.0, a model without onnxbridge metadata, a column named twice, key columns that are not
numbers all the way down, and a batch size beyond what the readers take. Predictions are checked
against Predictor on the same rows."""

from __future__ import annotations

from pathlib import Path

import onnx
import pandas as pd
import pytest

from cli_support import assert_one_line_error, run
from onnxbridge import BadRowError, DataError, Predictor, score

IRIS_COLUMNS = ["sepal length (cm)", "sepal width (cm)", "petal length (cm)", "petal width (cm)"]


def predicted(model: Path | bytes, features: pd.DataFrame) -> pd.DataFrame:
    """What Predictor gives for ``features`` (one thread per session, as score's sessions: tree
    sums are then added in one order, so the outputs are identical bit for bit)."""
    frame = Predictor(model, intra_op_num_threads=1).predict(features).to_frame()
    return frame.reset_index(drop=True)


def with_keys(keys: pd.Series, predictions: pd.DataFrame) -> pd.DataFrame:
    return pd.concat([keys.reset_index(drop=True), predictions], axis=1)


@pytest.fixture(scope="module")
def plain_model(iris_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Iris forest without its onnxbridge metadata: a plain .onnx from elsewhere."""
    model = onnx.load(str(iris_model))
    del model.metadata_props[:]
    path = tmp_path_factory.mktemp("plain") / "plain.onnx"
    onnx.save(model, str(path))
    assert Predictor(path).metadata is None
    return path


def test_a_model_without_metadata_names_and_skips_a_bad_row(
    rows, tmp_path: Path, plain_model: Path
) -> None:
    frame = rows(300)[IRIS_COLUMNS].astype({"petal width (cm)": object})
    frame.loc[1, "petal width (cm)"] = "1.2cm"  # data row 2 of the file
    path = tmp_path / "p_bad.csv"
    frame.to_csv(path, index=False)  # the model takes every column of the file
    with pytest.raises(BadRowError) as info:
        score(plain_model, path, tmp_path / "stopped", batch_size=100)
    assert (info.value.file, info.value.row) == (str(path), 2)
    assert info.value.column == "petal width (cm)"
    assert "row 2, column 'petal width (cm)': value '1.2cm' is not a number" in str(info.value)
    out = tmp_path / "scores"
    result = score(plain_model, path, out, batch_size=100, on_error="skip")
    assert result.bad_rows == 1 and result.rows == 299
    bad = pd.read_parquet(out / "_bad_rows" / "part-00000.parquet")
    assert bad[["row", "column", "value"]].values.tolist() == [[2, "petal width (cm)", "1.2cm"]]
    assert bad["reason"][0].startswith("not a number: the model takes numbers")
    want = predicted(plain_model, frame.drop(index=[1]).astype({"petal width (cm)": float}))
    pd.testing.assert_frame_equal(
        pd.read_parquet(out / "part-00000.parquet"), want, check_exact=True
    )


def test_a_batch_size_beyond_the_readers_is_a_one_line_error(
    capsys, rows, tmp_path: Path, iris_model: Path
) -> None:
    path = tmp_path / "in.parquet"
    frame = rows(50)
    frame.to_parquet(path, index=False)
    code, _, err = run(
        capsys, "score", iris_model, path, "-o", tmp_path / "o",
        "--batch-size", "99999999999999999999999",
    )  # fmt: skip
    assert_one_line_error(
        code,
        err,
        r"^error: --batch-size 99999999999999999999999 is not allowed: it must be a positive "
        r"number of rows, from 1 to 2,147,483,647$",
    )
    with pytest.raises(DataError, match=r"^batch_size=2147483648 is not allowed: .* to 2,147,"):
        score(iris_model, path, tmp_path / "o", batch_size=2**31)
    assert not (tmp_path / "o").exists()
    # The largest allowed: the whole file in one batch, the same scores.
    score(iris_model, path, tmp_path / "one.parquet", keep=["id"], batch_size=2**31 - 1)
    want = with_keys(frame["id"], predicted(iris_model, frame[IRIS_COLUMNS]))
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "one.parquet"), want, check_exact=True)
