"""How the onnxbridge command behaves around its work: closed pipes, help texts, error lines,
the order of checks, flags in messages, and output paths."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from onnxbridge import Bundle

# The console script, run by the interpreter under test (PYTHONPATH is inherited).
CLI = f"{shlex.quote(sys.executable)} -c 'from onnxbridge.cli.main import run; run()'"
COMMANDS = (
    "train",
    "convert",
    "inspect",
    "predict",
    "validate",
    "score",
    "demo",
    "bench",
    "tune",
    "serve",
    "coverage",
)


def shell(pipeline: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """Run ``pipeline`` (``onnxbridge`` stands for the CLI) under ``bash -o pipefail``."""
    command = pipeline.replace("onnxbridge", CLI)
    return subprocess.run(
        ["bash", "-o", "pipefail", "-c", command],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=300,
    )


@pytest.fixture
def many_rows(iris_bundle: Bundle, tmp_path: Path) -> Path:
    """The holdout 500 times over: far more output than a pipe holds (64 KiB)."""
    X, _ = iris_bundle.load_holdout()
    path = tmp_path / "many.parquet"
    pd.concat([X] * 500, ignore_index=True).to_parquet(path)
    return path


# ------------------------------------------------------------------------------- closed pipes
@pytest.mark.parametrize(
    "pipeline",
    [
        "onnxbridge predict iris-rf --data many.parquet | head -2",
        "onnxbridge predict iris-rf --data many.parquet --format jsonl | head -2",
        "onnxbridge inspect iris-rf/model.onnx | head -3",
        # head -n 0 leaves before anything is written: the write always meets a closed pipe.
        "onnxbridge inspect iris-rf/model.onnx | head -n 0",
        "onnxbridge inspect iris-rf/model.onnx --json | head -n 0",
        "onnxbridge --help | head -n 0",
    ],
)
def test_a_closed_pipe_ends_quietly_with_exit_0(
    iris_bundle: Bundle, many_rows: Path, tmp_path: Path, pipeline: str
) -> None:
    done = shell(pipeline, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""


def test_head_gets_the_first_lines_of_predict(iris_bundle: Bundle, many_rows: Path) -> None:
    done = shell("onnxbridge predict iris-rf --data many.parquet | head -2", many_rows.parent)
    lines = done.stdout.splitlines()
    assert lines[0] == "label,proba_0,proba_1,proba_2"
    assert len(lines) == 2 and lines[1].count(",") == 3


def test_a_full_read_still_gets_every_row(iris_bundle: Bundle, many_rows: Path) -> None:
    done = shell("onnxbridge predict iris-rf --data many.parquet | wc -l", many_rows.parent)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) == 1 + len(pd.read_parquet(many_rows))


# --------------------------------------------------------------------------------- help texts
# "[OPTIONS]", then upper-case argument names, optional ones in brackets, "..." only after one.
USAGE = re.compile(r"Usage: onnxbridge (\w+) \[OPTIONS\]((?: \[?[A-Z][A-Z0-9_]*(?:\.\.\.)?\]?)*)$")


@pytest.mark.parametrize("command", COMMANDS)
def test_usage_lines_read_cleanly(command: str, tmp_path: Path) -> None:
    done = shell(f"onnxbridge {command} --help", tmp_path, COLUMNS="80")
    assert done.returncode == 0, done.stderr
    usage = done.stdout.splitlines()[0]
    match = USAGE.match(usage)
    assert match, usage
    assert match[1] == command
    assert not re.search(r"[{}<>]", done.stdout.split("Options:")[0]), done.stdout


def test_only_a_variadic_argument_has_dots(tmp_path: Path) -> None:
    done = shell("onnxbridge score --help", tmp_path, COLUMNS="80")
    assert done.stdout.splitlines()[0] == "Usage: onnxbridge score [OPTIONS] MODEL INPUT..."
    assert re.search(r"^  INPUT\.\.\.  ", done.stdout, re.MULTILINE)


def test_option_values_are_named_in_words(tmp_path: Path) -> None:
    done = shell("onnxbridge score --help", tmp_path, COLUMNS="80")
    assert "--batch-size INTEGER" in done.stdout and "-o, --output PATH" in done.stdout
    assert "<" not in done.stdout


def test_the_command_list_cuts_no_summary(tmp_path: Path) -> None:
    done = shell("onnxbridge --help", tmp_path, COLUMNS="80")
    assert done.returncode == 0, done.stderr
    listed = done.stdout.split("Commands:")[1].splitlines()
    for command in COMMANDS:
        assert any(line.startswith(f"  {command} ") for line in listed), command
    usage, *text = done.stdout.splitlines()
    assert usage == "Usage: onnxbridge [OPTIONS] COMMAND [ARGS]..."
    for line in text:
        assert len(line) <= 80, line
        assert not line.rstrip().endswith(("...", "…")), line
