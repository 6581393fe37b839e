"""`onnxbridge validate`: bundles and foreign models, options, exit codes 0 / 1 / 2, golden."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import HistGradientBoostingRegressor, RandomForestClassifier

from cli_support import assert_one_line_error, run
from onnxbridge import Bundle, convert_estimator, save_estimator
from onnxbridge.errors import BundleError
from onnxbridge.validate import check_golden, write_golden


def test_bundle_equivalent_exits_0_with_probe_table(capsys, iris_bundle: Bundle) -> None:
    code, out, err = run(capsys, "validate", iris_bundle.path)
    assert code == 0, err
    assert "scikit-learn vs onnxruntime on 45 holdout rows" in out
    assert "probe sets" in out and "thresholds" in out and "sk~ort" in out and "1-row" in out
    assert "skipped: strings (no string columns); categories (no string columns)" in out
    assert "diagnosis" not in out and "warnings" not in out
    assert out.rstrip().endswith("validation.html")
    assert "verdict: EQUIVALENT" in out
    assert (iris_bundle.reports_dir / "validation.html").is_file()


def test_options_reach_the_report(capsys, iris_bundle: Bundle, tmp_path: Path) -> None:
    code, out, _ = run(
        capsys,
        "validate",
        iris_bundle.path,
        "--probes",
        "holdout,range,batch",
        "--runtimes",
        "sklearn,onnxruntime",
        "--range-rows",
        "30",
        "--batch-rows",
        "5",
        "--seed",
        "7",
        "--tolerance",
        "probabilities=1e-6:0",
        "--report-dir",
        tmp_path / "out",
        "--no-html",
        "--json",
    )
    assert code == 0
    report = json.loads(out)
    assert [p["name"] for p in report["probe_sets"]] == ["holdout", "range", "batch"]
    assert [p["n_rows"] for p in report["probe_sets"]] == [45, 30, 5]
    assert report["seed"] == 7 and set(report["runtimes"]) == {"sklearn", "onnxruntime"}
    assert report["tolerances"]["probabilities"] == {"atol": 1e-6, "rtol": 0.0}
    assert [p["name"] for p in report["probe_sets"][2]["pairs"]] == [
        "sklearn~onnxruntime",
        "onnxruntime~onnxruntime[1-row]",
    ]
    assert (tmp_path / "out" / "validation.json").is_file()
    assert not (tmp_path / "out" / "validation.html").exists()


def test_divergent_exits_1(capsys, iris_bundle: Bundle) -> None:
    # Exact equality is stricter than float32 arithmetic gives.
    code, out, _ = run(
        capsys, "validate", iris_bundle.path, "--tolerance", "probabilities=0:0", "--no-diagnosis"
    )
    assert code == 1
    assert "caught by: holdout, range, thresholds, edge, batch" in out
    assert "warnings: missing" in out  # the holdout has no NaN: missing does not gate
    assert "verdict: DIVERGENT" in out


@pytest.mark.parametrize(
    ("args", "pattern"),
    [
        (["--probes", "holdout,nope"], r"--probes 'holdout,nope' is not valid; pass a comma"),
        (["--runtimes", "sklearn"], r"--runtimes 'sklearn' is not valid: pass two or more of"),
        (["--tolerance", "value"], r"--tolerance 'value' is not ROLE=ATOL\[:RTOL\]"),
        (["--tolerance", "label=0"], r"no tolerance for output role 'label': labels are"),
        (["--atol", "-1"], r"tolerances must be finite numbers >= 0, got --atol -1.0"),
        (["--range-rows", "0"], r"--range-rows 0 is not allowed: it must be an integer >= 1"),
        (["--missing-values", "maybe"], r"--missing-values 'maybe' is not valid; use one of auto"),
        (["--data", "x.csv"], r"--reference, --data, --target and --allow-pickle are for an"),
    ],
)
def test_bad_options_exit_2(capsys, iris_bundle: Bundle, args: list[str], pattern: str) -> None:
    code, _, err = run(capsys, "validate", iris_bundle.path, *args)
    assert_one_line_error(code, err, pattern)


# ---------------------------------------------------------------------------- any model
@pytest.fixture
def foreign(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A model trained and converted elsewhere: .onnx, .skops and a CSV of held-out rows."""
    rng = np.random.RandomState(0)
    frame = pd.DataFrame(rng.rand(200, 3), columns=["a", "b", "c"])
    frame["y"] = np.digitize(frame["a"] + frame["b"], [0.8, 1.2])  # three classes
    model = RandomForestClassifier(n_estimators=5, random_state=0)
    model.fit(frame[["a", "b", "c"]][:150], frame["y"][:150])
    onnx_path = tmp_path / "elsewhere" / "model.onnx"
    onnx_path.parent.mkdir()
    convert_estimator(model, frame[["a", "b", "c"]].head(20)).save(onnx_path)
    skops = tmp_path / "elsewhere" / "model.skops"
    save_estimator(model, skops)
    data = tmp_path / "rows.csv"
    frame[150:].to_csv(data, index=False)
    return onnx_path, skops, data


