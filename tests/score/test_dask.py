"""score with the Dask engine on a real LocalCluster of 2 worker processes: the same parts,
bit for bit, as the local engine; bad rows; an explicit scheduler; an unreachable one."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest
from distributed import LocalCluster

from onnxbridge import BadRowError, ClusterError, DataError, score


@pytest.fixture(scope="module")
def cluster():
    """A real 2-worker LocalCluster (separate processes), shared by this module's tests."""
    # distributed sets OMP_NUM_THREADS=1 (and more) in this process when it spawns workers:
    # put the environment back so later tests run as they would alone.
    before = dict(os.environ)
    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
    ) as running:
        os.environ.clear()
        os.environ.update(before)
        yield running


def _inputs(rows, folder: Path) -> list[Path]:
    folder.mkdir()
    paths = []
    for i in range(4):
        frame = rows(300 + 50 * i, seed=10 + i, first_id=1000 * i)
        if i % 2:
            path = folder / f"in-{i}.parquet"
            frame.to_parquet(path, index=False)
        else:
            path = folder / f"in-{i}.csv"
            frame.to_csv(path, index=False)
        paths.append(path)
    return paths


def test_dask_parts_are_identical_to_the_local_engine(
    rows, tmp_path: Path, iris_model: Path, cluster: LocalCluster
) -> None:
    paths = _inputs(rows, tmp_path / "data")
    local = score(iris_model, paths, tmp_path / "local", keep=["id"], batch_size=64)
    dask = score(
        iris_model,
        paths,
        tmp_path / "dask",
        engine="dask",
        scheduler=cluster.scheduler_address,
        keep=["id"],
        batch_size=64,
    )
    assert dask.engine == "dask" and dask.workers == 2
    assert dask.to_dict()["scheduler"] == cluster.scheduler_address
    assert [p.rows for p in dask.parts] == [p.rows for p in local.parts] == [300, 350, 400, 450]
    for a, b in zip(local.parts, dask.parts, strict=True):
        assert a.path.name == b.path.name
        pd.testing.assert_frame_equal(
            pd.read_parquet(b.path), pd.read_parquet(a.path), check_exact=True
        )
    assert (tmp_path / "dask" / "_manifest.json").is_file()
    # The cluster is still usable (the job closed only its client) and resume skips every part.
    again = score(
        iris_model,
        paths,
        tmp_path / "dask",
        engine="dask",
        scheduler=cluster.scheduler_address,
        keep=["id"],
        resume=True,
    )
    assert again.rows == 0 and again.rows_resumed == 1500


def test_dask_bad_rows_raise_or_go_to_the_same_side_files(
    rows, tmp_path: Path, logreg_model: Path, cluster: LocalCluster
) -> None:
    frame = rows(200).astype({"petal length (cm)": object})
    frame.loc[17, "petal length (cm)"] = "oops"
    frame.loc[150, "petal length (cm)"] = None
    path = tmp_path / "in.csv"
    frame.to_csv(path, index=False)
    address = cluster.scheduler_address
    with pytest.raises(BadRowError, match=r"row 18, column 'petal length \(cm\)': value 'oops'"):
        score(logreg_model, path, tmp_path / "raise", engine="dask", scheduler=address)
    assert not list((tmp_path / "raise").glob("part-*"))
    options = {"keep": ["id"], "on_error": "skip", "batch_size": 50}
    local = score(logreg_model, path, tmp_path / "local", **options)
    dask = score(logreg_model, path, tmp_path / "dask", engine="dask", scheduler=address, **options)
    assert dask.bad_rows == local.bad_rows == 2
    for name in ("part-00000.parquet", "_bad_rows/part-00000.parquet"):
        want = pd.read_parquet(tmp_path / "local" / name)
        got = pd.read_parquet(tmp_path / "dask" / name)
        pd.testing.assert_frame_equal(got, want, check_exact=True)


