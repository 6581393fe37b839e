"""How the onnxbridge command behaves around its work: closed pipes, help texts, error lines,
the order of checks, flags in messages, and output paths."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from cli_support import COMMANDS
from onnxbridge import Bundle

# The console script, run by the interpreter under test (PYTHONPATH is inherited).
CLI = f"{shlex.quote(sys.executable)} -c 'from onnxbridge._cli.main import run; run()'"


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


# ---------------------------------------------------------------------- one error line, no more
def one_error_line(done: subprocess.CompletedProcess[str]) -> str:
    """The single ``error: ...`` line a refused command prints: exit 2, nothing else."""
    assert done.returncode == 2, done.stderr
    lines = done.stderr.split("\n")
    assert lines[-1] == "" and len(lines) == 2, repr(done.stderr)
    assert lines[0].startswith("error: "), lines[0]
    return lines[0]


# ------------------------------------------------------------------ the real mistake comes first
RF = "RandomForestClassifier(n_estimators=3)"


@pytest.mark.parametrize(
    ("data", "model", "extra", "named"),
    [
        ("iris", "RandomForestClasifier()", "", "--model 'RandomForestClasifier()'"),
        ("iris", "RandomForestClassifier(", "", "cannot parse --model"),
        ("missing.csv", RF, "--target y", "data file 'missing.csv' does not exist"),
        ("irs", RF, "", "--data 'irs' is not a built-in dataset"),
        ("iris", RF, "--target y", "--target 'y' does not apply to the built-in dataset"),
        ("iris", RF, "--test-size 2", "--test-size 2.0 is not allowed"),
        ("iris", RF, "--preprocess some", "--preprocess 'some' is not supported"),
    ],
)
def test_train_reports_the_real_mistake_before_the_existing_bundle(
    iris_bundle: Bundle, data: str, model: str, extra: str, named: str
) -> None:
    before = sorted(p.name for p in iris_bundle.path.iterdir())
    done = shell(
        f"onnxbridge train --data {data} --model {shlex.quote(model)} --out iris-rf {extra}",
        iris_bundle.path.parent,
    )
    line = one_error_line(done)
    assert named in line
    assert "already holds a bundle" not in line
    assert sorted(p.name for p in iris_bundle.path.iterdir()) == before


def test_a_good_train_into_an_existing_bundle_names_out_and_overwrite(
    iris_bundle: Bundle,
) -> None:
    done = shell(
        f"onnxbridge train --data iris --model {shlex.quote(RF)} --out iris-rf",
        iris_bundle.path.parent,
    )
    assert one_error_line(done) == (
        "error: --out 'iris-rf' already holds a bundle; choose another --out or pass "
        "--overwrite to replace it"
    )


def test_flags_are_checked_before_files(tmp_path: Path) -> None:
    done = shell("onnxbridge convert nowhere --precision half", tmp_path)
    assert "--precision 'half' is not supported" in one_error_line(done)
    done = shell("onnxbridge convert nowhere --tree-block-nodes -1", tmp_path)
    assert "--tree-block-nodes -1 is negative" in one_error_line(done)
    done = shell("onnxbridge validate nowhere --missing-values sometimes", tmp_path)
    assert "--missing-values 'sometimes' is not valid" in one_error_line(done)


# ------------------------------------------------ the Python API names arguments, the CLI flags
def test_python_errors_name_arguments_and_the_cli_names_flags(tmp_path: Path) -> None:
    from onnxbridge import train_bundle
    from onnxbridge.errors import DataError, ModelSpecError

    with pytest.raises(ModelSpecError, match=r"unknown estimator 'Forest' in model='Forest\(\)'"):
        train_bundle("iris", "Forest()", tmp_path / "b")
    with pytest.raises(DataError, match=r"target='y' does not apply") as info:
        train_bundle("iris", RF, tmp_path / "b", target="y")
    assert "--" not in str(info.value)

    done = shell("onnxbridge train --data iris --model 'Forest()' --out b", tmp_path)
    assert "unknown estimator 'Forest' in --model 'Forest()'" in one_error_line(done)
    done = shell(f"onnxbridge train --data iris --model {shlex.quote(RF)} --target y", tmp_path)
    assert "--target 'y' does not apply" in one_error_line(done)
    assert "target=" not in done.stderr
    assert not (tmp_path / "b").exists()


def test_python_bundle_errors_say_overwrite_true(iris_bundle: Bundle) -> None:
    from onnxbridge import train_bundle
    from onnxbridge.errors import BundleError

    with pytest.raises(BundleError, match=r"already holds a bundle; .* overwrite=True") as info:
        train_bundle("iris", RF, iris_bundle.path)
    assert "--" not in str(info.value)


# ----------------------------------------------------------------- output files and their folder
def test_predict_out_into_a_missing_folder_is_refused(iris_bundle: Bundle, tmp_path: Path) -> None:
    done = shell(
        "onnxbridge predict iris-rf --data iris-rf/holdout.parquet --out typo/p.csv", tmp_path
    )
    assert one_error_line(done) == (
        "error: --out 'typo/p.csv': folder 'typo' does not exist; create it first "
        "(mkdir -p typo) or choose another path"
    )
    assert not (tmp_path / "typo").exists()


@pytest.mark.parametrize(
    ("command", "flag", "path"),
    [
        ("predict iris-rf --data iris-rf/holdout.parquet --out {}", "--out", "typo/p.csv"),
        ("predict iris-rf --data iris-rf/holdout.parquet --out {}", "--out", "a/b/p.parquet"),
        ("score iris-rf iris-rf/holdout.parquet --output {}", "--output", "typo/s.parquet"),
        ("coverage --only LinearRegression --out-md {}", "--out-md", "typo/c.md"),
        ("coverage --only LinearRegression --out-json {}", "--out-json", "typo/c.json"),
        ("convert model.skops --sample iris-rf/holdout.parquet --out {}", "--out", "typo/m.onnx"),
    ],
)
def test_every_output_file_needs_its_folder(
    iris_bundle: Bundle, tmp_path: Path, command: str, flag: str, path: str
) -> None:
    shutil.copy(iris_bundle.path / "model.skops", tmp_path / "model.skops")
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    done = shell("onnxbridge " + command.format(path), tmp_path)
    line = one_error_line(done)
    assert line.startswith(f"error: {flag} '{path}': folder ") and "does not exist" in line
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


@pytest.mark.parametrize(
    ("command", "made"),
    [
        (f"train --data iris --model {shlex.quote(RF)} --out new/bundle", "new/bundle/card.json"),
        ("score iris-rf iris-rf/holdout.parquet --output new/parts", "new/parts"),
    ],
)
def test_folders_a_command_owns_are_created(
    iris_bundle: Bundle, tmp_path: Path, command: str, made: str
) -> None:
    done = shell("onnxbridge " + command, tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / made).exists()


# ------------------------------------------------------------------ no blank line before errors
@pytest.mark.parametrize(
    "command",
    [
        "bench iris-rf --data nowhere.csv",
        "tune iris-rf --data nowhere.csv",
        "score iris-rf nowhere.csv --output scores",
        "predict iris-rf --data nowhere.csv",
        "validate iris-rf --data nowhere.csv",
        "convert iris-rf --opset 3",
        "train --data iris --model 'Nope()'",
        "serve iris-rf --port 80000",
        "coverage --only Nope",
        "inspect nowhere.onnx",
        "predict iris-rf",
    ],
)
@pytest.mark.parametrize("force_color", ["", "1"])
def test_an_error_is_one_line_on_standard_error(
    iris_bundle: Bundle, command: str, force_color: str
) -> None:
    """Exactly ``error: ...`` and a newline: no blank line, no progress bar left over, also
    when a CI sets FORCE_COLOR (rich then takes the log for a terminal)."""
    env = {"FORCE_COLOR": force_color} if force_color else {}
    done = shell(f"onnxbridge {command}", iris_bundle.path.parent, **env)
    one_error_line(done)


@pytest.mark.parametrize("json_flag", ["", "--json"])
def test_a_closed_pipe_does_not_hide_a_divergent_verdict(
    iris_bundle: Bundle, tmp_path: Path, json_flag: str
) -> None:
    # Exact equality is stricter than float32 arithmetic gives: DIVERGENT, exit 1.
    strict = "--tolerance probabilities=0:0 --no-diagnosis --no-html"
    done = shell(f"onnxbridge validate iris-rf {strict} {json_flag} | head -n 0", tmp_path)
    assert done.returncode == 1 and done.stderr == "", done.stderr
    done = shell(f"onnxbridge validate iris-rf --no-html {json_flag} | head -n 0", tmp_path)
    assert done.returncode == 0 and done.stderr == "", done.stderr


# ------------------------------------------------- a reader gone: the work still gets done
def test_a_closed_pipe_does_not_abandon_a_failed_gate_or_its_report(tmp_path: Path) -> None:
    done = shell(
        "onnxbridge coverage --only LinearRegression,Ridge,Lasso --min-equivalent 999 "
        "--out-md cov.md | head -1",
        tmp_path,
    )
    assert done.returncode == 1 and done.stderr == "", done.stderr
    assert "LinearRegression" in (tmp_path / "cov.md").read_text()


def test_a_closed_pipe_does_not_abandon_the_demo_bundle(tmp_path: Path) -> None:
    done = shell("onnxbridge demo --out runs/d2 | head -1", tmp_path)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert (tmp_path / "runs" / "d2" / "model.onnx").is_file()


@pytest.mark.parametrize(
    "command",
    [
        "--version",
        "inspect iris-rf --json",
        "predict iris-rf --data iris-rf/holdout.parquet",
    ],
)
def test_a_socket_whose_peer_left_is_a_reader_gone(iris_bundle: Bundle, command: str) -> None:
    ours, theirs = socket.socketpair()
    theirs.close()
    with ours:
        done = subprocess.run(
            [sys.executable, "-c", "from onnxbridge._cli.main import run; run()", *command.split()],
            cwd=iris_bundle.path.parent,
            stdout=ours.fileno(),
            stderr=subprocess.PIPE,
            text=True,
            timeout=300,
        )
    assert done.returncode == 0 and done.stderr == "", done.stderr


def test_a_closed_standard_error_loses_messages_not_work(
    iris_bundle: Bundle, tmp_path: Path
) -> None:
    # `true` leaves at once: the "wrote ..." line and the warnings meet a closed pipe.
    done = shell(
        "onnxbridge predict iris-rf --data iris-rf/holdout.parquet --out p.csv "
        "2>&1 >/dev/null | true",
        iris_bundle.path.parent,
    )
    assert done.returncode == 0, done.stderr
    assert len(pd.read_csv(iris_bundle.path.parent / "p.csv")) == len(iris_bundle.load_holdout()[0])
    lw = shlex.quote("LogisticRegression(max_iter=5)")
    done = shell(
        f"onnxbridge train --data iris --model {lw} --out lw 2>&1 >/dev/null | true", tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "lw" / "card.json").is_file()


def test_without_standard_error_nothing_meant_for_it_reaches_standard_output(
    tmp_path: Path,
) -> None:
    done = shell("onnxbridge train --data iris --model 'Nope()' 2>&-", tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    lw = shlex.quote("LogisticRegression(max_iter=5)")
    done = shell(f"onnxbridge train --data iris --model {lw} --out lw 2>&-", tmp_path)
    assert done.returncode == 0
    assert "warning" not in done.stdout and "ConvergenceWarning" not in done.stdout
    assert (tmp_path / "lw" / "card.json").is_file()


# ------------------------------------------------ flags in messages leave quoted values alone
def test_a_path_with_an_equals_sign_is_named_as_typed(tmp_path: Path) -> None:
    (tmp_path / "runs" / "out=2").mkdir(parents=True)
    (tmp_path / "runs" / "out=2" / "notes.txt").write_text("mine")
    done = shell(
        "onnxbridge train --data iris --model 'LogisticRegression(max_iter=500)' "
        "--out 'runs/out=2'",
        tmp_path,
    )
    line = one_error_line(done)
    assert line.startswith("error: --out 'runs/out=2' is not empty"), line
    assert os.listdir(tmp_path / "runs" / "out=2") == ["notes.txt"]


def test_a_model_spec_with_keywords_is_named_as_typed(tmp_path: Path) -> None:
    done = shell("onnxbridge train --data iris --model 'Foo(model=1)'", tmp_path)
    assert "unknown estimator 'Foo' in --model 'Foo(model=1)'" in one_error_line(done)


# ----------------------------------------------------- a bad tolerance is named as it was typed
def test_a_bad_tolerance_names_only_what_was_typed(iris_bundle: Bundle) -> None:
    done = shell("onnxbridge validate iris-rf --atol -1", iris_bundle.path.parent)
    line = one_error_line(done)
    assert line.startswith("error: tolerances must be finite numbers >= 0, got --atol -1.0;"), line
    assert "rtol" not in line
    done = shell(
        "onnxbridge validate iris-rf --tolerance probabilities=-1:0", iris_bundle.path.parent
    )
    line = one_error_line(done)
    assert "got ATOL -1 in --tolerance probabilities=-1:0;" in line
    assert "--atol" not in line and "--rtol" not in line


def test_a_bad_python_tolerance_names_its_argument() -> None:
    from onnxbridge.errors import DataError
    from onnxbridge.validate import Tolerance

    with pytest.raises(DataError, match=r"got rtol=-2.0; e\.g\. rtol=1e-5$") as info:
        Tolerance(atol=0.0, rtol=-2.0)
    assert "atol" not in str(info.value)
