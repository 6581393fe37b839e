"""score with the local engine: real ONNX Runtime sessions on real CSV / Parquet files, checked
row for row against Predictor.predict."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from onnxbridge import BadRowError, DataError, OnnxModelError, Predictor, score
from onnxbridge._score.inputs import list_inputs

IRIS_COLUMNS = ["sepal length (cm)", "sepal width (cm)", "petal length (cm)", "petal width (cm)"]


def expected(model: Path, frame: pd.DataFrame, keep: list[str]) -> pd.DataFrame:
    """What Predictor gives for the whole of ``frame`` at once, with the key columns first.

    With one ONNX Runtime thread per session (score's default) tree sums are added in one order
    whatever the batch size, so the batched output must be identical, bit for bit.
    """
    features = frame.drop(columns=keep)
    predicted = Predictor(model, intra_op_num_threads=1).predict(features).to_frame()
    return pd.concat([frame[keep].reset_index(drop=True), predicted], axis=1)


def hidden_or_temp(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*") if p.name.endswith(".tmp"))


def test_csv_and_parquet_parts_match_predictor_row_for_row(
    rows, tmp_path: Path, iris_model: Path
) -> None:
    first, second = rows(250, seed=0), rows(180, seed=1, first_id=250)
    first.to_csv(tmp_path / "a.csv", index=False)
    second.to_parquet(tmp_path / "b.parquet", index=False)
    out = tmp_path / "scores"
    result = score(
        iris_model,
        [tmp_path / "a.csv", tmp_path / "b.parquet"],
        out,
        keep=["id"],
        batch_size=37,  # batches cross no file boundary and end mid-file
        workers=2,
    )
    assert [p.path.name for p in result.parts] == ["part-00000.parquet", "part-00001.parquet"]
    assert result.rows == 430 and result.bad_rows == 0 and result.rows_resumed == 0
    # A CSV key column is text, as written; a Parquet one keeps its type.
    for part, frame in zip(result.parts, (first.astype({"id": str}), second), strict=True):
        got = pd.read_parquet(part.path)
        assert list(got.columns) == ["id", "label", "proba_0", "proba_1", "proba_2"]
        pd.testing.assert_frame_equal(got, expected(iris_model, frame, ["id"]), check_exact=True)
    # The folder reads as one table in input order; the manifest says the job is complete.
    whole = pd.read_parquet(out)
    assert whole["id"].astype(int).tolist() == list(range(430))
    manifest = json.loads((out / "_manifest.json").read_text())
    assert manifest["complete"] is True and manifest["rows"] == 430
    assert [p["path"] for p in manifest["parts"]] == ["part-00000.parquet", "part-00001.parquet"]
    assert hidden_or_temp(out) == []
    # predict's own session (a thread per core) may add tree votes in another order: the same
    # labels, probabilities within one float32 step.
    default = Predictor(iris_model).predict(first.drop(columns=["id"])).to_frame()
    got = pd.read_parquet(result.parts[0].path)
    assert (got["label"] == default["label"]).all()
    np.testing.assert_allclose(got["proba_0"], default["proba_0"], rtol=0, atol=2.5e-7)


def test_single_file_output_holds_every_input_in_order(
    rows, tmp_path: Path, iris_model: Path
) -> None:
    frames = [rows(100, seed=s, first_id=100 * s) for s in range(3)]
    for i, frame in enumerate(frames):
        frame.to_parquet(tmp_path / f"in-{i}.parquet", index=False)
    out = tmp_path / "all.parquet"
    result = score(iris_model, tmp_path, out, keep=["id"], batch_size=64)
    assert result.parts[0].path == out and len(result.parts) == 1
    got = pd.read_parquet(out)
    want = expected(iris_model, pd.concat(frames, ignore_index=True), ["id"])
    pd.testing.assert_frame_equal(got, want, check_exact=True)
    assert not (tmp_path / "_manifest.json").exists()


def test_regressor_csv_with_int_and_bool_features(
    tmp_path: Path, houses_model: Path, regression_csv: Path
) -> None:
    out = tmp_path / "prices.parquet"
    result = score(houses_model, regression_csv, out, batch_size=50)
    got = pd.read_parquet(out)
    frame = pd.read_csv(regression_csv)
    want = Predictor(houses_model, intra_op_num_threads=1).predict(frame).to_frame()
    assert list(got.columns) == ["prediction"]
    np.testing.assert_array_equal(got["prediction"].to_numpy(), want["prediction"].to_numpy())
    assert result.rows == len(frame)


def test_inputs_from_folders_globs_and_repeats(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    for name in ("b.parquet", "a.csv", "c.tsv", "notes.txt", ".hidden.csv", "_meta.parquet"):
        (data / name).write_text("x\n1\n")
    names = [f.path.name for f in list_inputs([data])]
    assert names == ["a.csv", "b.parquet", "c.tsv"]
    names = [f.path.name for f in list_inputs([str(data / "*.csv"), data / "a.csv", data])]
    assert names == ["a.csv", "b.parquet", "c.tsv"]


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("nowhere.csv", r"input '.*nowhere.csv' does not exist"),
        ("notes.txt", r"unknown file type '.txt'; use one of .csv, .parquet, .pq, .tsv"),
        ("empty", r"the folder '.*empty' holds no .csv, .parquet, .pq, .tsv files"),
        ("*.json", r"the pattern '.*\*.json' matches no"),
    ],
)
def test_inputs_that_match_nothing_are_named(tmp_path: Path, given: str, message: str) -> None:
    (tmp_path / "notes.txt").write_text("x")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match=message):
        list_inputs([str(tmp_path / given)])


def test_bad_value_stops_the_job_naming_file_row_and_column(
    rows, tmp_path: Path, iris_model: Path
) -> None:
    frame = rows(300).astype({"petal length (cm)": object})
    frame.loc[203, "petal length (cm)"] = "abc"  # data row 204 of the file
    path = tmp_path / "flowers.csv"
    frame.to_csv(path, index=False)
    out = tmp_path / "scores"
    with pytest.raises(BadRowError) as info:
        score(iris_model, path, out, keep=["id"], batch_size=50)
    err = info.value
    assert (err.file, err.row, err.column) == (str(path), 204, "petal length (cm)")
    text = str(err)
    assert f"bad row in {str(path)!r}, row 204, column 'petal length (cm)'" in text
    assert "value 'abc' is not a number" in text and "pass on_error='skip'" in text
    # Nothing under a final name, no temporary file left behind.
    assert not list(out.glob("part-*")) and not (out / "_manifest.json").exists()
    assert hidden_or_temp(out) == []


def test_missing_column_is_an_error_naming_the_file(rows, tmp_path: Path, iris_model: Path) -> None:
    frame = rows(20).drop(columns=["sepal width (cm)"])
    path = tmp_path / "partial.parquet"
    frame.to_parquet(path, index=False)
    with pytest.raises(
        BadRowError,
        match=r"cannot score '.*partial.parquet': missing required "
        r"column 'sepal width \(cm\)'; the model expects 4 columns",
    ) as info:
        score(iris_model, path, tmp_path / "out")
    assert info.value.column == "sepal width (cm)" and info.value.row is None


def test_skip_writes_bad_rows_with_the_reason_and_scores_the_rest(
    rows, tmp_path: Path, logreg_model: Path
) -> None:
    frame = rows(260).astype({"sepal width (cm)": object})
    frame.loc[3, "sepal width (cm)"] = "n/a?"
    frame.loc[120, "sepal width (cm)"] = " 3.1 "  # spaces around a number are fine
    frame.loc[121, "petal width (cm)"] = np.nan  # a missing value: LogisticRegression refuses
    frame.loc[250, "sepal width (cm)"] = "1,5"
    path = tmp_path / "rows.csv"
    frame.to_csv(path, index=False)
    out = tmp_path / "scores"
    result = score(logreg_model, path, out, keep=["id"], batch_size=64, on_error="skip")
    assert result.bad_rows == 3 and result.rows == 257
    side = out / "_bad_rows" / "part-00000.parquet"
    assert result.parts[0].bad_rows_path == side
    bad = pd.read_parquet(side)
    assert list(bad.columns) == ["file", "row", "column", "value", "reason", "id"]
    assert bad["row"].tolist() == [4, 122, 251] and bad["id"].tolist() == ["3", "121", "250"]
    assert bad["column"].tolist() == ["sepal width (cm)", "petal width (cm)", "sepal width (cm)"]
    assert pq.read_table(side).column("value").to_pylist() == ["n/a?", None, "1,5"]
    assert bad["reason"][0].startswith("not a number: the model takes numbers")
    assert bad["reason"][1].startswith("missing value: the source model refuses missing values")
    assert set(bad["file"]) == {str(path)}
    got = pd.read_parquet(out / "part-00000.parquet")
    good = frame.drop(index=[3, 121, 250]).astype({"sepal width (cm)": float, "id": str})
    pd.testing.assert_frame_equal(got, expected(logreg_model, good, ["id"]), check_exact=True)
    assert result.to_dict()["bad_rows_files"] == [str(side)]


def test_allow_missing_scores_rows_the_source_refused(
    rows, tmp_path: Path, logreg_model: Path
) -> None:
    frame = rows(30)
    frame.loc[7, "petal width (cm)"] = np.nan
    path = tmp_path / "rows.parquet"
    frame.to_parquet(path, index=False)
    with pytest.raises(BadRowError, match=r"row 8, column 'petal width \(cm\)': missing value"):
        score(logreg_model, path, tmp_path / "out")
    result = score(logreg_model, path, tmp_path / "out2", allow_missing=True)
    assert result.rows == 30 and result.bad_rows == 0


def test_an_all_bad_file_gives_an_empty_part_with_the_output_columns(
    rows, tmp_path: Path, iris_model: Path
) -> None:
    rows(10).drop(columns=["petal length (cm)"]).to_parquet(tmp_path / "a.parquet")
    rows(10, seed=3).to_parquet(tmp_path / "b.parquet")
    out = tmp_path / "scores"
    result = score(iris_model, tmp_path, out, keep=["id"], on_error="skip")
    assert [p.rows for p in result.parts] == [0, 10] and result.bad_rows == 10
    empty = pq.read_table(out / "part-00000.parquet")
    full = pq.read_table(out / "part-00001.parquet")
    assert empty.num_rows == 0
    assert empty.schema.remove_metadata() == full.schema.remove_metadata()
    reasons = pd.read_parquet(out / "_bad_rows" / "part-00000.parquet")["reason"]
    assert reasons.str.startswith("missing required column 'petal length (cm)'").all()


def test_existing_output_needs_resume_or_overwrite(rows, tmp_path: Path, iris_model: Path) -> None:
    rows(40).to_parquet(tmp_path / "in.parquet")
    out = tmp_path / "scores"
    score(iris_model, tmp_path / "in.parquet", out)
    with pytest.raises(
        DataError, match=r"already holds scores; pass resume=True .* or overwrite=True"
    ):
        score(iris_model, tmp_path / "in.parquet", out)
    again = score(iris_model, tmp_path / "in.parquet", out, resume=True)
    assert again.rows == 0 and again.rows_resumed == 40 and again.parts[0].resumed
    assert score(iris_model, tmp_path / "in.parquet", out, overwrite=True).rows == 40
    single = tmp_path / "one.parquet"
    score(iris_model, tmp_path / "in.parquet", single)
    with pytest.raises(DataError, match=r"'.*one.parquet' exists; pass overwrite=True"):
        score(iris_model, tmp_path / "in.parquet", single)


def test_a_folder_score_did_not_write_is_never_replaced(
    rows, tmp_path: Path, iris_model: Path
) -> None:
    rows(10).to_parquet(tmp_path / "in.parquet")
    out = tmp_path / "mine"
    out.mkdir()
    (out / "thesis.docx").write_text("precious")
    with pytest.raises(DataError, match=r"holds files that score did not write \(thesis.docx\)"):
        score(iris_model, tmp_path / "in.parquet", out, overwrite=True)
    assert (out / "thesis.docx").read_text() == "precious"


def test_resume_refuses_parts_of_a_different_job(rows, tmp_path: Path, iris_model: Path) -> None:
    path = tmp_path / "in.parquet"
    rows(40).to_parquet(path)
    out = tmp_path / "scores"
    score(iris_model, path, out)
    rows(41, seed=9).to_parquet(path)  # the input changed since
    with pytest.raises(
        DataError,
        match=r"cannot resume: '.*part-00000.parquet' was not made "
        r"from the same input, model and options",
    ):
        score(iris_model, path, out, resume=True)
    with pytest.raises(DataError, match="cannot resume"):
        score(iris_model, path, out, resume=True, keep=["id"])


def test_bad_options_and_models_are_named(rows, tmp_path: Path, iris_model: Path) -> None:
    path = tmp_path / "in.parquet"
    rows(5).to_parquet(path)
    with pytest.raises(DataError, match=r"engine='spark' is not supported; use one of local, dask"):
        score(iris_model, path, tmp_path / "o", engine="spark")
    with pytest.raises(DataError, match=r"on_error='ignore' is not supported"):
        score(iris_model, path, tmp_path / "o", on_error="ignore")
    with pytest.raises(
        DataError, match=r"batch_size=0 is not allowed: it must be a positive number of rows"
    ):
        score(iris_model, path, tmp_path / "o", batch_size=0)
    with pytest.raises(DataError, match=r"keep= column 'order_id' is not in '.*in.parquet'"):
        score(iris_model, path, tmp_path / "o", keep=["order_id"])
    with pytest.raises(DataError, match=r"keep= column 'label' has the name of an output"):
        rows(5).rename(columns={"id": "label"}).to_parquet(path)
        score(iris_model, path, tmp_path / "o", keep=["label"])
    with pytest.raises(OnnxModelError, match=r"model file '.*missing.onnx' does not exist"):
        score(tmp_path / "missing.onnx", path, tmp_path / "o")
    with pytest.raises(DataError, match=r"scheduler= is for engine='dask'"):
        score(iris_model, path, tmp_path / "o", scheduler="tcp://127.0.0.1:8786")


def test_model_bytes_bundle_folder_and_progress(rows, tmp_path: Path, iris_model: Path) -> None:
    path = tmp_path / "in.parquet"
    rows(500).to_parquet(path)
    seen: list[tuple[int, int | None]] = []
    by_bytes = score(
        iris_model.read_bytes(),
        path,
        tmp_path / "a.parquet",
        batch_size=100,
        progress=lambda done, total: seen.append((done, total)),
    )
    by_bundle = score(iris_model.parent, path, tmp_path / "b.parquet")
    pd.testing.assert_frame_equal(
        pd.read_parquet(tmp_path / "a.parquet"), pd.read_parquet(tmp_path / "b.parquet")
    )
    assert seen[0] == (0, 500) and seen[-1] == (500, 500)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)
    summary = by_bytes.to_dict()
    assert summary["rows"] == 500 and summary["peak_rss_bytes"] > 0
    assert summary["rows_per_second"] > 0 and by_bundle.rows == 500


def test_csv_reader_errors_name_the_file(tmp_path: Path, iris_model: Path) -> None:
    path = tmp_path / "broken.parquet"
    path.write_bytes(b"not parquet at all")
    with pytest.raises(DataError, match=r"cannot read '.*broken.parquet' as parquet"):
        score(iris_model, path, tmp_path / "o")
    assert os.listdir(tmp_path) == ["broken.parquet"] or not list((tmp_path / "o").glob("*"))


def test_columns_are_matched_by_name(rows, tmp_path: Path, iris_model: Path) -> None:
    frame = rows(80)
    shuffled = frame[["id", *IRIS_COLUMNS[::-1]]].assign(extra="unused")
    shuffled.to_csv(tmp_path / "in.csv", index=False)
    score(iris_model, tmp_path / "in.csv", tmp_path / "o.parquet", keep=["id"])
    pd.testing.assert_frame_equal(
        pd.read_parquet(tmp_path / "o.parquet"),
        expected(iris_model, frame.astype({"id": str}), ["id"]),  # a CSV key is text
    )


def test_after_a_bad_row_resume_with_skip_keeps_the_finished_parts(
    rows, tmp_path: Path, iris_model: Path
) -> None:
    for i in range(3):
        frame = rows(100, seed=i, first_id=100 * i)
        if i == 2:
            frame = frame.astype({"sepal length (cm)": object})
            frame.loc[50, "sepal length (cm)"] = "?"
        frame.to_csv(tmp_path / f"in-{i}.csv", index=False)
    inputs = sorted(tmp_path.glob("in-*.csv"))
    out = tmp_path / "scores"
    with pytest.raises(BadRowError, match=r"in-2.csv', row 51"):
        score(iris_model, inputs, out, workers=1)
    # The parts finished before the bad row stay: they are complete.
    assert sorted(p.name for p in out.glob("part-*")) == [
        "part-00000.parquet",
        "part-00001.parquet",
    ]
    result = score(iris_model, inputs, out, on_error="skip", resume=True)
    assert [p.resumed for p in result.parts] == [True, True, False]
    assert result.bad_rows == 1 and result.rows == 99 and result.rows_resumed == 200
    with pytest.raises(BadRowError, match=r"cannot resume with on_error='raise': .*part-00002"):
        score(iris_model, inputs, out, resume=True)


def test_score_needs_neither_scikit_learn_nor_skl2onnx(rows, tmp_path: Path, iris_model: Path):
    import subprocess
    import sys

    rows(50).to_csv(tmp_path / "in.csv", index=False)
    code = (
        "import sys; from onnxbridge._score import score; "
        f"score({str(iris_model)!r}, {str(tmp_path / 'in.csv')!r}, {str(tmp_path / 'o')!r}); "
        "bad = [m for m in sys.modules if m.startswith(('sklearn', 'skl2onnx', 'skops'))]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "o" / "part-00000.parquet").is_file()


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("inf", "not a finite number the model can score: float32 takes finite numbers"),
        ("-Infinity", "not a finite number the model can score"),
        ("1e300", "out of range for float32, which takes finite numbers"),
    ],
)
def test_values_the_model_cannot_take_are_bad_rows(
    rows, tmp_path: Path, iris_model: Path, text: str, reason: str
) -> None:
    frame = rows(120).astype({"petal length (cm)": object})
    frame.loc[70, "petal length (cm)"] = text  # data row 71 of the file
    path = tmp_path / "flowers.csv"
    frame.to_csv(path, index=False)
    with pytest.raises(BadRowError) as info:
        score(iris_model, path, tmp_path / "stopped", keep=["id"], batch_size=50)
    err = info.value
    assert (err.file, err.row, err.column) == (str(path), 71, "petal length (cm)")
    assert f"row 71, column 'petal length (cm)': value {text!r} is {reason}" in str(err)
    assert not (tmp_path / "stopped" / "_manifest.json").exists()
    out = tmp_path / "scores"
    result = score(iris_model, path, out, keep=["id"], batch_size=50, on_error="skip")
    assert result.bad_rows == 1 and result.rows == 119
    bad = pd.read_parquet(out / "_bad_rows" / "part-00000.parquet")
    assert bad[["row", "column", "value", "id"]].values.tolist() == [
        [71, "petal length (cm)", text, "70"]
    ]
    assert bad["reason"][0].startswith(reason)
    got = pd.read_parquet(out / "part-00000.parquet")
    good = frame.drop(index=[70]).astype({"petal length (cm)": float, "id": str})
    pd.testing.assert_frame_equal(got, expected(iris_model, good, ["id"]), check_exact=True)


def test_parquet_floats_the_model_cannot_take_are_bad_rows(
    rows, tmp_path: Path, logreg_model: Path
) -> None:
    frame = rows(40)
    frame.loc[5, "sepal width (cm)"] = np.inf
    frame.loc[9, "petal width (cm)"] = -1e300
    frame.loc[12, "sepal length (cm)"] = np.nan  # a missing value the source model refuses
    path = tmp_path / "rows.parquet"
    frame.to_parquet(path, index=False)
    out = tmp_path / "scores"
    result = score(logreg_model, path, out, keep=["id"], on_error="skip")
    assert result.bad_rows == 3 and result.rows == 37
    bad = pd.read_parquet(out / "_bad_rows" / "part-00000.parquet")
    assert bad["row"].tolist() == [6, 10, 13]
    values = pq.read_table(out / "_bad_rows" / "part-00000.parquet").column("value").to_pylist()
    assert values[:2] == ["inf", "-1e+300"]
    assert bad["reason"][0].startswith("not a finite number the model can score")
    assert bad["reason"][1].startswith("out of range for float32")
    assert bad["reason"][2].startswith("missing value")


def test_a_model_without_metadata_gets_the_same_value_rule(tmp_path: Path) -> None:
    from skl2onnx import convert_sklearn
    from skl2onnx.common.data_types import FloatTensorType
    from sklearn.linear_model import LinearRegression

    rng = np.random.RandomState(0)
    X = rng.rand(50, 3)
    model = LinearRegression().fit(X, X @ [1.0, 2.0, 3.0])
    onx = convert_sklearn(model, initial_types=[("x", FloatTensorType([None, 3]))])
    path = tmp_path / "foreign.onnx"
    path.write_bytes(onx.SerializeToString())
    frame = pd.DataFrame(X, columns=["a", "b", "c"]).astype({"b": object})
    frame.loc[17, "b"] = "-inf"
    frame.loc[30, "b"] = "1e300"
    frame.insert(0, "id", range(50))
    data = tmp_path / "rows.csv"
    frame.to_csv(data, index=False)
    with pytest.raises(BadRowError, match=r"row 18, column 'b': value '-inf' is not a finite"):
        score(path, data, tmp_path / "stopped", keep=["id"])
    out = tmp_path / "scores"
    result = score(path, data, out, keep=["id"], on_error="skip")
    assert result.bad_rows == 2 and result.rows == 48
    bad = pd.read_parquet(out / "_bad_rows" / "part-00000.parquet")
    assert bad["row"].tolist() == [18, 31] and bad["column"].tolist() == ["b", "b"]
    assert bad["reason"][1].startswith("out of range for float32")
