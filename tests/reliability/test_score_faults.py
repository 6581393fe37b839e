"""The score fault matrix: real ``onnxbridge score`` subprocesses killed with SIGKILL at seeded
random points and resumed, two runs on one output, refused runs, an unwritable output, a full
disk (a file size limit) and corrupt inputs. Every case checks that nothing was lost: the output
after a fault and a resume is the one an uninterrupted run writes, row for row, value for value;
a refused run leaves every file and folder as it was.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from cli_support import assert_one_line_error, run
from onnxbridge import convert_bundle, train_bundle
from wait_support import wait_until

Figures = Callable[[str, str, int | float | str], None]
AREA = "score faults"
COLUMNS = ["sepal length (cm)", "sepal width (cm)", "petal length (cm)", "petal width (cm)"]
N_FILES, PER_FILE = 6, 60_000


def flowers(n: int, seed: int, first_id: int) -> pd.DataFrame:
    """``n`` rows in the ranges of the Iris features, with an ``id`` key column."""
    rng = np.random.RandomState(seed)
    low, high = np.array([4.3, 2.0, 1.0, 0.1]), np.array([7.9, 4.4, 6.9, 2.5])
    frame = pd.DataFrame(low + rng.rand(n, 4) * (high - low), columns=COLUMNS)
    frame.insert(0, "id", np.arange(first_id, first_id + n, dtype=np.int64))
    return frame


@pytest.fixture(scope="module")
def model(_iris_bundle_master: Path) -> Path:
    """The reference Iris forest."""
    return _iris_bundle_master / "model.onnx"


@pytest.fixture(scope="module")
def other_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Another model of the same features (a resume with it must be refused)."""
    bundle, _ = train_bundle(
        "iris", "LogisticRegression(max_iter=500)", tmp_path_factory.mktemp("m") / "logreg"
    )
    convert_bundle(bundle)
    return bundle.onnx_path


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of Parquet inputs, big enough that a kill lands mid-job."""
    folder = tmp_path_factory.mktemp("flowers")
    for i in range(N_FILES):
        flowers(PER_FILE, seed=i, first_id=i * PER_FILE).to_parquet(folder / f"day-{i}.parquet")
    return folder


@pytest.fixture(scope="module")
def baseline(model: Path, data: Path, tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    """What an uninterrupted run writes."""
    out = tmp_path_factory.mktemp("baseline") / "scores.parquet"
    result = cli(model, data, "-o", out, "--keep", "id")
    assert result.returncode == 0, result.stderr
    return pd.read_parquet(out)


def command(*args: object) -> list[str]:
    return [sys.executable, "-m", "onnxbridge._cli.main", "score", *map(str, args)]


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}


def cli(*args: object, **kwargs: object) -> subprocess.CompletedProcess[str]:
    """Run ``onnxbridge score ARGS`` in a subprocess."""
    return subprocess.run(
        command(*args), env=env(), capture_output=True, text=True, timeout=120, **kwargs
    )


def one_line_error(proc: subprocess.CompletedProcess[str], pattern: str) -> str:
    """Exit 2, one ``error: ...`` line matching ``pattern``, no traceback."""
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert re.search(pattern, lines[0]), lines[0]
    assert "Traceback" not in proc.stderr
    return lines[0]


def snapshot(root: Path) -> dict[str, tuple[int, str]]:
    """Every file and folder under ``root`` (hidden ones too): mtime and content hash."""
    seen = {".": (root.stat().st_mtime_ns, "")}
    for path in sorted(root.rglob("*")):
        stat = path.lstat()
        digest = "" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
        seen[str(path.relative_to(root))] = (stat.st_mtime_ns, digest)
    return seen


def touched(before: dict[str, tuple[int, str]], after: dict[str, tuple[int, str]]) -> list[str]:
    return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))


def hidden(root: Path) -> list[str]:
    """Temporary and lock files left under ``root``."""
    return sorted(p.name for p in root.rglob(".*"))


def wait_for(ready: Callable[[], bool], proc: subprocess.Popen[str]) -> bool:
    """Wait until ``ready()`` (True) or the process ends (False)."""
    wait_until(lambda: ready() or proc.poll() is not None, timeout=60, interval=0.005)
    return proc.poll() is None


def writing(folder: Path, name: str) -> Callable[[], bool]:
    """True once a run has started writing output ``name`` in ``folder``: the output (a part
    folder) or its hidden temporary file exists."""

    def ready() -> bool:
        return (folder / name).exists() or any(folder.glob(f".{name}.*.tmp"))

    return ready


# ------------------------------------------------------------------------------- kill -9
@pytest.mark.parametrize("name", ["scores", "scores.parquet"])
def test_kill_9_at_seeded_random_points_then_resume_gives_the_uninterrupted_output(
    model: Path, data: Path, baseline: pd.DataFrame, tmp_path: Path, figures: Figures, name: str
) -> None:
    rng = random.Random(20261204 + len(name))
    out = tmp_path / name
    args = (model, data, "-o", out, "--keep", "id", "--batch-size", "2000", "--workers", "1")
    kills = survived = 0
    for _ in range(3):
        proc = subprocess.Popen(
            command(*args, "--resume"), env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        if wait_for(writing(tmp_path, name), proc):  # it writes: kill it somewhere in its work
            time.sleep(rng.uniform(0.0, 1.0))
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.communicate(timeout=30)
            kills += proc.returncode == -signal.SIGKILL
        else:
            proc.communicate(timeout=30)
        # Only complete files under final names: every part holds its whole input.
        if name == "scores" and out.is_dir():
            for part in out.glob("part-*.parquet"):
                assert pq.read_metadata(part).num_rows == PER_FILE
            if (out / "_manifest.json").exists():
                assert len(list(out.glob("part-*.parquet"))) == N_FILES
        elif out.exists():
            assert pq.read_metadata(out).num_rows == N_FILES * PER_FILE
        resumed = cli(*args, "--resume", "--json")
        assert resumed.returncode == 0, resumed.stderr
        got = pd.read_parquet(out)
        pd.testing.assert_frame_equal(got, baseline, check_exact=True)
        assert hidden(tmp_path) == [], "temporary or lock files left behind"
        survived += 1
        if name == "scores":
            manifest = json.loads((out / "_manifest.json").read_text())
            assert manifest["rows"] == N_FILES * PER_FILE
        out.unlink() if out.is_file() else None  # the next round starts from nothing again
        if out.is_dir():
            for entry in out.iterdir():
                entry.unlink()
    assert kills >= 1, "no kill landed while the job ran"
    figures(AREA, "kills", kills)
    figures(AREA, "kills survived identical", survived)


# ------------------------------------------------------------------------ two runs, one output
@pytest.mark.parametrize("name", ["scores", "scores.parquet"])
def test_a_second_run_on_the_same_output_is_refused_and_the_first_completes_intact(
    model: Path, data: Path, baseline: pd.DataFrame, tmp_path: Path, figures: Figures, name: str
) -> None:
    out = tmp_path / name
    first = subprocess.Popen(
        command(model, data, "-o", out, "--keep", "id", "--batch-size", "200", "--workers", "1"),
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    refused = []
    try:
        assert wait_for(writing(tmp_path, name), first), "the first run ended too early"
        seconds = [(), ("--overwrite",), ("--resume",)]
        if name == "scores":
            seconds.append(("--resume", "--engine", "dask", "--workers", "1"))
        others = [
            subprocess.Popen(
                command(model, data, "-o", out, "--keep", "id", *flags),
                env=env(),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for flags in seconds
        ]  # all at once, while the first one runs
        for proc in others:
            stdout, stderr = proc.communicate(timeout=120)
            refused.append(subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr))
        still_running = first.poll() is None
    finally:
        _, stderr = first.communicate(timeout=120)
    assert still_running, "the first run finished before the others tried: make it longer"
    for proc in refused:
        one_line_error(
            proc, rf"--output '.*{re.escape(name)}' is being written by another score run "
            rf"\(pid {first.pid}\)",
        )  # fmt: skip
    assert first.returncode == 0, stderr
    pd.testing.assert_frame_equal(pd.read_parquet(out), baseline, check_exact=True)
    assert hidden(tmp_path) == []
    if name == "scores":  # every part and the manifest: nothing of the first run was taken
        assert json.loads((out / "_manifest.json").read_text())["rows"] == N_FILES * PER_FILE
    figures(AREA, "concurrent runs refused", len(refused))
    figures(AREA, "first runs completed intact", 1)


# --------------------------------------------------------------------------- refused runs
def test_refused_runs_touch_nothing(
    capsys: pytest.CaptureFixture[str],
    model: Path,
    other_model: Path,
    data: Path,
    tmp_path: Path,
    figures: Figures,
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    inputs = [data / "day-0.parquet", data / "day-1.parquet"]
    finished = work / "scores"
    assert cli(model, *inputs, "-o", finished, "--keep", "id").returncode == 0
    (finished / ".part-00001.parquet.k1ll3d00.tmp").write_bytes(b"PAR1")  # not ours to judge
    (work / "link.parquet").symlink_to(inputs[0])
    flowers(10, 0, 0).to_parquet(work / "theirs.parquet")
    (work / "theirs").mkdir()
    (work / "theirs" / "thesis.docx").write_text("precious")
    (work / "broken.onnx").write_bytes(b"not a model")
    # The four of the issue run as real subprocesses; the rest through the same CLI entry point
    # in this process (each refusal happens before any work, a subprocess would add only time).
    cases = [
        ((other_model, *inputs, "-o", finished, "--keep", "id", "--resume"), "cannot resume", 1),
        ((model, *inputs, "-o", inputs[0], "--overwrite"), "would write over the input", 1),
        ((model, *inputs, "-o", work / "theirs.parquet", "--overwrite"), "score did not write", 1),
        ((model, *inputs, "-o", work / "theirs", "--overwrite"), "score did not write", 1),
        ((model, *inputs, "-o", work / "link.parquet", "--overwrite"), "would write over the", 0),
        ((model, data, "-o", data, "--overwrite"), "would write over the input", 0),
        ((model, *inputs, "-o", finished, "--overwrite", "--batch-size", "0"), "--batch-size 0", 0),
        ((work / "broken.onnx", *inputs, "-o", finished, "--overwrite"), "not a loadable ONNX", 0),
        ((model, *inputs, "-o", finished, "--keep", "nope", "--overwrite"), "'nope' is not in", 0),
        ((model, *inputs, "-o", work / "new" / "deeper", "--keep", "nope"), "'nope' is not in", 0),
        ((model, *inputs, "-o", finished, "--overwrite", "--engine", "spark"), "not supported", 0),
    ]
    files_touched = 0
    for args, pattern, in_subprocess in cases:
        before = snapshot(tmp_path), snapshot(data)
        if in_subprocess:
            one_line_error(cli(*args), pattern)
        else:
            code, _, err = run(capsys, "score", *args)
            assert_one_line_error(code, err, pattern)
        after = snapshot(tmp_path), snapshot(data)
        changed = touched(before[0], after[0]) + touched(before[1], after[1])
        assert changed == [], (args, changed)
        files_touched += len(changed)
    figures(AREA, "refused runs", len(cases))
    figures(AREA, "files touched by refused runs", files_touched)


# ---------------------------------------------------------------------- unwritable output
def test_an_output_that_cannot_be_written_is_one_line_and_changes_nothing(
    model: Path, data: Path, tmp_path: Path, figures: Figures
) -> None:
    (tmp_path / "notes.txt").write_text("a file where a folder would be")
    targets = [tmp_path / "notes.txt" / "out.parquet", tmp_path / "notes.txt" / "sub" / "scores"]
    if os.geteuid() != 0:  # chmod stops writes for other users only; root uses the cases above
        locked = tmp_path / "read-only"
        locked.mkdir(mode=0o555)
        targets.append(locked / "out.parquet")
    before = snapshot(tmp_path)
    for target in targets:
        line = one_line_error(
            cli(model, data / "day-0.parquet", "-o", target),
            r"cannot write --output '.*': (Not a directory|Permission denied)"
            r"|--output '.*': '.*notes.txt' is a file, not a folder",
        )
        assert str(target) in line
    assert touched(before, snapshot(tmp_path)) == []
    figures(AREA, "unwritable outputs refused", len(targets))


# ------------------------------------------------------------------------------ full disk
def _small_files() -> None:
    """In the child: writes past 256 KiB fail with EFBIG instead of killing it (SIGXFSZ)."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (256 * 1024, 256 * 1024))


