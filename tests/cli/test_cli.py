"""The onnxbridge command: every command, exit codes, one-line errors, --json."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from sklearn.ensemble import RandomForestClassifier
from sklearn.neighbors import NearestCentroid

from cli_support import assert_one_line_error, run
from onnxbridge import Bundle, Predictor
from onnxbridge.bundle import save_estimator

RF = "RandomForestClassifier(n_estimators=10, random_state=42)"


@pytest.mark.parametrize(
    ("data", "model", "target", "metric"),
    [
        ("iris", RF, None, "accuracy"),
        ("wine", "StandardScaler() | LogisticRegression(max_iter=500)", None, "accuracy"),
        ("diabetes", "GradientBoostingRegressor(n_estimators=20, random_state=0)", None, "r2"),
        ("CSV", "RandomForestRegressor(n_estimators=10, random_state=0)", "price", "r2"),
        ("CSV2", "LogisticRegression()", "segment", "accuracy"),
    ],
)
def test_five_commands_end_to_end(
    capsys,
    tmp_path: Path,
    regression_csv: Path,
    classification_csv: Path,
    data: str,
    model: str,
    target: str | None,
    metric: str,
) -> None:
    data = {"CSV": str(regression_csv), "CSV2": str(classification_csv)}.get(data, data)
    out = tmp_path / "bundle"
    args = ["train", "--data", data, "--model", model, "--out", out]
    if target:
        args += ["--target", target]
    code, stdout, err = run(capsys, *args)
    assert code == 0, err
    assert f"test {metric}: " in stdout and str(out) in stdout

    code, stdout, err = run(capsys, "convert", out)
    assert code == 0, err
    assert "rows differ from scikit-learn" in stdout and (out / "model.onnx").is_file()

    code, stdout, err = run(capsys, "inspect", out / "model.onnx", "--json")
    assert code == 0, err
    summary = json.loads(stdout)
    assert summary["valid"] is True and summary["inputs"][0]["name"] == "input"
    n_features = len(Bundle.open(out).schema.names)
    assert summary["inputs"][0]["type"] == f"float32[N,{n_features}]"

    pred_path = tmp_path / "pred.csv"
    code, stdout, err = run(
        capsys, "predict", out / "model.onnx", "--data", out / "holdout.parquet", "--out", pred_path
    )
    assert code == 0, err
    pred = pd.read_csv(pred_path)
    holdout = pd.read_parquet(out / "holdout.parquet")
    assert len(pred) == len(holdout)
    if metric == "accuracy":
        assert "label" in pred.columns and any(c.startswith("proba_") for c in pred.columns)
        classes = Bundle.open(out).classes
        assert [c for c in pred.columns if c.startswith("proba_")] == [
            f"proba_{c}" for c in classes
        ]
    else:
        assert list(pred.columns) == ["prediction"]

    code, stdout, err = run(capsys, "validate", out)
    assert code == 0, err
    assert "verdict: EQUIVALENT" in stdout
    assert (out / "reports" / "validation.json").is_file()


def test_predict_to_stdout_formats(capsys, iris_bundle: Bundle) -> None:
    code, stdout, _ = run(capsys, "predict", iris_bundle.path, "--data", iris_bundle.holdout_path)
    assert code == 0
    lines = stdout.strip().splitlines()
    assert lines[0] == "label,proba_0,proba_1,proba_2" and len(lines) == 46
    code, stdout, _ = run(
        capsys,
        "predict",
        iris_bundle.onnx_path,
        "--data",
        iris_bundle.holdout_path,
        "--format",
        "jsonl",
    )
    assert stdout.endswith("}\n")  # one object per line, no trailing blank line
    rows = [json.loads(line) for line in stdout.splitlines()]
    assert code == 0 and len(rows) == 45
    assert set(rows[0]) == {"label", "proba_0", "proba_1", "proba_2"}
    # Full float32 precision, as in CSV.
    X, _ = iris_bundle.load_holdout()
    proba = Predictor(iris_bundle.onnx_path).predict(X).probabilities
    assert [r["proba_1"] for r in rows] == [float(str(v)) for v in proba[:, 1]]


def test_predict_parquet_and_jsonl_files(capsys, iris_bundle: Bundle, tmp_path: Path) -> None:
    X, _ = iris_bundle.load_holdout()
    src = tmp_path / "rows.jsonl"
    X.to_json(src, orient="records", lines=True)
    out = tmp_path / "pred.parquet"
    code, _, err = run(capsys, "predict", iris_bundle.onnx_path, "--data", src, "--out", out)
    assert code == 0, err
    assert len(pd.read_parquet(out)) == len(X)


def test_inspect_table(capsys, iris_bundle: Bundle) -> None:
    code, stdout, _ = run(capsys, "inspect", iris_bundle.onnx_path)
    assert code == 0
    for text in ("float32[N,4]", "int64[N]", "TreeEnsembleClassifier", "onnxbridge.classes"):
        assert text in stdout


def test_validate_divergent_exits_1(capsys, tmp_path: Path) -> None:
    out = tmp_path / "lin"
    assert (
        run(capsys, "train", "--data", "diabetes", "--model", "LinearRegression()", "--out", out)[0]
        == 0
    )
    assert run(capsys, "convert", out)[0] == 0
    code, stdout, _ = run(capsys, "validate", out, "--atol", "0", "--rtol", "0", "--json")
    assert code == 1
    assert json.loads(stdout)["verdict"] == "DIVERGENT"


def test_train_and_convert_json(capsys, tmp_path: Path) -> None:
    out = tmp_path / "b"
    code, stdout, _ = run(capsys, "train", "--data", "iris", "--model", RF, "--out", out, "--json")
    assert code == 0 and json.loads(stdout)["metrics"] == {"accuracy": 1.0}
    code, stdout, _ = run(capsys, "convert", out, "--opset", "15", "--zipmap", "--json")
    payload = json.loads(stdout)
    assert code == 0 and payload["zipmap"] is True and payload["target_opsets"][""] == 15
    assert payload["opsets"][""] <= 15


def test_convert_model_file_with_sample(capsys, iris_bundle: Bundle, tmp_path: Path) -> None:
    model = tmp_path / "elsewhere.skops"
    model.write_bytes(iris_bundle.model_path.read_bytes())
    sample = tmp_path / "sample.csv"
    pd.read_parquet(iris_bundle.holdout_path).to_csv(sample, index=False)
    code, _, err = run(capsys, "convert", model, "--sample", sample)
    assert_one_line_error(code, err, r"unexpected 'target'")
    code, _, err = run(capsys, "convert", model, "--sample", sample, "--target", "target")
    assert code == 0, err
    assert (tmp_path / "elsewhere.onnx").is_file()


def test_convert_never_writes_over_what_it_reads_or_a_file_of_the_users(
    capsys, iris_bundle: Bundle, tmp_path: Path
) -> None:
    model = tmp_path / "m.skops"
    model.write_bytes(iris_bundle.model_path.read_bytes())
    sample = tmp_path / "s.csv"
    pd.read_parquet(iris_bundle.holdout_path).to_csv(sample, index=False)
    named_like_data = tmp_path / "out.onnx.data"  # the data file of --out out.onnx
    named_like_data.write_bytes(sample.read_bytes())
    before = {p: p.read_bytes() for p in (model, sample, named_like_data)}
    args = ["convert", model, "--sample", sample, "--target", "target"]
    for out in (sample, model):
        code, _, err = run(capsys, *args, "--out", out)
        assert_one_line_error(code, err, r"--out .* would write over .*; choose another path")
    code, _, err = run(
        capsys, "convert", model, "--sample", named_like_data, "--target", "target",
        "--out", tmp_path / "out.onnx",
    )  # fmt: skip
    assert_one_line_error(code, err, r"--out .* would write over .*out\.onnx\.data")
    assert {p: p.read_bytes() for p in before} == before
    assert not (tmp_path / "out.onnx").exists()
    # A file at the data file's name that no model of that name reads is the user's.
    (tmp_path / "new.onnx.data").write_text("mine")
    code, _, err = run(capsys, *args, "--out", tmp_path / "new.onnx")
    assert code == 0, err
    assert (tmp_path / "new.onnx.data").read_text() == "mine"
    (tmp_path / "new.onnx").unlink()
    code, _, err = run(capsys, *args, "--out", tmp_path / "new.onnx", "--external-data")
    assert code == 0, err  # a forest's trees are attributes: no data file to write
    assert (tmp_path / "new.onnx.data").read_text() == "mine"


def test_train_refuses_to_replace_the_folder_its_data_is_in(capsys, iris_bundle: Bundle) -> None:
    folder = iris_bundle.path
    data = folder / "mine.csv"
    pd.read_parquet(iris_bundle.holdout_path).to_csv(data, index=False)
    before = _snapshot(folder)
    code, _, err = run(
        capsys, "train", "--data", data, "--target", "target", "--model", "LogisticRegression()",
        "--out", folder, "--overwrite",
    )  # fmt: skip
    assert_one_line_error(code, err, r"--data .* is inside --out .*; move the data file out")
    assert _snapshot(folder) == before


@pytest.mark.parametrize(
    ("command", "folder", "other"),
    [
        (["bench", "--batch-sizes", "1,2", "--repeat", "1", "--min-time", "0.001"], "bench.png",
         "bench.json"),
        (["validate", "--budget", "5"], "validation.html", "validation.json"),
    ],
)  # fmt: skip
def test_reports_are_written_whole_or_not_at_all(
    capsys, iris_bundle: Bundle, command: list[str], folder: str, other: str
) -> None:
    reports = iris_bundle.path / "reports"
    shutil.rmtree(reports, ignore_errors=True)
    (reports / folder).mkdir(parents=True)
    card = (iris_bundle.path / "card.json").read_bytes()
    extra = ["--no-progress"] if command[0] == "bench" else []
    code, _, err = run(capsys, command[0], iris_bundle.path, *command[1:], *extra)
    assert_one_line_error(code, err, rf"reports/{folder}' is a folder where a file is expected")
    assert sorted(p.name for p in reports.iterdir()) == [folder]
    assert not (reports / other).exists()
    assert (iris_bundle.path / "card.json").read_bytes() == card


def test_a_convert_that_fails_after_writing_the_model_leaves_the_bundle_as_it_was(
    capsys, iris_bundle: Bundle
) -> None:
    # The golden file is written after model.onnx and the card: a folder in its way fails the
    # command then, and everything convert wrote goes back.
    folder = iris_bundle.path
    (folder / "reports").mkdir(exist_ok=True)
    (folder / "reports" / "validation.json").write_text("{}")
    (folder / "golden.parquet").unlink(missing_ok=True)
    (folder / "golden.parquet").mkdir()
    before = _snapshot(folder)
    code, _, err = run(capsys, "convert", folder, "--precision", "double", "--external-data")
    assert_one_line_error(code, err, r"golden\.parquet' is a folder where a file is expected")
    assert _snapshot(folder) == before
    assert sorted(p.name for p in folder.iterdir() if p.name.startswith(".")) == []


def test_convert_pickle_needs_flag(capsys, iris_bundle: Bundle, tmp_path: Path) -> None:
    import joblib

    path = tmp_path / "m.joblib"
    joblib.dump(iris_bundle.load_estimator(), path)
    sample = tmp_path / "s.parquet"
    iris_bundle.load_holdout()[0].to_parquet(sample)
    code, _, err = run(capsys, "convert", path, "--sample", sample)
    assert_one_line_error(code, err, r"pickle file.*--allow-pickle")
    with pytest.warns(UserWarning, match="runs any code"):
        code, _, err = run(
            capsys,
            "convert",
            path,
            "--sample",
            sample,
            "--allow-pickle",
            "--out",
            tmp_path / "m.onnx",
        )
    assert code == 0, err


def _csv(tmp_path: Path) -> Path:
    path = tmp_path / "d.csv"
    path.write_text("a,b,y\n1,2,0\n2,3,1\n3,1,0\n4,4,1\n5,2,0\n6,1,1\n")
    return path


BAD_INPUTS = [
    (["train", "--data", "irs", "--model", RF], r"--data 'irs' is not a built-in dataset"),
    (["train", "--data", "iris", "--model", "RandomForest()"], r"unknown estimator 'RandomForest'"),
    (
        ["train", "--data", "iris", "--model", "RandomForestClassifier(trees=3)"],
        r"has no parameter 'trees'",
    ),
    (
        ["train", "--data", "CSV", "--model", "LogisticRegression()", "--target", "nope"],
        r"--target 'nope' is not a column of",
    ),
    (["train", "--data", "CSV", "--model", "LogisticRegression()"], r"--target"),
    (["convert", "UNFITTED"], r"is not fitted"),
    (["convert", "NOCONV"], r"NearestCentroid\(metric='manhattan'\) cannot be converted"),
    (["inspect", "TRUNCATED"], r"(truncated|not an ONNX model)"),
    (["inspect", "CSVFILE"], r"not an ONNX model"),
    (["predict", "MODEL", "--data", "XLSX"], r"unknown file type '.xlsx'"),
    (["predict", "MODEL", "--data", "WRONGCOLS"], r"missing columns: .*sepal length"),
    (["predict", "TRUNCATED", "--data", "CSV"], r"not a loadable ONNX model"),
    (["validate", "NOTBUNDLE"], r"is not a bundle"),
]


def _bundle_with_estimator(source: Bundle, folder: Path, estimator: object) -> Path:
    """A copy of ``source`` whose model.skops holds ``estimator`` (card hash updated)."""
    shutil.copytree(source.path, folder)
    save_estimator(estimator, folder / "model.skops")
    bundle = Bundle.open(folder)
    bundle.record_file("model.skops")
    bundle.save_card()
    return folder


@pytest.mark.parametrize(("args", "pattern"), BAD_INPUTS)
def test_bad_input_is_one_line_exit_2(
    capsys, iris_bundle: Bundle, tmp_path: Path, args: list[str], pattern: str
) -> None:
    X, y = iris_bundle.load_holdout()
    cut = tmp_path / "cut.onnx"
    cut.write_bytes(iris_bundle.onnx_path.read_bytes()[:500])
    xlsx = tmp_path / "d.xlsx"
    xlsx.write_bytes(b"PK")
    wrong = tmp_path / "wrong.csv"
    wrong.write_text("x,y\n1,2\n")
    subs = {
        "CSV": _csv(tmp_path),
        "CSVFILE": _csv(tmp_path),
        "MODEL": iris_bundle.onnx_path,
        "TRUNCATED": cut,
        "XLSX": xlsx,
        "WRONGCOLS": wrong,
        "NOTBUNDLE": tmp_path,
        "UNFITTED": _bundle_with_estimator(
            iris_bundle, tmp_path / "unfitted", RandomForestClassifier()
        ),
        "NOCONV": _bundle_with_estimator(
            iris_bundle, tmp_path / "noconv", NearestCentroid(metric="manhattan").fit(X, y)
        ),
    }
    touched = [subs[a] for a in args if a in subs and subs[a].is_dir()] + [iris_bundle.path]
    before = [_snapshot(p) for p in touched]
    code, _, err = run(capsys, *[str(subs.get(a, a)) for a in args])
    assert_one_line_error(code, err, pattern)
    assert [_snapshot(p) for p in touched] == before


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.mark.parametrize(
    ("args", "pattern"),
    [
        (["train", "--data", "iris"], r"Missing option '--model'.*onnxbridge train --help"),
        (["validate", "x", "--atol", "abc"], r"Invalid value for '--atol'"),
        (["nosuch"], r"No such command 'nosuch'"),
    ],
)
def test_usage_errors_are_one_line(capsys, args: list[str], pattern: str) -> None:
    code, _, err = run(capsys, *args)
    assert_one_line_error(code, err, pattern)


def test_nan_tolerance_is_refused(capsys, iris_bundle: Bundle) -> None:
    before = _snapshot(iris_bundle.path)
    code, _, err = run(capsys, "validate", iris_bundle.path, "--atol", "nan")
    assert_one_line_error(code, err, r"tolerances must be finite numbers >= 0")
    assert _snapshot(iris_bundle.path) == before


def test_predict_reads_json_arrays_and_names_output_errors(
    capsys, iris_bundle: Bundle, tmp_path: Path
) -> None:
    X, _ = iris_bundle.load_holdout()
    src = tmp_path / "rows.json"
    X.to_json(src, orient="records")  # a JSON array, not JSON lines
    code, stdout, err = run(capsys, "predict", iris_bundle.path, "--data", src)
    assert code == 0, err
    assert len(stdout.strip().splitlines()) == len(X) + 1
    code, _, err = run(
        capsys, "predict", iris_bundle.path, "--data", src, "--out", tmp_path / "p.xlsx"
    )
    assert_one_line_error(code, err, r"cannot write .*p.xlsx'.*unknown file type")


def test_console_script_prints_warnings_on_one_line(iris_bundle: Bundle, tmp_path: Path) -> None:
    import joblib

    path = tmp_path / "m.joblib"
    joblib.dump(iris_bundle.load_estimator(), path)
    sample = tmp_path / "s.csv"
    iris_bundle.load_holdout()[0].to_csv(sample, index=False)
    exe = Path(sys.executable).parent / "onnxbridge"
    proc = subprocess.run(
        [exe, "convert", path, "--sample", sample, "--allow-pickle"], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines() == [
        "warning: loading m.joblib with pickle: this runs any code in the file; only use files "
        "you made yourself"
    ]


def test_convert_names_score_outputs(capsys, tmp_path: Path) -> None:
    out = tmp_path / "svc"
    assert run(capsys, "train", "--data", "iris", "--model", "SVC()", "--out", out)[0] == 0
    code, stdout, err = run(capsys, "convert", out)
    assert code == 0, err
    assert "outputs: label, probabilities (scores)" in stdout
    code, stdout, _ = run(capsys, "predict", out, "--data", out / "holdout.parquet")
    assert code == 0 and stdout.splitlines()[0] == "label,score_0,score_1,score_2"


def test_convert_folds_a_scaler_unless_told_not_to(capsys, tmp_path: Path) -> None:
    import onnx

    out = tmp_path / "lr"
    model = "StandardScaler() | LogisticRegression(max_iter=200)"
    assert run(capsys, "train", "--data", "iris", "--model", model, "--out", out)[0] == 0
    code, stdout, err = run(capsys, "convert", out)
    assert code == 0, err
    assert "note: folded the scaling (Scaler) into LinearClassifier" in stdout
    folded = [n.op_type for n in onnx.load(str(out / "model.onnx")).graph.node]
    code, stdout, err = run(capsys, "convert", out, "--no-fold")
    assert code == 0, err
    assert "folded" not in stdout
    kept = [n.op_type for n in onnx.load(str(out / "model.onnx")).graph.node]
    assert "Scaler" not in folded and kept == ["Scaler", *folded]
    code, stdout, err = run(capsys, "validate", out)
    assert code == 0 and "verdict: EQUIVALENT" in stdout, err


def test_convert_writes_tree_blocks_of_the_size_asked(capsys, tmp_path: Path) -> None:
    import onnx

    out = tmp_path / "forest"
    model = "RandomForestRegressor(n_estimators=6, random_state=0)"
    assert run(capsys, "train", "--data", "diabetes", "--model", model, "--out", out)[0] == 0

    def trees_after(*flags: str) -> list[str]:
        code, _, err = run(capsys, "convert", out, *flags)
        assert code == 0, err
        nodes = onnx.load(str(out / "model.onnx")).graph.node
        return [n.op_type for n in nodes if "Tree" in n.op_type or n.op_type == "Sum"]

    assert trees_after() == ["TreeEnsemble"]  # small: one operator by default
    assert trees_after("--tree-block-nodes", "1") == ["TreeEnsemble"] * 6 + ["Sum"]
    assert trees_after("--tree-block-nodes", "1", "--ml-opset", "3") == [
        *["TreeEnsembleRegressor"] * 6,
        "Sum",
    ]
    code, stdout, err = run(capsys, "validate", out)
    assert code == 0 and "verdict: EQUIVALENT" in stdout, err


def test_console_script_no_traceback_and_debug(tmp_path: Path) -> None:
    exe = Path(sys.executable).parent / "onnxbridge"
    proc = subprocess.run([exe, "validate", str(tmp_path / "none")], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: bundle") and "Traceback" not in proc.stderr
    proc = subprocess.run(
        [exe, "validate", str(tmp_path / "none"), "--debug"], capture_output=True, text=True
    )
    assert proc.returncode == 2 and "Traceback" in proc.stderr and "BundleError" in proc.stderr


def test_demo_runs_the_reference_workflow(capsys, tmp_path: Path) -> None:
    out = tmp_path / "iris[rf]"  # brackets: printed as they are, not read as rich markup
    code, stdout, err = run(capsys, "demo", "--out", out)
    assert code == 0, err
    assert "test accuracy: 1.0000" in stdout
    assert "label: 0 of 45 labels differ" in stdout
    assert "verdict: EQUIVALENT" in stdout
    assert "ms per call" in stdout
    # The timing is the untuned session's; the demo points to tune and bench for this bundle.
    words = " ".join(stdout.split())
    assert f"`onnxbridge tune {out}`" in words and f"`onnxbridge bench {out}`" in words
    assert f"$ onnxbridge validate {out} " in words and f"bundle left in {out}:" in words
    report = json.loads((out / "reports" / "validation.json").read_text())
    assert report["outputs"][1]["max_abs_diff"] <= 1e-6
    assert (report["atol"], report["rtol"]) == (1e-6, 0.0)  # the reference workflow's bound
    card = Bundle.open(out).card
    assert card["conversion"]["target_opsets"][""] == 15
    # Running it again replaces its own bundle; a foreign folder is refused.
    assert run(capsys, "demo", "--out", out)[0] == 0
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    code, _, err = run(capsys, "demo", "--out", foreign)
    assert_one_line_error(code, err, r"is not a bundle")
    assert (foreign / "notes.txt").read_text() == "keep me"


def test_version_and_help(capsys) -> None:
    from onnxbridge import __version__

    code, stdout, _ = run(capsys, "--version")
    assert code == 0 and stdout.strip() == f"onnxbridge {__version__}"
    code, stdout, _ = run(capsys, "--help")
    assert code == 0
    for command in ("train", "convert", "inspect", "predict", "validate", "demo"):
        assert command in stdout


def test_write_errors_name_the_users_path(capsys, iris_bundle: Bundle, tmp_path: Path) -> None:
    blocker = tmp_path / "predictions.csv"
    blocker.write_text("x")
    target = blocker / "more" / "p.csv"
    code, _, err = run(
        capsys, "predict", iris_bundle.path, "--data", iris_bundle.holdout_path, "--out", target
    )
    assert_one_line_error(code, err, r"is a file, not a folder; choose another path")
    assert str(target) in err and ".tmp" not in err
    assert blocker.read_text() == "x"
    # The kernel refuses new files in /proc, even to root: the message names the user's file.
    code, _, err = run(
        capsys,
        "predict",
        iris_bundle.path,
        "--data",
        iris_bundle.holdout_path,
        "--out",
        "/proc/p.csv",
    )
    assert_one_line_error(code, err, r"cannot access '/proc/p.csv'")
    assert ".tmp" not in err


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1e300", r"1e\+300 is out of range for float32, which takes finite numbers from "),
        ("inf", r"inf is not a finite number the model can score: float32 takes finite"),
        ("-inf", r"-inf is not a finite number the model can score"),
    ],
)
def test_predict_refuses_values_the_model_cannot_take(
    capsys, iris_bundle: Bundle, tmp_path: Path, text: str, message: str
) -> None:
    X, _ = iris_bundle.load_holdout()
    src = tmp_path / "rows.csv"
    X.head(5).to_csv(src, index=False)
    lines = src.read_text().splitlines()
    cells = lines[3].split(",")
    cells[2] = text  # data row 3, the petal length
    lines[3] = ",".join(cells)
    src.write_text("\n".join(lines) + "\n")
    out = tmp_path / "pred.csv"
    code, stdout, err = run(capsys, "predict", iris_bundle.path, "--data", src, "--out", out)
    assert_one_line_error(
        code, err, r"bad value in row 3, column 'petal length \(cm\)': " + message
    )
    assert stdout == "" and not out.exists()


# --- bad files a user can hand over: one line, never "unexpected" -------------------------------


def _unequal_outputs_model(path: Path) -> None:
    """A graph whose label output has a row per input row, but probabilities only one row."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    def ints(name: str, value: int) -> onnx.TensorProto:
        return numpy_helper.from_array(np.array([value], np.int64), name)

    nodes = [
        helper.make_node("ArgMax", ["input"], ["label"], axis=1, keepdims=0),
        helper.make_node("Slice", ["input", "zero", "one", "zero"], ["first_row"]),
        helper.make_node("Slice", ["first_row", "zero", "three", "one"], ["first3"]),
        helper.make_node("Softmax", ["first3"], ["probabilities"], axis=1),
    ]
    graph = helper.make_graph(
        nodes,
        "unequal",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [None, 4])],
        [
            helper.make_tensor_value_info("label", TensorProto.INT64, [None]),
            helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, [None, 3]),
        ],
        initializer=[ints("zero", 0), ints("one", 1), ints("three", 3)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])
    model.ir_version = 8
    onnx.save(model, path)


