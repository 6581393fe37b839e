"""The CLI under faults a user causes: Ctrl-C in the middle of a command, a full disk.

Each test runs the real ``onnxbridge`` command in a subprocess. An interrupted command must say
``interrupted`` on one line, exit 130 and leave no temporary or half-written file; a write that
fails for want of room must be one line naming the file the user asked for, and leave nothing
behind. A full disk is made with ``RLIMIT_FSIZE`` (SIGXFSZ ignored, so writes fail with EFBIG),
which works for any user.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import onnx
import pandas as pd
import pytest
from sklearn.datasets import make_classification

import onnxbridge
from onnxbridge import Bundle, train_bundle
from wait_support import wait_until

COMMAND = [sys.executable, "-m", "onnxbridge._cli.main"]
RF = "RandomForestClassifier(n_estimators=10, random_state=42)"
# Python's buffered stdout would hold back the progress lines the tests wait for; the package
# under test is found by its absolute path, whatever the working folder of the command.
_PACKAGE_ROOT = str(Path(onnxbridge.__file__).resolve().parents[1])
ENV = {
    **os.environ,
    "PYTHONUNBUFFERED": "1",
    "PYTHONPATH": os.pathsep.join([_PACKAGE_ROOT, os.environ.get("PYTHONPATH", "")]),
}


@pytest.fixture(scope="module")
def big_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """20 000 rows, 20 features: a forest takes seconds to fit on it."""
    X, y = make_classification(n_samples=20000, n_features=20, random_state=0)
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(20)])
    frame["y"] = y
    path = tmp_path_factory.mktemp("data") / "big.csv"
    frame.to_csv(path, index=False)
    return path


@pytest.fixture(scope="module")
def forest_bundle(tmp_path_factory: pytest.TempPathFactory, big_csv: Path) -> Path:
    """An unconverted bundle of a 150-tree forest: converting it takes seconds."""
    small = tmp_path_factory.mktemp("data") / "mid.csv"
    pd.read_csv(big_csv).head(4000).to_csv(small, index=False)
    out = tmp_path_factory.mktemp("bundles") / "forest"
    train_bundle(
        str(small), "RandomForestClassifier(n_estimators=150, random_state=0)", out, target="y"
    )
    return out


def _leftovers(folder: Path) -> list[str]:
    """Temporary files and staging folders onnxbridge makes (dot-names), anywhere below."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob(".*"))


def _interrupt(
    args: list[object],
    ready: Callable[[subprocess.Popen[str]], bool],
    *,
    may_finish: bool = False,
) -> tuple | None:
    """Start ``onnxbridge ARGS``, send SIGINT once ``ready(process)``; (code, stdout, stderr).

    ``may_finish``: a point that lasts only milliseconds (a file being written) can be missed
    by the polling on a fast machine; then the command ends first and None is returned.
    """
    process = subprocess.Popen(
        [*COMMAND, *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )
    try:
        is_ready: list[bool] = []

        def reached() -> bool:
            # ready() may read the command's output: it is asked once per poll.
            is_ready.append(ready(process))
            return is_ready[-1] or process.poll() is not None

        assert wait_until(reached, timeout=50, interval=0.005), (
            "the command never reached the point to interrupt"
        )
        if not is_ready[-1]:
            if may_finish:
                process.communicate()
                return None
            raise AssertionError(process.communicate())
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=50)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    return process.returncode, out, err


def _assert_interrupted(code: int, err: str) -> None:
    assert code == 130, err
    # joblib's own progress lines (the forest's verbose=2) are not ours.
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith("[Parallel")]
    assert lines == ["interrupted"], err
    assert "Traceback" not in err


def test_ctrl_c_while_training_leaves_no_bundle(tmp_path: Path, big_csv: Path, figures) -> None:
    out = tmp_path / "runs" / "forest"
    seen: list[str] = []

    def fitting(process: subprocess.Popen[str]) -> bool:
        # verbose=2 makes the forest print a line per tree: the fit has begun.
        seen.append(process.stdout.readline())
        return "building tree" in seen[-1]

    code, _, err = _interrupt(
        [
            "train",
            "--data",
            big_csv,
            "--target",
            "y",
            "--model",
            "RandomForestClassifier(n_estimators=500, verbose=2)",
            "--out",
            out,
        ],
        fitting,
    )
    _assert_interrupted(code, err)
    assert not out.exists()
    left = _leftovers(tmp_path)
    assert left == []
    figures("cli faults", "interrupts", 1)
    figures("cli faults", "partial files left", len(left))


