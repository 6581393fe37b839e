"""score never loses data: --overwrite replaces only score's own output and never an input, one
job per output (a lock), a refused run changes nothing, a failing input keeps the parts finished
before it, orphaned temporary files are cleaned, an oversized model is refused unread."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from cli_support import assert_one_line_error, run
from onnxbridge import DataError, OnnxModelError, score
from wait_support import wait_until


def snapshot(root: Path) -> dict[str, tuple[int, str]]:
    """Every file and folder under ``root`` (hidden ones too): mtime and content hash."""
    seen: dict[str, tuple[int, str]] = {}
    for path in sorted(root.rglob("*")):
        stat = path.lstat()
        digest = "" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
        seen[str(path.relative_to(root))] = (stat.st_mtime_ns, digest)
    return seen


def _cli(*args: object) -> list[str]:
    return [sys.executable, "-m", "onnxbridge._cli.main", "score", *map(str, args)]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}


# ---------------------------------------------------------------------- --overwrite and inputs
@pytest.mark.parametrize("how", ["same path", "symlink", "hard link"])
def test_output_that_is_an_input_is_refused_without_suggesting_overwrite(
    capsys, rows, tmp_path: Path, iris_model: Path, how: str
) -> None:
    day = tmp_path / "day.parquet"
    rows(60).to_parquet(day)
    before = day.read_bytes()
    out = {"same path": day, "symlink": tmp_path / "link.parquet", "hard link": tmp_path / "hl.pq"}
    if how == "symlink":
        out[how].symlink_to(day)
    elif how == "hard link":
        os.link(day, out[how])
    code, _, err = run(capsys, "score", iris_model, day, "--output", out[how], "--overwrite")
    assert_one_line_error(code, err, r"would write over the input '.*day.parquet'.*never replaces")
    assert "--overwrite" not in err and "--resume" not in err
    with pytest.raises(DataError, match="would write over the input"):
        score(iris_model, day, out[how], resume=True)
    assert day.read_bytes() == before


def test_an_input_given_as_a_file_url_is_never_the_output(
    rows, tmp_path: Path, iris_model: Path
) -> None:
    day = tmp_path / "day.parquet"
    rows(60).to_parquet(day)
    before = day.read_bytes()
    with pytest.raises(DataError, match="would write over the input"):
        score(iris_model, day.as_uri(), day, overwrite=True)
    assert day.read_bytes() == before
    result = score(iris_model, day.as_uri(), tmp_path / "out.parquet")
    assert result.rows == 60


def test_an_output_url_is_refused_and_nothing_is_written(
    capsys, rows, tmp_path: Path, iris_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows(10).to_parquet(tmp_path / "day.parquet")
    monkeypatch.chdir(tmp_path)
    before = snapshot(tmp_path)
    code, _, err = run(capsys, "score", iris_model, "day.parquet", "--output", "s3://b/o.parquet")
    assert_one_line_error(code, err, r"the output 's3://b/o.parquet' is a URL; .* write it locally")
    assert snapshot(tmp_path) == before


def test_folder_output_holding_an_input_is_refused(rows, tmp_path: Path, iris_model: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    rows(30).to_parquet(data / "in.parquet")
    first = score(iris_model, data, tmp_path / "scores")
    before = snapshot(tmp_path)
    # A folder output named as the input folder, or scoring an output's own part into it.
    with pytest.raises(DataError, match=r"would write over the input '.*in.parquet'"):
        score(iris_model, data, data, overwrite=True)
    with pytest.raises(DataError, match=r"would write over the input '.*part-00000.parquet'"):
        score(iris_model, first.parts[0].path, tmp_path / "scores", overwrite=True)
    assert snapshot(tmp_path) == before


def test_overwrite_never_replaces_a_parquet_file_score_did_not_write(
    capsys, rows, tmp_path: Path, iris_model: Path
) -> None:
    rows(30).to_parquet(tmp_path / "in.parquet")
    theirs = tmp_path / "report.parquet"
    rows(5, seed=3).to_parquet(theirs)
    side = tmp_path / "mine.bad-rows.parquet"  # the side-file name of --output mine.parquet
    side.write_text("someone's notes")
    before = snapshot(tmp_path)
    for target in (theirs, tmp_path / "mine.parquet"):
        for flags in ([], ["--overwrite"], ["--resume"]):
            code, _, err = run(
                capsys, "score", iris_model, tmp_path / "in.parquet", "-o", target, *flags
            )
            assert_one_line_error(
                code, err, r"exists and score did not write it; .*another --output"
            )
    assert snapshot(tmp_path) == before
    # score's own single output file is replaced, and only by a complete new one.
    ours = tmp_path / "ours.parquet"
    score(iris_model, tmp_path / "in.parquet", ours)
    rows(45, seed=1).to_parquet(tmp_path / "in.parquet")
    assert score(iris_model, tmp_path / "in.parquet", ours, overwrite=True).rows == 45
    assert pq.read_metadata(ours).num_rows == 45


def test_overwrite_refuses_a_folder_whose_part_score_did_not_write(
    rows, tmp_path: Path, iris_model: Path
) -> None:
    rows(20).to_parquet(tmp_path / "in.parquet")
    out = tmp_path / "exports"
    out.mkdir()
    rows(7, seed=5).to_parquet(out / "part-00000.parquet")  # named like a part, but not one
    before = snapshot(tmp_path)
    with pytest.raises(DataError, match=r"holds files that score did not write \(part-00000"):
        score(iris_model, tmp_path / "in.parquet", out, overwrite=True)
    assert snapshot(tmp_path) == before


# ------------------------------------------------------------- refused runs change nothing
def test_a_refused_resume_keeps_the_finished_job_as_it_was(
    rows, tmp_path: Path, iris_model: Path, logreg_model: Path
) -> None:
    for i in range(2):
        rows(50, seed=i).to_parquet(tmp_path / f"in-{i}.parquet")
    inputs = sorted(tmp_path.glob("in-*.parquet"))
    out = tmp_path / "scores"
    score(iris_model, inputs, out)
    (out / ".part-00001.parquet.abcd1234.tmp").write_bytes(b"")  # as a killed run leaves it
    before = snapshot(tmp_path)
    with pytest.raises(DataError, match=r"cannot resume: .*part-00000.parquet' was not made"):
        score(logreg_model, inputs, out, resume=True)
    assert snapshot(tmp_path) == before  # manifest and temporary file both still there


def test_refused_options_and_models_leave_an_existing_output_alone(
    rows, tmp_path: Path, iris_model: Path
) -> None:
    rows(40).to_parquet(tmp_path / "in.parquet")
    out = tmp_path / "scores"
    score(iris_model, tmp_path / "in.parquet", out, keep=["id"])
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"not a model")
    rows(40).rename(columns={"id": "label"}).to_parquet(tmp_path / "clash.parquet")
    (tmp_path / "notes.txt").write_text("a file where a folder would be")
    before = snapshot(tmp_path)
    with pytest.raises(OnnxModelError):
        score(broken, tmp_path / "in.parquet", out, overwrite=True)
    with pytest.raises(DataError, match=r"keep= column 'label' has the name of an output"):
        score(iris_model, tmp_path / "clash.parquet", out, keep=["label"], overwrite=True)
    with pytest.raises(
        DataError, match=r"batch_size=0 is not allowed: it must be a positive number of rows"
    ):
        score(iris_model, tmp_path / "in.parquet", out, overwrite=True, batch_size=0)
    assert snapshot(tmp_path) == before
    with pytest.raises(DataError, match=r"cannot write output='.*notes.txt/o.parquet': Not a dir"):
        score(iris_model, tmp_path / "in.parquet", tmp_path / "notes.txt" / "o.parquet")
    assert snapshot(tmp_path) == before
    with pytest.raises(DataError, match=r"keep= column 'nope' is not in"):
        score(iris_model, tmp_path / "in.parquet", tmp_path / "new" / "deeper", keep=["nope"])
    assert snapshot(tmp_path) == before  # no folder created for a refused run


def test_an_oversized_model_file_is_refused_before_it_is_read(
    rows, tmp_path: Path, iris_model: Path
) -> None:
    rows(10).to_parquet(tmp_path / "in.parquet")
    huge = tmp_path / "huge.onnx"
    with huge.open("wb") as fh:
        fh.truncate(2**31 + 1)  # sparse: no disk space, but reading it would take 2 GiB
    with pytest.raises(
        OnnxModelError,
        match=r"model file '.*huge.onnx' is 2,147,483,649 bytes; an .onnx file holds at most "
        r"2,147,483,647 bytes",
    ):
        score(huge, tmp_path / "in.parquet", tmp_path / "o.parquet")
    assert not (tmp_path / "o.parquet").exists()


# ------------------------------------------------------------------------ one job per output
def _start_long_job(model: Path, data: Path, out: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        _cli(
            model,
            data,
            "-o",
            out,
            "--keep",
            "id",
            "--batch-size",
            "500",
            "--workers",
            "1",
            "--json",
        ),
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lock = out.parent / f".{out.name}.lock"
    wait_until(lambda: lock.exists() or proc.poll() is not None, timeout=60, interval=0.01)
    if proc.poll() is not None:
        _, stderr = proc.communicate()
        pytest.fail(f"the first run ended before it took the lock: {stderr}")
    return proc


@pytest.mark.parametrize("name", ["scores", "scores.parquet"])
def test_a_second_run_to_the_same_output_is_refused_and_the_first_completes(
    capsys, rows, tmp_path: Path, iris_model: Path, name: str
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    for i in range(4):
        rows(60_000, seed=i, first_id=60_000 * i).to_parquet(data / f"in-{i}.parquet")
    out = tmp_path / name
    first = _start_long_job(iris_model, data, out)
    try:
        code, _, err = run(capsys, "score", iris_model, data, "-o", out)  # no flag: the lock
        other = dict(resume=True) if name == "scores" else dict(overwrite=True)
        with pytest.raises(DataError, match=r"is being written by another score run \(pid \d+\)"):
            score(iris_model, data, out, **other)
        still_running = first.poll() is None
    finally:
        stdout, stderr = first.communicate(timeout=120)
    assert still_running, "the first run finished before the second one tried"
    assert_one_line_error(
        code, err, rf"--output '.*{name}' is being written by another score run \(pid {first.pid}\)"
    )
    assert first.returncode == 0, stderr
    assert json.loads(stdout)["rows"] == 240_000
    assert pd.read_parquet(out)["id"].tolist() == list(range(240_000))
    assert not (tmp_path / f".{name}.lock").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["data", name])


def test_a_lock_file_left_by_a_dead_run_is_taken_over(rows, tmp_path: Path, iris_model: Path):
    rows(30).to_parquet(tmp_path / "in.parquet")
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    lock = tmp_path / ".out.parquet.lock"
    lock.write_text(dead.stdout)  # what kill -9 leaves: a lock file nobody holds
    assert score(iris_model, tmp_path / "in.parquet", tmp_path / "out.parquet").rows == 30
    assert not lock.exists()


# ------------------------------------------------------- failing inputs and orphaned temps
def test_a_corrupt_input_keeps_the_parts_before_it_and_resume_continues(
    rows, tmp_path: Path, iris_model: Path
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    frames = [rows(3000, seed=i, first_id=3000 * i) for i in range(3)]
    for i, frame in enumerate(frames):
        frame.to_parquet(data / f"in-{i}.parquet")
    good = (data / "in-1.parquet").read_bytes()
    (data / "in-1.parquet").write_bytes(good[: len(good) // 2])
    out = tmp_path / "scores"
    with pytest.raises(DataError, match=r"cannot read '.*in-1.parquet' as parquet"):
        score(iris_model, data, out, keep=["id"], batch_size=100, workers=2)
    assert sorted(p.name for p in out.iterdir()) == ["part-00000.parquet"]
    (data / "in-1.parquet").write_bytes(good)
    result = score(iris_model, data, out, keep=["id"], batch_size=100, resume=True)
    assert [p.resumed for p in result.parts] == [True, False, False]
    assert pd.read_parquet(out)["id"].tolist() == list(range(9000))


def test_resume_and_overwrite_remove_the_orphaned_temporary_files_of_a_killed_run(
    rows, tmp_path: Path, iris_model: Path
) -> None:
    rows(30).to_parquet(tmp_path / "in.parquet")
    single = tmp_path / "out.parquet"
    orphans = [
        tmp_path / ".out.parquet.k1ll3d_9.tmp",
        tmp_path / ".out.bad-rows.parquet.x2y3z4w5.tmp",
    ]
    foreign = tmp_path / ".other.parquet.k1ll3d_9.tmp"  # another output's: not ours to remove
    for path in [*orphans, foreign]:
        path.write_bytes(b"PAR1 half written")
    score(iris_model, tmp_path / "in.parquet", single)
    assert [p.exists() for p in orphans] == [False, False] and foreign.exists()
    for path in orphans:
        path.write_bytes(b"PAR1 half written")
    score(iris_model, tmp_path / "in.parquet", single, overwrite=True)
    assert [p.exists() for p in orphans] == [False, False] and foreign.exists()


# ---------------------------------------------------------------- other spellings of one file
def test_an_input_given_as_a_local_fsspec_url_is_never_the_output(
    rows, tmp_path: Path, iris_model: Path
) -> None:
    folder = tmp_path / "scores"
    rows(60).to_parquet(tmp_path / "day.parquet")
    score(iris_model, tmp_path / "day.parquet", folder, keep=["id"])
    before = snapshot(tmp_path)
    for given, out in ((f"local://{folder}", folder), (f"local://{folder}/*", folder)):
        with pytest.raises(DataError, match="would write over the input"):
            score(iris_model, given, out, overwrite=True, keep=["id"])
    with pytest.raises(DataError, match=r"reads local files through .*; pass their local path"):
        score(iris_model, f"simplecache::file://{folder}", folder, overwrite=True)
    assert snapshot(tmp_path) == before
    result = score(iris_model, f"local://{tmp_path}/day.parquet", tmp_path / "again.parquet")
    assert result.rows == 60


def test_a_glob_leaves_out_folders_named_like_inputs(
    rows, tmp_path: Path, iris_model: Path
) -> None:
    rows(20).to_csv(tmp_path / "a.csv", index=False)
    score(iris_model, tmp_path / "a.csv", tmp_path / "preds.csv")  # a folder output
    assert (tmp_path / "preds.csv").is_dir()
    result = score(iris_model, str(tmp_path / "*.csv"), tmp_path / "out")
    assert [p.sources for p in result.parts] == [[str(tmp_path / "a.csv")]]


def test_single_file_outputs_of_other_suffixes_keep_their_own_bad_rows(
    rows, tmp_path: Path, iris_model: Path
) -> None:
    frame = rows(30).astype({"petal length (cm)": object})
    frame.loc[3, "petal length (cm)"] = "oops"
    frame.to_csv(tmp_path / "bad.csv", index=False)
    rows(10).to_csv(tmp_path / "good.csv", index=False)
    first = score(iris_model, tmp_path / "bad.csv", tmp_path / "a.parquet", on_error="skip")
    assert first.parts[0].bad_rows_path == tmp_path / "a.bad-rows.parquet"
    kept = (tmp_path / "a.bad-rows.parquet").read_bytes()
    second = score(iris_model, tmp_path / "bad.csv", tmp_path / "a.pq", on_error="skip")
    assert second.parts[0].bad_rows_path == tmp_path / "a.bad-rows.pq"
    third = score(iris_model, tmp_path / "bad.csv", tmp_path / "a.pq.parquet", on_error="skip")
    assert third.parts[0].bad_rows_path == tmp_path / "a.pq.bad-rows.parquet"
    score(iris_model, tmp_path / "good.csv", tmp_path / "a.pq", overwrite=True)
    assert not (tmp_path / "a.bad-rows.pq").exists()
    assert (tmp_path / "a.bad-rows.parquet").read_bytes() == kept
    assert (tmp_path / "a.pq.bad-rows.parquet").is_file()


def test_a_link_to_the_output_takes_the_same_lock(
    capsys, rows, tmp_path: Path, iris_model: Path
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    for i in range(4):
        rows(60_000, seed=i, first_id=60_000 * i).to_parquet(data / f"in-{i}.parquet")
    out = tmp_path / "scores"
    out.mkdir()
    (tmp_path / "alias").symlink_to(out)
    first = _start_long_job(iris_model, data, out)
    try:
        code, _, err = run(capsys, "score", iris_model, data, "-o", tmp_path / "alias",
                           "--overwrite")  # fmt: skip
        still_running = first.poll() is None
    finally:
        _, stderr = first.communicate(timeout=120)
    assert still_running, "the first run finished before the second one tried"
    assert_one_line_error(code, err, rf"is being written by another score run \(pid {first.pid}\)")
    assert first.returncode == 0, stderr
    assert pd.read_parquet(out)["id"].tolist() == list(range(240_000))


def test_resume_refuses_parts_of_a_job_with_more_inputs(
    capsys, rows, tmp_path: Path, iris_model: Path
) -> None:
    paths = []
    for i in range(3):
        paths.append(tmp_path / f"in-{i}.parquet")
        rows(40, seed=i, first_id=100 * i).to_parquet(paths[-1])
    out = tmp_path / "scores"
    score(iris_model, paths, out, keep=["id"])
    before = snapshot(out)
    code, _, err = run(capsys, "score", iris_model, *paths[:2], "-o", out, "--keep", "id",
                       "--resume")  # fmt: skip
    assert_one_line_error(code, err, r"cannot resume: .* holds part-00002.parquet, a part this job")
    assert snapshot(out) == before
    # With --overwrite too, this job's own parts are kept and the other one goes.
    result = score(iris_model, paths[:2], out, keep=["id"], resume=True, overwrite=True)
    assert result.rows == 0 and result.rows_resumed == 80
    assert pd.read_parquet(out)["id"].tolist() == [*range(40), *range(100, 140)]
    # A part of another job under --resume --overwrite is scored again.
    rows(40, seed=7, first_id=500).to_parquet(paths[1])
    again = score(iris_model, paths[:2], out, keep=["id"], resume=True, overwrite=True)
    assert again.rows == 40 and again.rows_resumed == 40
    assert pd.read_parquet(out)["id"].tolist() == [*range(40), *range(500, 540)]


def test_keep_columns_named_twice_or_like_a_bad_rows_column(
    capsys, rows, tmp_path: Path, iris_model: Path
) -> None:
    frame = rows(20)
    frame.insert(1, "row", range(20))
    frame.to_csv(tmp_path / "in.csv", index=False)
    code, _, _ = run(capsys, "score", iris_model, tmp_path / "in.csv", "-o", tmp_path / "a.pq",
                     "--keep", "id,id", "--keep", "id")  # fmt: skip
    assert code == 0
    columns = list(pd.read_parquet(tmp_path / "a.pq").columns)
    assert columns.count("id") == 1 and columns.index("id") == 0
    code, _, err = run(capsys, "score", iris_model, tmp_path / "in.csv", "-o", tmp_path / "b.pq",
                       "--keep", "row", "--on-error", "skip")  # fmt: skip
    assert_one_line_error(
        code, err, r"--keep column 'row' has the name of a column of the bad-rows"
    )
    assert not (tmp_path / "b.pq").exists()
    assert score(iris_model, tmp_path / "in.csv", tmp_path / "c.pq", keep=["row"]).rows == 20
