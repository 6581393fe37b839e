"""score on inputs as other tools write them: a CSV with a byte order mark, booleans written as
1.0 / 0.0, a model without onnxbridge metadata, a column named twice, key columns that are not
numbers all the way down, and a batch size beyond what the readers take. Predictions are checked
against Predictor on the same rows."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import onnx
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
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


@pytest.mark.parametrize("id_first", [True, False], ids=["id-first", "features-first"])
def test_a_csv_with_a_byte_order_mark_scores_as_predict_reads_it(
    capsys, rows, tmp_path: Path, iris_model: Path, id_first: bool
) -> None:
    """Excel's "CSV UTF-8" starts with a byte order mark: the first column keeps its name."""
    frame = rows(60)
    if not id_first:
        frame = frame[[*IRIS_COLUMNS, "id"]]
    path = tmp_path / "excel.csv"
    frame.to_csv(path, index=False, encoding="utf-8-sig")
    assert path.read_bytes().startswith(b"\xef\xbb\xbf")
    out = tmp_path / "scores.parquet"
    code, _, err = run(capsys, "score", iris_model, path, "-o", out, "--keep", "id")
    assert code == 0, err
    read = pd.read_csv(path)  # what predict reads
    assert list(read.columns) == list(frame.columns)
    want = with_keys(read["id"].astype(str), predicted(iris_model, read[IRIS_COLUMNS]))
    pd.testing.assert_frame_equal(pd.read_parquet(out), want, check_exact=True)


def test_a_boolean_feature_written_as_1_0_and_0_0_scores_as_predict_reads_it(
    tmp_path: Path, houses_model: Path, regression_csv: Path
) -> None:
    """pandas writes a boolean column that has missing values as 1.0 / 0.0 and reads it back as
    floats; numbers other than 1 and 0 are still refused, and the rows around a refused one
    score as the same rows without it."""
    frame = pd.read_csv(regression_csv).head(40).drop(columns=["price"])
    assert frame["has_garden"].dtype == bool
    as_floats = frame.astype({"has_garden": float})
    as_floats.loc[9, "has_garden"] = np.nan  # a missing value, written as an empty field
    written = as_floats.astype({"has_garden": object})
    as_floats.loc[[3, 4, 5], "has_garden"] = [1.0, 0.0, 1.0]
    written.loc[[3, 4, 5], "has_garden"] = ["1.00", "-0.0", "1e0"]  # the same numbers
    written.loc[7, "has_garden"] = "0.5"  # data row 8 of the file
    path = tmp_path / "houses.csv"
    written.to_csv(path, index=False)
    written_bits = {line.rsplit(",", 1)[1] for line in path.read_text().splitlines()[1:]}
    assert {"1.0", "0.0"} <= written_bits  # as pandas writes them
    with pytest.raises(BadRowError) as info:
        score(houses_model, path, tmp_path / "stopped.parquet")
    assert (info.value.row, info.value.column) == (8, "has_garden")
    assert "value '0.5' is not true/false/1/0: the model takes booleans here" in str(info.value)
    out = tmp_path / "prices.parquet"
    result = score(houses_model, path, out, on_error="skip")
    assert result.bad_rows == 1 and result.rows == 39
    bad = pd.read_parquet(tmp_path / "prices.bad-rows.parquet")
    assert bad[["row", "column", "value"]].values.tolist() == [[8, "has_garden", "0.5"]]
    want = predicted(houses_model, as_floats.drop(index=[7]))
    pd.testing.assert_frame_equal(pd.read_parquet(out), want, check_exact=True)


def test_a_boolean_feature_with_a_missing_value_scores_as_1_0_0_0_and_nan(
    tmp_path: Path, houses_model: Path, regression_csv: Path
) -> None:
    """True / False / (empty) in a CSV file: a table with a missing boolean is read as 1.0 / 0.0 /
    NaN wherever onnxbridge reads one (the model's input takes numbers)."""
    frame = pd.read_csv(regression_csv).head(30).drop(columns=["price"])
    written = frame.astype({"has_garden": object})
    written.loc[4, "has_garden"] = None
    path = tmp_path / "houses.csv"
    written.to_csv(path, index=False)
    assert path.read_text().splitlines()[5].endswith(",")  # an empty field
    out = tmp_path / "prices.parquet"
    assert score(houses_model, path, out).rows == 30
    as_floats = frame.astype({"has_garden": float})
    as_floats.loc[4, "has_garden"] = np.nan
    want = predicted(houses_model, as_floats)
    pd.testing.assert_frame_equal(pd.read_parquet(out), want, check_exact=True)


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


def write_table(table: pa.Table, path: Path) -> None:
    """Write ``table`` (whose names may repeat) as CSV or Parquet, by ``path``'s extension."""
    if path.suffix == ".csv":
        pcsv.write_csv(table, path)
    else:
        pq.write_table(table, path)


