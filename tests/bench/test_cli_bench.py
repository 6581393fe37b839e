"""The bench and tune commands: tables, --json, one-line errors; predict runs the tuned model."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import pandas as pd
import pytest

from cli_support import assert_one_line_error, run
from onnxbridge import Bundle
from onnxbridge.runtime._settings import SESSION_KEY

SMALL = ["--repeat", "2", "--min-time", "0.002", "--no-progress"]


def test_bench_prints_the_table_and_writes_the_reports(capsys, any_bundle: Bundle) -> None:
    code, out, err = run(
        capsys, "bench", any_bundle.path, "--batch-sizes", "1,30", "--threads", "1", *SMALL
    )
    assert code == 0, err
    for text in ("sklearn", "ort-default", "ort-1t", "onnxbridge", "×sklearn", "bench.png"):
        assert text in out
    assert "run `onnxbridge tune` to tune them" in out
    assert (any_bundle.reports_dir / "bench.json").is_file()


def test_bench_json_and_sweep(capsys, iris_bundle: Bundle) -> None:
    code, out, err = run(
        capsys,
        "bench",
        iris_bundle.path,
        "--batch-sizes",
        "2",
        "--threads",
        "1",
        "--sweep",
        "n_estimators=2,4",
        "--sweep-batch-sizes",
        "1",
        "--json",
        *SMALL,
    )
    assert code == 0, err
    payload = json.loads(out)
    assert payload["batch_sizes"] == [2]
    assert [v["value"] for v in payload["sweep"]["variants"]] == [2, 4]


def test_tune_then_predict_uses_the_stored_settings(
    capsys, iris_bundle: Bundle, tmp_path: Path
) -> None:
    X, _ = iris_bundle.load_holdout()
    data = tmp_path / "rows.csv"
    X.to_csv(data, index=False)
    code, before, err = run(capsys, "predict", iris_bundle.path, "--data", data)
    assert code == 0, err
    code, out, err = run(capsys, "tune", iris_bundle.path, "--throughput-rows", "100", *SMALL)
    assert code == 0, err
    assert "← chosen" in out and "rule: calls of at most" in out
    assert "stored in" in out
    code, after, err = run(capsys, "predict", iris_bundle.path, "--data", data)
    assert code == 0, err
    pd.testing.assert_frame_equal(
        pd.read_csv(pd.io.common.StringIO(before)), pd.read_csv(pd.io.common.StringIO(after))
    )
    # predict reads the stored entry: damage it and predict says so.
    model = onnx.load(str(iris_bundle.onnx_path))
    for prop in model.metadata_props:
        if prop.key == SESSION_KEY:
            prop.value = "{broken"
    onnx.save(model, str(iris_bundle.onnx_path))
    code, _, err = run(capsys, "predict", iris_bundle.onnx_path, "--data", data)
    assert_one_line_error(code, err, r"onnxbridge.session entry is not valid JSON.*tune")


def test_tune_json_dry_run(capsys, diabetes_bundle: Bundle) -> None:
    before = diabetes_bundle.onnx_path.read_bytes()
    code, out, err = run(
        capsys, "tune", diabetes_bundle.path, "--regime", "latency", "--dry-run", "--json", *SMALL
    )
    assert code == 0, err
    payload = json.loads(out)
    assert [r["regime"] for r in payload["regimes"]] == ["latency"]
    assert diabetes_bundle.onnx_path.read_bytes() == before


@pytest.mark.parametrize(
    ("args", "pattern"),
    [
        (["bench", "{bundle}", "--batch-sizes", "1,x"], r"batch size 'x' is not a whole number"),
        (["bench", "{bundle}", "--threads", "one"], r"--threads 'one' is not a list of whole"),
        (
            ["bench", "{bundle}", "--batch-sizes", "1,99999999999999999999"],
            r"batch size '99999999999999999999' is above 10,000,000 rows",
        ),
        (["bench", "{bundle}", "--threads", "1,100000"], r"thread count 100000 is above 1024"),
        (["bench", "nowhere"], r"'nowhere' does not exist; pass a bundle folder or a .onnx"),
        (["bench", "{bundle}", "--sweep", "x"], r"--sweep 'x' is not PARAM=V1,V2"),
        (["tune", "{bundle}", "--regime", "fast"], r"--regime 'fast' is not one of"),
        (["tune", "{bundle}", "--engines", "gpu"], r"--engines 'gpu' is not one of"),
    ],
)
def test_errors_are_one_line(capsys, iris_bundle: Bundle, args: list[str], pattern: str) -> None:
    code, _, err = run(capsys, *[a.format(bundle=iris_bundle.path) for a in args], *SMALL)
    assert_one_line_error(code, err, pattern)


@pytest.mark.parametrize("command", ["bench", "tune"])
def test_error_off_a_terminal_is_exactly_one_line(capsys, tmp_path: Path, command: str) -> None:
    # The progress bar is on by default; off a terminal it must not add a blank line.
    code, _, err = run(capsys, command, tmp_path)
    assert code == 2
    assert err.splitlines() == [
        f"error: {str(tmp_path)!r} is not a bundle: it has no card.json; create one with "
        "`onnxbridge train --out DIR`"
    ]