@pytest.mark.parametrize("point", ["reading the model", "writing model.onnx"])
def test_ctrl_c_while_converting_leaves_the_bundle_whole(
    tmp_path: Path, forest_bundle: Path, point: str, figures
) -> None:
    bundle = tmp_path / "forest"

    def fresh_bundle() -> bytes:
        shutil.rmtree(bundle, ignore_errors=True)
        bundle.mkdir()
        for name in ("card.json", "model.skops", "holdout.parquet"):
            (bundle / name).write_bytes((forest_bundle / name).read_bytes())
        return (bundle / "card.json").read_bytes()

    card_before = fresh_bundle()

    def reading(process: subprocess.Popen[str]) -> bool:
        fds = Path(f"/proc/{process.pid}/fd")
        try:
            return any(os.readlink(fd).endswith("model.skops") for fd in fds.iterdir())
        except OSError:  # an fd closed while listing
            return False

    def writing(process: subprocess.Popen[str]) -> bool:
        return any(p.name.startswith(".model.onnx.") for p in bundle.iterdir())

    ready = reading if point == "reading the model" else writing
    for _ in range(10):  # model.onnx is written in milliseconds: try until caught writing it
        caught = _interrupt(["convert", bundle], ready, may_finish=point == "writing model.onnx")
        if caught is not None:
            break
        card_before = fresh_bundle()
    assert caught is not None, f"convert was never caught {point}"
    code, _, err = caught
    _assert_interrupted(code, err)
    left = _leftovers(bundle)
    assert left == []
    # Every file is whole: the card parses, a model.onnx (if it got renamed in) loads.
    json.loads((bundle / "card.json").read_text())
    if point == "reading the model":
        assert (bundle / "card.json").read_bytes() == card_before
        assert not (bundle / "model.onnx").exists()
    if (bundle / "model.onnx").exists():
        onnx.checker.check_model(onnx.load(bundle / "model.onnx"))
    figures("cli faults", "interrupts", 1)
    figures("cli faults", "partial files left", len(left))


def _with_file_size_limit(limit: int) -> Callable[[], None]:
    def limit_writes() -> None:
        # Without this, the kernel kills the process with SIGXFSZ instead of failing the write.
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return limit_writes


@pytest.fixture
def iris_rows(iris_bundle: Bundle, tmp_path: Path) -> Path:
    path = tmp_path / "rows.csv"
    X, _ = iris_bundle.load_holdout()
    pd.concat([X] * 20).to_csv(path, index=False)
    return path


@pytest.mark.parametrize(
    ("command", "written"),
    [
        (["convert", "{model}", "--sample", "{rows}", "--out", "out/model.onnx"], "out/model.onnx"),
        (["train", "--data", "iris", "--model", RF, "--out", "out/b"], "out/b/model.skops"),
        (["predict", "{bundle}", "--data", "{rows}", "--out", "out/p.csv"], "out/p.csv"),
        (["predict", "{bundle}", "--data", "{rows}", "--out", "out/p.parquet"], "out/p.parquet"),
        (["predict", "{bundle}", "--data", "{rows}", "--out", "out/p.jsonl"], "out/p.jsonl"),
    ],
    ids=["convert", "train", "predict-csv", "predict-parquet", "predict-jsonl"],
)
def test_disk_full_names_the_file_and_leaves_nothing(
    command: list[str],
    written: str,
    iris_bundle: Bundle,
    iris_rows: Path,
    tmp_path: Path,
    figures,
) -> None:
    work = tmp_path / "work"
    (work / "out").mkdir(parents=True)
    model = work / "model.skops"
    model.write_bytes(iris_bundle.model_path.read_bytes())
    values = {"model": "model.skops", "rows": str(iris_rows), "bundle": str(iris_bundle.path)}
    result = subprocess.run(
        [*COMMAND, *(a.format(**values) for a in command)],
        cwd=work,
        capture_output=True,
        text=True,
        env=ENV,
        preexec_fn=_with_file_size_limit(2048),
        timeout=50,
    )
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert lines[0].startswith(f"error: cannot write '{written}': File too large"), lines[0]
    assert "free some space or write somewhere else" in lines[0]
    assert sorted(p.name for p in (work / "out").iterdir()) == []
    left = _leftovers(work)
    assert left == []
    figures("cli faults", "disk full named the file", 1)
    figures("cli faults", "partial files left", len(left))


def test_interrupted_is_documented_as_exit_130() -> None:
    result = subprocess.run([*COMMAND, "--help"], capture_output=True, text=True, timeout=50)
    assert "130 interrupted" in " ".join(result.stdout.split())
