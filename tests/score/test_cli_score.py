"""The score command: exit codes, one-line errors, --json, and a real run killed with SIGKILL
half-way, then finished with --resume."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from cli_support import assert_one_line_error, run
from onnxbridge import Predictor
from wait_support import wait_until


def test_score_prints_a_summary_and_json(capsys, rows, tmp_path: Path, iris_model: Path) -> None:
    rows(120).to_csv(tmp_path / "a.csv", index=False)
    rows(80, seed=1).to_parquet(tmp_path / "b.parquet", index=False)
    code, out, err = run(
        capsys, "score", iris_model.parent, tmp_path / "a.csv", tmp_path / "b.parquet",
        "--output", tmp_path / "scores", "--keep", "id",
    )  # fmt: skip
    assert code == 0, err
    assert re.match(r"scored 200 rows from 2 inputs in [\d.]+ s \([\d,]+ rows/s, peak memory", out)
    assert f"output: {tmp_path / 'scores'} (2 parts)" in out
    code, out, err = run(
        capsys, "score", iris_model, str(tmp_path / "*.csv"), "-o", tmp_path / "one.parquet",
        "--json", "--batch-size", "16",
    )  # fmt: skip
    assert code == 0, err
    summary = json.loads(out)
    assert summary["rows"] == 120 and summary["bad_rows"] == 0 and summary["inputs"] == 1
    assert summary["batch_size"] == 16 and summary["engine"] == "local"
    for key in ("seconds", "rows_per_second", "peak_rss_bytes", "peak_rss_mib"):
        assert summary[key] > 0, key


def test_bad_rows_exit_2_with_one_line_or_skip_with_a_count(
    capsys, rows, tmp_path: Path, iris_model: Path
) -> None:
    frame = rows(50).astype({"sepal length (cm)": object})
    frame.loc[9, "sepal length (cm)"] = "ten"
    frame.to_csv(tmp_path / "in.csv", index=False)
    code, _, err = run(capsys, "score", iris_model, tmp_path / "in.csv", "-o", tmp_path / "o")
    assert_one_line_error(
        code, err, r"bad row in '.*in.csv', row 10, column 'sepal length \(cm\)': value 'ten' "
        r"is not a number.*--on-error skip"
    )  # fmt: skip
    code, out, err = run(
        capsys, "score", iris_model, tmp_path / "in.csv", "-o", tmp_path / "o",
        "--on-error", "skip", "--keep", "id",
    )  # fmt: skip
    assert code == 0, err
    side = tmp_path / "o" / "_bad_rows" / "part-00000.parquet"
    assert f"bad rows: 1 skipped, written with the reason to {side}" in out
    assert pd.read_parquet(side)["id"].tolist() == ["9"]  # a CSV key is text, as written


@pytest.mark.parametrize(
    ("args", "pattern"),
    [
        (["--engine", "spark"], r"--engine 'spark' is not supported; use local or dask"),
        (["--on-error", "ignore"], r"--on-error 'ignore' is not supported; use raise or skip"),
        (["--scheduler", "tcp://127.0.0.1:1"], r"--scheduler is for --engine dask"),
        (
            ["--batch-size", "0"],
            r"--batch-size 0 is not allowed: it must be a positive number of rows",
        ),
        (["--keep", "id,order"], r"--keep column 'order' is not in"),
    ],
)
def test_bad_options_exit_2_with_one_line(
    capsys, rows, tmp_path: Path, iris_model: Path, args: list[str], pattern: str
) -> None:
    rows(5).to_parquet(tmp_path / "in.parquet")
    base = ["score", iris_model, tmp_path / "in.parquet", "-o", tmp_path / "out"]
    code, _, err = run(capsys, *base, *args)
    assert_one_line_error(code, err, pattern)


def test_missing_output_and_missing_model(capsys, rows, tmp_path: Path) -> None:
    rows(5).to_parquet(tmp_path / "in.parquet")
    code, _, err = run(capsys, "score", tmp_path / "m.onnx", tmp_path / "in.parquet")
    assert_one_line_error(code, err, r"Missing option '--output'")
    code, _, err = run(capsys, "score", tmp_path, tmp_path / "in.parquet", "-o", tmp_path / "o")
    assert_one_line_error(code, err, r"model file '.*model.onnx' does not exist")


def _cli(*args: object) -> list[str]:
    return [sys.executable, "-m", "onnxbridge._cli.main", "score", *map(str, args)]


def test_a_run_killed_half_way_leaves_only_complete_parts_and_resume_finishes_it(
    rows, tmp_path: Path, iris_model: Path
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    n_files, per_file = 24, 40_000
    for i in range(n_files):
        rows(per_file, seed=i, first_id=i * per_file).to_parquet(data / f"in-{i:02d}.parquet")
    out = tmp_path / "scores"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen(
        _cli(iris_model, data, "-o", out, "--keep", "id", "--batch-size", "500", "--workers", "1"),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    wait_until(
        lambda: len(list(out.glob("part-*.parquet"))) >= 3 or proc.poll() is not None,
        timeout=120,
        interval=0.005,
    )
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL, "the run finished before it could be killed"
    finished = sorted(out.glob("part-*.parquet"))
    assert 3 <= len(finished) < n_files
    # Every part under its final name is complete; nothing else is visible to a reader.
    assert not (out / "_manifest.json").exists()
    for part in finished:
        assert pq.read_metadata(part).num_rows == per_file
    visible = [p.name for p in out.iterdir() if not p.name.startswith((".", "_"))]
    assert sorted(visible) == [p.name for p in finished]

    result = subprocess.run(
        _cli(iris_model, data, "-o", out, "--keep", "id", "--resume", "--json"),
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["parts_resumed"] == len(finished)
    assert summary["rows_resumed"] == len(finished) * per_file
    assert summary["rows"] == (n_files - len(finished)) * per_file
    assert sorted(p.name for p in out.iterdir()) == [
        "_manifest.json",
        *[f"part-{i:05d}.parquet" for i in range(n_files)],
    ]  # no temporary file left
    predictor = Predictor(iris_model, intra_op_num_threads=1)
    for i in (0, len(finished) - 1, len(finished), n_files - 1):
        frame = rows(per_file, seed=i, first_id=i * per_file)
        want = predictor.predict(frame.drop(columns=["id"])).to_frame()
        got = pd.read_parquet(out / f"part-{i:05d}.parquet")
        assert got["id"].tolist() == frame["id"].tolist()
        pd.testing.assert_frame_equal(got.drop(columns=["id"]), want, check_exact=True)