def test_predict_with_outputs_of_unequal_length(capsys, iris_bundle: Bundle, tmp_path: Path):
    model = tmp_path / "unequal.onnx"
    _unequal_outputs_model(model)
    rows = tmp_path / "rows.csv"
    iris_bundle.load_holdout()[0].to_csv(rows, index=False)
    code, _, err = run(capsys, "predict", model, "--data", rows)
    assert_one_line_error(
        code, err, r"outputs have different numbers of rows \(label 45, probabilities 1\)"
    )


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ({"target": "y"}, r"card\.json' is damaged: the field 'target' should be an object"),
        ({"files": []}, r"card\.json' is damaged: the field 'files' should be an object"),
        ({"model": 7}, r"card\.json' is damaged: the field 'model' should be an object, got 7"),
    ],
)
@pytest.mark.parametrize("command", ["convert", "validate", "bench"])
def test_edited_card_is_one_line_naming_file_and_field(
    capsys, iris_bundle: Bundle, edit: dict, message: str, command: str
) -> None:
    card = json.loads(iris_bundle.card_path.read_text())
    iris_bundle.card_path.write_text(json.dumps({**card, **edit}))
    code, _, err = run(capsys, command, iris_bundle.path)
    assert_one_line_error(code, err, message)
    assert "unexpected" not in err