def test_any_model_with_reference_and_data(capsys, foreign) -> None:
    onnx_path, skops, data = foreign
    code, out, err = run(
        capsys, "validate", onnx_path, "--reference", skops, "--data", data, "--target", "y"
    )
    assert code == 0, err
    assert "scikit-learn vs onnxruntime on 50 holdout rows" in out
    report = json.loads((onnx_path.parent / "reports" / "validation.json").read_text())
    assert report["verdict"] == "EQUIVALENT" and report["reference"] == "RandomForestClassifier"
    assert (onnx_path.parent / "reports" / "validation.html").is_file()


def test_any_model_errors(capsys, foreign, tmp_path: Path) -> None:
    onnx_path, skops, data = foreign
    code, _, err = run(capsys, "validate", onnx_path)
    assert_one_line_error(
        code, err, r"needs --reference MODEL.skops \(the source model\) and --data"
    )
    # Columns the model does not take (the target here) are left out, by name.
    code, _, _ = run(capsys, "validate", onnx_path, "--reference", skops, "--data", data)
    assert code == 0
    partial = tmp_path / "partial.csv"
    pd.read_csv(data).drop(columns=["b"]).to_csv(partial, index=False)
    code, _, err = run(capsys, "validate", onnx_path, "--reference", skops, "--data", partial)
    assert_one_line_error(code, err, r"the data lacks the model's columns 'b'; pass rows with the")
    text = tmp_path / "text.csv"
    pd.read_csv(data).assign(b="abc").to_csv(text, index=False)
    code, _, err = run(capsys, "validate", onnx_path, "--reference", skops, "--data", text)
    assert_one_line_error(code, err, r"columns 'b' are not numeric \(dtype .*\); the model's input")
    code, _, err = run(
        capsys, "validate", onnx_path, "--reference", skops, "--data", data, "--target", "z"
    )
    assert_one_line_error(code, err, r"--target 'z' is not a column of")
    code, _, err = run(capsys, "validate", onnx_path, "--golden", "--reference", skops)
    assert_one_line_error(code, err, r"--golden needs a bundle folder")
    pickle = tmp_path / "m.pkl"
    pickle.write_bytes(b"not read")
    code, _, err = run(capsys, "validate", onnx_path, "--reference", pickle, "--data", data)
    assert_one_line_error(code, err, r"is a pickle file, and loading a pickle runs any code")
    code, _, err = run(capsys, "validate", tmp_path / "none.onnx", "--reference", skops)
    assert_one_line_error(code, err, r"needs --reference MODEL.skops|does not exist")


def test_python_api_validate_model(foreign) -> None:
    from onnxbridge import load_estimator, validate_model

    onnx_path, skops, data = foreign
    rows = pd.read_csv(data).drop(columns=["y"])
    report = validate_model(onnx_path, load_estimator(skops), rows, probes=["holdout", "edge"])
    assert report.verdict == "EQUIVALENT"
    assert [p.name for p in report.probe_sets] == ["holdout", "edge"]