def test_dask_starts_its_own_local_cluster(rows, tmp_path: Path, iris_model: Path) -> None:
    path = tmp_path / "in.parquet"
    rows(120).to_parquet(path, index=False)
    result = score(iris_model, path, tmp_path / "out", engine="dask", workers=2)
    assert result.workers == 2 and result.rows == 120
    assert result.to_dict()["scheduler"].startswith("tcp://127.0.0.1:")
    local = score(iris_model, path, tmp_path / "local.parquet")
    pd.testing.assert_frame_equal(
        pd.read_parquet(tmp_path / "out"), pd.read_parquet(local.output), check_exact=True
    )


def test_an_unreachable_scheduler_is_a_cluster_error(
    rows, tmp_path: Path, iris_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ONNXBRIDGE_DASK_CONNECT_TIMEOUT", "1.5")
    path = tmp_path / "in.parquet"
    rows(10).to_parquet(path, index=False)
    with pytest.raises(
        ClusterError, match=r"cannot reach the Dask scheduler at 'tcp://127.0.0.1:9'"
    ):
        score(iris_model, path, tmp_path / "o", engine="dask", scheduler="tcp://127.0.0.1:9")


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.mark.parametrize(
    ("timeout", "error", "message"),
    [
        ("1.5", ClusterError, r"cannot reach the Dask scheduler at 'tcp://127.0.0.1:9'"),
        ("abc", DataError, r"ONNXBRIDGE_DASK_CONNECT_TIMEOUT='abc' is not a number"),
    ],
)
def test_an_overwrite_refused_by_the_cluster_keeps_the_old_output(
    rows,
    tmp_path: Path,
    iris_model: Path,
    monkeypatch: pytest.MonkeyPatch,
    timeout: str,
    error: type[Exception],
    message: str,
) -> None:
    """The cluster is reached before the output changes: --overwrite on an unreachable
    scheduler (or with a bad timeout) leaves the previous scores as they were."""
    path = tmp_path / "in.parquet"
    rows(50).to_parquet(path, index=False)
    out = tmp_path / "scores"
    score(iris_model, path, out)
    before = _tree(out)
    monkeypatch.setenv("ONNXBRIDGE_DASK_CONNECT_TIMEOUT", timeout)
    with pytest.raises(error, match=message):
        score(iris_model, path, out, engine="dask", scheduler="tcp://127.0.0.1:9", overwrite=True)
    assert _tree(out) == before and before


def test_dask_keeps_the_parts_before_a_corrupt_input_and_resume_finishes(
    rows, tmp_path: Path, iris_model: Path, cluster: LocalCluster
) -> None:
    paths = _inputs(rows, tmp_path / "data")
    good = paths[2].read_bytes()
    paths[2].write_bytes(b"")  # an empty CSV: its header does not read
    out = tmp_path / "scores"
    options = dict(engine="dask", scheduler=cluster.scheduler_address, keep=["id"])
    with pytest.raises(DataError, match=r"'.*in-2.csv' is empty: a CSV file needs a header"):
        score(iris_model, paths, out, **options)
    assert sorted(p.name for p in out.iterdir()) == ["part-00000.parquet", "part-00001.parquet"]
    paths[2].write_bytes(good)
    result = score(iris_model, paths, out, resume=True, **options)
    assert [p.resumed for p in result.parts] == [True, True, False, False]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "scores"]  # no lock left


def test_dask_never_writes_over_an_input(rows, tmp_path: Path, iris_model: Path) -> None:
    paths = _inputs(rows, tmp_path / "data")
    with pytest.raises(DataError, match=r"would write over the input '.*in-0.csv'"):
        score(iris_model, paths, tmp_path / "data", engine="dask", overwrite=True)
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == sorted(p.name for p in paths)


def test_a_local_cluster_leaves_the_callers_environment_as_it_was(
    rows, tmp_path: Path, iris_model: Path
) -> None:
    """score starts its own LocalCluster without --scheduler; distributed would leave
    OMP_NUM_THREADS=1 (and more) in the caller's process for every later OpenMP library."""
    before = dict(os.environ)
    inputs = _inputs(rows, tmp_path / "in")
    result = score(iris_model, inputs, tmp_path / "out", engine="dask", workers=1)
    assert result.rows == sum(p.rows for p in result.parts) > 0
    assert dict(os.environ) == before