@pytest.mark.parametrize(
    ("fmt", "engine"), [("csv", "local"), ("parquet", "local"), ("parquet", "dask")]
)
def test_a_column_named_twice_is_a_one_line_error_naming_it(
    capsys, rows, tmp_path: Path, iris_model: Path, fmt: str, engine: str
) -> None:
    frame = rows(30)
    data = tmp_path / "data"
    data.mkdir()
    rows(20, seed=1).to_parquet(data / "a.parquet", index=False)  # scored before it
    columns = [pa.array(frame[c]) for c in ["id", *IRIS_COLUMNS]]
    names = ["id", *IRIS_COLUMNS]
    twice = pa.table([*columns, columns[1]], names=[*names, "sepal length (cm)"])
    path = data / f"b.{fmt}"
    write_table(twice, path)
    out = tmp_path / "scores"
    code, _, err = run(
        capsys, "score", iris_model, data, "-o", out, "--engine", engine, "--workers", "1"
    )
    assert_one_line_error(
        code,
        err,
        rf"^error: '{re.escape(str(path))}' has two columns named 'sepal length \(cm\)', which "
        "the job reads; rename or drop one of them in the file$",
    )
    # The input before it is scored and kept; nothing of the refused one is written.
    assert sorted(p.name for p in out.iterdir()) == ["part-00000.parquet"]
    # A column named twice that the job does not read is no obstacle.
    notes = pa.table([*columns, ["x"] * 30, ["y"] * 30], names=[*names, "note", "note"])
    path = tmp_path / f"notes.{fmt}"
    write_table(notes, path)
    score(iris_model, path, tmp_path / "notes-scores.parquet", keep=["id"])
    keys = frame["id"].astype(str) if fmt == "csv" else frame["id"]
    want = with_keys(keys, predicted(iris_model, frame[IRIS_COLUMNS]))
    pd.testing.assert_frame_equal(
        pd.read_parquet(tmp_path / "notes-scores.parquet"), want, check_exact=True
    )


def test_csv_keys_are_kept_as_written_on_both_engines_and_through_resume(
    rows, tmp_path: Path, iris_model: Path
) -> None:
    """A CSV key column is text, exactly as written (leading zeros and all), whatever its
    values look like: every part of a job, an empty one included, has the same key type on
    both engines, and a resumed job's parts agree with the ones it kept."""
    data = tmp_path / "data"
    data.mkdir()
    frames = [rows(40, seed=i, first_id=100 * i) for i in range(3)]
    frames[0]["id"] = [f"{i:05d}" for i in frames[0]["id"]]  # 00000, 00001, ...
    frames[0].to_csv(data / "a.csv", index=False)
    frames[1].head(0).to_csv(data / "b.csv", index=False)  # a header, no rows
    bad = frames[2].astype({"petal length (cm)": object})
    bad.loc[5, "petal length (cm)"] = "?"
    bad.to_csv(data / "c.csv", index=False)
    local = tmp_path / "local"
    with pytest.raises(BadRowError, match=r"c.csv', row 6"):
        score(iris_model, data, local, keep=["id"], workers=1)
    assert sorted(p.name for p in local.glob("part-*")) == [
        "part-00000.parquet",
        "part-00001.parquet",
    ]
    resumed = score(iris_model, data, local, keep=["id"], on_error="skip", resume=True)
    assert [p.resumed for p in resumed.parts] == [True, True, False]
    schemas = [pq.read_schema(p.path).remove_metadata() for p in resumed.parts]
    assert schemas[0].field("id").type == pa.string()
    assert schemas[0] == schemas[1] == schemas[2]
    good = bad.drop(index=[5]).astype({"petal length (cm)": float})
    for part, frame in zip(resumed.parts, (frames[0], frames[1].head(0), good), strict=True):
        got = pd.read_parquet(part.path)
        assert got["id"].tolist() == [str(k) for k in frame["id"]]
        if len(frame):
            want = with_keys(got["id"], predicted(iris_model, frame[IRIS_COLUMNS]))
            pd.testing.assert_frame_equal(got, want, check_exact=True)
    assert pd.read_parquet(local)["id"].tolist()[:2] == ["00000", "00001"]
    dask = score(
        iris_model, data, tmp_path / "dask", keep=["id"], on_error="skip", engine="dask",
        workers=1,
    )  # fmt: skip
    for a, b in zip(resumed.parts, dask.parts, strict=True):
        want, got = pq.read_table(a.path), pq.read_table(b.path)
        assert got.schema.equals(want.schema, check_metadata=True) and got.equals(want)


def test_a_csv_key_that_stops_looking_like_a_number_after_the_first_block_is_kept(
    rows, tmp_path: Path, iris_model: Path
) -> None:
    """pyarrow reads CSV in blocks of 4 MiB: a key column typed from the first one would stop
    the reader at an id such as 'X-1' further down."""
    frame = rows(2_200)
    frame["id"] = frame["id"].astype(str)
    frame.loc[2_199, "id"] = "X-1"
    frame["note"] = "n" * 2_000  # about 2 KB a row: the last rows are past the first block
    path = tmp_path / "big.csv"
    frame.to_csv(path, index=False)
    assert path.stat().st_size > 4 * 2**20
    out = tmp_path / "scores.parquet"
    result = score(iris_model, path, out, keep=["id"])
    assert result.rows == 2_200 and result.bad_rows == 0
    want = with_keys(frame["id"], predicted(iris_model, frame[IRIS_COLUMNS]))
    pd.testing.assert_frame_equal(pd.read_parquet(out), want, check_exact=True)


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


@pytest.mark.parametrize(
    ("flag", "value"),
    [("--workers", "99999999999999999999999"), ("--workers", "0"),
     ("--session-threads", "3000000000")],
)  # fmt: skip
def test_thread_counts_beyond_the_range_are_a_one_line_error(
    capsys, rows, tmp_path: Path, iris_model: Path, flag: str, value: str
) -> None:
    path = tmp_path / "in.parquet"
    rows(20).to_parquet(path, index=False)
    code, _, err = run(capsys, "score", iris_model, path, "-o", tmp_path / "o", flag, value)
    assert_one_line_error(code, err, rf"{flag} {value} is not allowed: .* from 1 to 1024")
    assert not (tmp_path / "o").exists()
    with pytest.raises(DataError, match="from 1 to 1024"):
        score(iris_model, path, tmp_path / "o", session_threads=2000)