@pytest.mark.parametrize("name", ["scores", "scores.parquet"])
def test_a_full_disk_is_one_line_naming_the_file_and_leaves_nothing_partial(
    model: Path, data: Path, baseline: pd.DataFrame, tmp_path: Path, figures: Figures, name: str
) -> None:
    out = tmp_path / name
    inputs_before = snapshot(data)
    args = (model, data, "-o", out, "--keep", "id")
    full = cli(*args, preexec_fn=_small_files)
    one_line_error(full, rf"cannot write '.*{re.escape(name)}.*': .*File too large")
    assert hidden(tmp_path) == []  # no temporary file, no lock
    assert not out.exists()  # nothing under the output's name: no part fits in 256 KiB
    assert touched(inputs_before, snapshot(data)) == []
    again = cli(*args, "--resume")
    assert again.returncode == 0, again.stderr
    pd.testing.assert_frame_equal(pd.read_parquet(out), baseline, check_exact=True)
    figures(AREA, "full-disk runs: one-line error, nothing partial", 1)


# --------------------------------------------------------------------------- corrupt inputs
CORRUPTIONS: dict[str, Callable[[Path], Path]] = {}


def corruption(fn: Callable[[Path], Path]) -> Callable[[Path], Path]:
    CORRUPTIONS[fn.__name__] = fn
    return fn