def test_a_folder_that_is_not_a_bundle_is_named(capsys, tmp_path: Path) -> None:
    folder = tmp_path / "models"
    folder.mkdir()
    for command in ("inspect", "predict"):
        extra = ["--data", tmp_path / "rows.csv"] if command == "predict" else []
        code, _, err = run(capsys, command, folder, *extra)
        assert_one_line_error(code, err, r"models' is a folder, not a \.onnx file or a bundle")


def test_train_on_a_folder_says_it_is_a_folder(capsys, tmp_path: Path) -> None:
    folder = tmp_path / "data.csv"
    folder.mkdir()
    code, _, err = run(
        capsys, "train", "--data", folder, "--target", "y", "--model", RF, "--out", tmp_path / "b"
    )
    assert_one_line_error(code, err, r"data\.csv' is a folder, not a data file; pass one CSV")
    assert not (tmp_path / "b").exists()


def test_validate_with_outputs_of_unequal_length(capsys, iris_bundle: Bundle, tmp_path: Path):
    model = tmp_path / "unequal.onnx"
    _unequal_outputs_model(model)
    rows = tmp_path / "rows.csv"
    iris_bundle.load_holdout()[0].to_csv(rows, index=False)
    code, out, err = run(
        capsys, "validate", model, "--reference", iris_bundle.model_path, "--data", rows,
        "--probes", "holdout", "--no-html", "--no-diagnosis",
    )  # fmt: skip
    assert code == 1, err
    assert "unexpected" not in err and "Traceback" not in err
    flat = " ".join(out.split())
    assert "outputs have different numbers of rows (label 45, probabilities 1) for 45" in flat
    assert "verdict: DIVERGENT" in flat