# -------------------------------------------------------------------------------- golden
def test_convert_stores_golden_and_validate_golden_rechecks(capsys, tmp_path: Path) -> None:
    out = tmp_path / "b"
    assert (
        run(
            capsys,
            "train",
            "--data",
            "iris",
            "--model",
            "DecisionTreeClassifier(random_state=0)",
            "--out",
            out,
        )[0]
        == 0
    )
    code, stdout, _ = run(capsys, "convert", out)
    assert code == 0 and f"golden predictions: {out / 'golden.parquet'}" in stdout
    card = Bundle.open(out).card
    assert card["golden"]["file"] == "golden.parquet" and card["golden"]["rows"] > 45
    assert card["golden"]["probe_sets"][:3] == ["holdout", "range", "thresholds"]
    code, stdout, _ = run(capsys, "validate", out, "--golden")
    assert code == 0 and "golden predictions:" in stdout and "identical" in stdout
    report = json.loads((out / "reports" / "validation.json").read_text())
    assert report["golden"]["identical"] and report["golden"]["ok"]


def test_a_bundle_whose_rows_hold_inf_converts_and_validates(capsys, tmp_path: Path) -> None:
    # HistGradientBoosting trains on ±inf; predict refuses such rows, so the golden file and
    # validate leave them out instead of failing (convert had already replaced model.onnx).
    rng = np.random.RandomState(0)
    a, b = rng.rand(300), rng.rand(300)
    a[::10] = np.inf
    data = tmp_path / "inf.csv"
    pd.DataFrame({"a": a, "b": b, "y": (b > 0.5).astype(int)}).to_csv(data, index=False)
    out = tmp_path / "b"
    model = "HistGradientBoostingClassifier(max_iter=5)"
    args = ["train", "--data", data, "--target", "y", "--model", model, "--out", out]
    assert run(capsys, *args)[0] == 0
    code, _, err = run(capsys, "convert", out)
    assert code == 0, err
    golden = pd.read_parquet(out / "golden.parquet")
    assert len(golden) == Bundle.open(out).card["golden"]["rows"] > 0
    assert np.isfinite(golden["in:a"].dropna()).all()
    code, stdout, err = run(capsys, "validate", out, "--golden")
    assert code == 0, stdout + err
    assert "verdict: EQUIVALENT" in stdout
    assert "warning: holdout: " in stdout
    assert "rows left out: the ONNX model's inputs cannot take" in stdout


def test_golden_reports_a_changed_model(tmp_path: Path) -> None:
    from onnxbridge import convert_bundle, train_bundle, validate_bundle

    bundle, _ = train_bundle(
        "diabetes", "DecisionTreeRegressor(max_depth=4, random_state=0)", tmp_path / "d"
    )
    convert_bundle(bundle)
    write_golden(bundle)
    assert check_golden(bundle).identical
    # What a library upgrade could do: the same model gives other numbers. Here a model fitted
    # on a shifted target stands in for it, recorded in the card as if convert wrote it.
    X, y = bundle.load_holdout()
    shifted = HistGradientBoostingRegressor(max_iter=5, random_state=0).fit(X, y + 1.0)
    convert_estimator(shifted, X.head(20)).save(bundle.onnx_path)
    bundle.record_file("model.onnx")
    bundle.save_card()
    golden = check_golden(bundle)
    assert not golden.ok and not golden.identical
    holdout = next(o for o in golden.outputs if o["probe"] == "holdout")
    assert holdout["role"] == "value" and holdout["n_changed"] == holdout["n_rows"] == 133
    report = validate_bundle(bundle, golden=True, probes=["holdout"], diagnose=False)
    assert report.verdict == "DIVERGENT"
    assert report.diagnoses[-1].kind == "golden"
    assert "re-run `onnxbridge convert BUNDLE`" in report.diagnoses[-1].next_step


def test_golden_missing_or_tampered(iris_bundle: Bundle) -> None:
    with pytest.raises(BundleError, match=r"has no golden predictions; run `onnxbridge convert"):
        check_golden(iris_bundle)
    path = write_golden(iris_bundle)
    with path.open("ab") as handle:
        handle.write(b"x")
    with pytest.raises(BundleError, match=r"golden.parquet in .* changed since it was recorded"):
        check_golden(iris_bundle)