@corruption
def truncated_parquet(path: Path) -> Path:
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) // 2])
    return path


@corruption
def empty_parquet(path: Path) -> Path:
    path.write_bytes(b"")
    return path


@corruption
def binary_csv(path: Path) -> Path:
    path.unlink()
    target = path.with_suffix(".csv")
    target.write_bytes(bytes(random.Random(7).randrange(128, 256) for _ in range(4096)))
    return target


@pytest.mark.parametrize("how", sorted(CORRUPTIONS))
def test_a_corrupt_input_keeps_the_parts_before_it_and_resume_finishes_identically(
    model: Path, data: Path, baseline: pd.DataFrame, tmp_path: Path, figures: Figures, how: str
) -> None:
    inputs = tmp_path / "in"
    inputs.mkdir()
    for source in sorted(data.iterdir()):
        (inputs / source.name).write_bytes(source.read_bytes())
    bad = CORRUPTIONS[how](inputs / "day-2.parquet")
    out = tmp_path / "scores"
    args = (model, inputs, "-o", out, "--keep", "id", "--batch-size", "5000")
    one_line_error(cli(*args), rf"'.*{re.escape(bad.name)}'")
    kept = sorted(p.name for p in out.iterdir())
    assert kept == ["part-00000.parquet", "part-00001.parquet"]
    assert hidden(tmp_path) == []
    bad.unlink()
    (inputs / "day-2.parquet").write_bytes((data / "day-2.parquet").read_bytes())
    resumed = cli(*args, "--resume", "--json")
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["parts_resumed"] == 2
    pd.testing.assert_frame_equal(pd.read_parquet(out), baseline, check_exact=True)
    figures(AREA, "corrupt inputs", 1)
    figures(AREA, "parts kept before a corrupt input", len(kept))