def test_predict_reads_a_delimiter_at_the_end_of_rows_and_refuses_extra_values(
    capsys, iris_bundle: Bundle, tmp_path: Path
) -> None:
    # pandas takes the first column of such a file as the index and shifts every value one
    # column to the left: the predictions would be those of other rows.
    X, _ = iris_bundle.load_holdout()
    rows = X.head(8)
    header = ",".join(rows.columns)
    lines = [",".join(repr(float(v)) for v in row) for row in rows.to_numpy()]
    trailing = tmp_path / "trailing.csv"
    trailing.write_text("\n".join([header, *(line + "," for line in lines)]) + "\n")
    code, out, err = run(capsys, "predict", iris_bundle.path, "--data", trailing)
    assert code == 0, err
    expected = Predictor(iris_bundle.onnx_path).predict(rows).to_frame()
    got = pd.read_csv(io.StringIO(out))
    assert got["label"].tolist() == expected["label"].tolist()
    pd.testing.assert_frame_equal(
        got.drop(columns="label"), expected.drop(columns="label"), check_dtype=False
    )
    extra = tmp_path / "extra.csv"
    extra.write_text("\n".join([header, *(line + ",7" for line in lines)]) + "\n")
    code, _, err = run(capsys, "predict", iris_bundle.path, "--data", extra)
    assert_one_line_error(code, err, r"rows of '.*extra.csv' have more values than its header")


def test_predict_never_writes_over_its_input_or_the_bundle(
    capsys, iris_bundle: Bundle, tmp_path: Path
) -> None:
    X, _ = iris_bundle.load_holdout()
    data = tmp_path / "rows.csv"
    X.to_csv(data, index=False)
    (tmp_path / "link.csv").symlink_to(data)
    before = {p: p.read_bytes() for p in [data, *iris_bundle.path.iterdir()] if p.is_file()}
    bundle = iris_bundle.path
    outs = [data, tmp_path / "link.csv", bundle / "card.json", bundle / "holdout.parquet"]
    for out in outs:
        code, _, err = run(capsys, "predict", iris_bundle.path, "--data", data, "--out", out)
        assert_one_line_error(code, err, r"--out .* would write over .*; choose another path")
    assert {p: p.read_bytes() for p in before} == before
    # A file of the user's own inside the bundle folder may be written (and written again).
    for _ in range(2):
        out = iris_bundle.path / "predictions.csv"
        code, _, err = run(capsys, "predict", iris_bundle.path, "--data", data, "--out", out)
        assert code == 0, err
    assert len(pd.read_csv(iris_bundle.path / "predictions.csv")) == len(X)
