"""score with the Dask engine on a real cluster started from the command line (``dask
scheduler`` and two ``dask worker`` processes on 127.0.0.1): the same outputs, bit for bit, as
the local engine — a folder of parts, one file, resume, bad rows; an unreachable scheduler."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from distributed import Client

import onnxbridge
from onnxbridge import BadRowError, ClusterError, DataError, score
from wait_support import wait_until


def _dask_command(*args: str) -> list[str]:
    """The ``dask`` command of this Python environment."""
    return [str(Path(sys.executable).parent / "dask"), *args]


def _workers_ready(scheduler_file: Path, count: int) -> bool:
    if not scheduler_file.is_file():
        return False
    try:
        address = json.loads(scheduler_file.read_text())["address"]
        with Client(address, timeout=5) as client:
            return len(client.nthreads()) == count
    except (OSError, ValueError, KeyError, TimeoutError):
        return False


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A scheduler and two single-threaded workers, each its own process tree started with the
    ``dask`` command on 127.0.0.1 (ports chosen by the system, written to a scheduler file);
    yields the scheduler's address."""
    folder = tmp_path_factory.mktemp("cluster")
    scheduler_file = folder / "scheduler.json"
    env = dict(os.environ)
    # The workers import this onnxbridge, wherever the tests import it from.
    source = str(Path(onnxbridge.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [source, env.get("PYTHONPATH")]))
    where = ["--scheduler-file", str(scheduler_file), "--no-dashboard"]
    log = (folder / "cluster.log").open("w")
    processes = [
        subprocess.Popen(
            _dask_command("scheduler", "--host", "127.0.0.1", "--port", "0", *where),
            env=env, stdout=log, stderr=subprocess.STDOUT,
        )
    ]  # fmt: skip
    try:
        assert wait_until(scheduler_file.is_file, timeout=60), "the scheduler did not start"
        for _ in range(2):
            command = _dask_command("worker", "--host", "127.0.0.1", "--nthreads", "1", *where)
            processes.append(
                subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
            )
        ready = wait_until(lambda: _workers_ready(scheduler_file, 2), timeout=120, interval=0.5)
        assert ready, (folder / "cluster.log").read_text()[-3000:]
        yield json.loads(scheduler_file.read_text())["address"]
    finally:
        for process in reversed(processes):
            process.terminate()
        for process in reversed(processes):
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        log.close()


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
    rows, tmp_path: Path, iris_model: Path, cluster: str
) -> None:
    paths = _inputs(rows, tmp_path / "data")
    local = score(iris_model, paths, tmp_path / "local", keep=["id"], batch_size=64)
    dask = score(
        iris_model,
        paths,
        tmp_path / "dask",
        engine="dask",
        scheduler=cluster,
        keep=["id"],
        batch_size=64,
    )
    assert dask.engine == "dask" and dask.workers == 2
    assert dask.to_dict()["scheduler"] == cluster
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
        scheduler=cluster,
        keep=["id"],
        resume=True,
    )
    assert again.rows == 0 and again.rows_resumed == 1500


def test_dask_bad_rows_raise_or_go_to_the_same_side_files(
    rows, tmp_path: Path, logreg_model: Path, cluster: str
) -> None:
    frame = rows(200).astype({"petal length (cm)": object})
    frame.loc[17, "petal length (cm)"] = "oops"
    frame.loc[150, "petal length (cm)"] = None
    path = tmp_path / "in.csv"
    frame.to_csv(path, index=False)
    address = cluster
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
    rows, tmp_path: Path, iris_model: Path, cluster: str
) -> None:
    paths = _inputs(rows, tmp_path / "data")
    good = paths[2].read_bytes()
    paths[2].write_bytes(b"")  # an empty CSV: its header does not read
    out = tmp_path / "scores"
    options = dict(engine="dask", scheduler=cluster, keep=["id"])
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


def _hidden(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def test_dask_writes_one_file_identical_to_the_local_engine(
    rows, tmp_path: Path, iris_model: Path, cluster: str
) -> None:
    """The workers write a part per input; the client joins them, in input order, into the one
    file the local engine writes: same rows, same row groups, same metadata."""
    paths = _inputs(rows, tmp_path / "data")
    out = tmp_path / "out"
    out.mkdir()
    options = {"keep": ["id"], "batch_size": 64}
    local = score(iris_model, paths, out / "local.parquet", **options)
    dask = score(
        iris_model, paths, out / "dask.parquet", engine="dask", scheduler=cluster, **options
    )
    assert dask.output == out / "dask.parquet" and len(dask.parts) == 1
    assert dask.rows == local.rows == 1500
    assert dask.parts[0].sources == [str(p) for p in paths]
    want, got = pq.ParquetFile(local.output), pq.ParquetFile(dask.output)
    assert got.metadata.num_row_groups == want.metadata.num_row_groups
    assert got.schema_arrow.equals(want.schema_arrow, check_metadata=True)
    assert got.read().equals(want.read())
    assert sorted(p.name for p in out.iterdir()) == ["dask.parquet", "local.parquet"]
    again = score(
        iris_model, paths, out / "dask.parquet", engine="dask", scheduler=cluster, resume=True,
        **options,
    )  # fmt: skip
    assert again.rows == 0 and again.rows_resumed == 1500


def test_dask_one_file_bad_rows_match_and_a_failed_job_leaves_nothing(
    rows, tmp_path: Path, logreg_model: Path, cluster: str
) -> None:
    frames = [rows(120, seed=1), rows(80, seed=2, first_id=500)]
    frames[1] = frames[1].astype({"petal length (cm)": object})
    frames[1].loc[17, "petal length (cm)"] = "oops"
    paths = [tmp_path / "a.parquet", tmp_path / "b.csv"]
    frames[0].to_parquet(paths[0], index=False)
    frames[1].to_csv(paths[1], index=False)
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(BadRowError, match=r"b.csv'?, row 18, column 'petal length \(cm\)'"):
        score(logreg_model, paths, out / "raise.parquet", engine="dask", scheduler=cluster)
    assert list(out.iterdir()) == []  # no output, no parts, no lock
    options = {"keep": ["id"], "on_error": "skip", "batch_size": 50}
    local = score(logreg_model, paths, out / "local.parquet", **options)
    dask = score(
        logreg_model, paths, out / "dask.parquet", engine="dask", scheduler=cluster, **options
    )
    assert dask.bad_rows == local.bad_rows == 1 and dask.rows == local.rows == 199
    assert dask.parts[0].bad_rows_path == out / "dask.bad-rows.parquet"
    for name in ("{}.parquet", "{}.bad-rows.parquet"):
        want = pd.read_parquet(out / name.format("local"))
        got = pd.read_parquet(out / name.format("dask"))
        pd.testing.assert_frame_equal(got, want, check_exact=True)
    assert _hidden(out) == []


def test_dask_one_file_stops_at_a_corrupt_input_and_clears_a_killed_runs_parts(
    rows, tmp_path: Path, iris_model: Path, cluster: str
) -> None:
    paths = _inputs(rows, tmp_path / "data")
    out = tmp_path / "out"
    out.mkdir()
    target = out / "scores.parquet"
    orphan = out / ".scores.parquet.abcd1234.tmp"  # the parts folder of a killed run
    (orphan / "_bad_rows").mkdir(parents=True)
    (orphan / "part-00000.parquet").write_bytes(b"half")
    good = paths[3].read_bytes()
    paths[3].write_bytes(b"PAR1 not parquet")
    with pytest.raises(DataError, match=r"cannot read '.*in-3.parquet' as parquet"):
        score(iris_model, paths, target, engine="dask", scheduler=cluster)
    assert list(out.iterdir()) == []
    paths[3].write_bytes(good)
    result = score(iris_model, paths, target, engine="dask", scheduler=cluster, keep=["id"])
    assert result.rows == 1500 and sorted(p.name for p in out.iterdir()) == ["scores.parquet"]
    assert (
        pd.read_parquet(target)["id"].astype(int).tolist()
        == pd.concat([pd.read_csv(p) if p.suffix == ".csv" else pd.read_parquet(p) for p in paths])[
            "id"
        ].tolist()
    )


def test_cli_dask_one_file_output(rows, tmp_path: Path, iris_model: Path, cluster: str) -> None:
    path = tmp_path / "in.parquet"
    rows(300).to_parquet(path, index=False)
    target = tmp_path / "scores.parquet"
    command = [
        str(Path(sys.executable).parent / "onnxbridge"), "score", str(iris_model), str(path),
        "--output", str(target), "--engine", "dask", "--scheduler", cluster, "--json",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["engine"] == "dask" and summary["rows"] == 300
    assert summary["output"] == str(target) and summary["workers"] == 2
    local = score(iris_model, path, tmp_path / "local.parquet")
    assert pq.read_table(target).equals(pq.read_table(local.output))


@pytest.fixture
def s3_store(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """An S3-compatible server on 127.0.0.1 (moto's server mode) with an empty bucket ``data``;
    fsspec's configuration points s3:// URLs at it, and the file systems made from those URLs
    carry that address to the Dask workers. Yields the bucket's URL."""
    pytest.importorskip("s3fs", reason="the remote-store tests need the dev extra (s3fs, moto)")
    server_module = pytest.importorskip("moto.server", reason="the dev extra installs moto")
    import boto3
    import fsspec.config

    server = server_module.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        options = {"endpoint_url": f"http://{host}:{port}", "key": "test", "secret": "test"}
        monkeypatch.setitem(fsspec.config.conf, "s3", options)
        client = boto3.client(
            "s3",
            endpoint_url=options["endpoint_url"],
            aws_access_key_id="test",
            aws_secret_access_key="test",
            region_name="us-east-1",
        )
        client.create_bucket(Bucket="data")
        yield "s3://data"
    finally:
        server.stop()


def test_dask_scores_inputs_from_a_remote_store(
    rows, tmp_path: Path, iris_model: Path, cluster: str, s3_store: str
) -> None:
    """Inputs read through fsspec from an S3 server, by the workers themselves: the same
    scores as the local engine on local copies of the files; resume recognises the parts."""
    import fsspec

    paths = _inputs(rows, tmp_path / "data")
    fs = fsspec.filesystem("s3")
    for path in paths:
        fs.put(str(path), f"{s3_store}/days/{path.name}")
    options = {"keep": ["id"], "batch_size": 100}
    local = score(iris_model, paths, tmp_path / "local", **options)
    remote = f"{s3_store}/days/"
    dask = score(iris_model, remote, tmp_path / "dask", engine="dask", scheduler=cluster, **options)
    assert [p.sources for p in dask.parts] == [[f"{s3_store}/days/{p.name}"] for p in paths]
    for a, b in zip(local.parts, dask.parts, strict=True):
        pd.testing.assert_frame_equal(
            pd.read_parquet(b.path), pd.read_parquet(a.path), check_exact=True
        )
    one = score(iris_model, f"{s3_store}/days/*.csv", tmp_path / "csv.parquet", **options)
    assert one.rows == 300 + 400
    again = score(
        iris_model, remote, tmp_path / "dask", engine="dask", scheduler=cluster, resume=True,
        **options,
    )  # fmt: skip
    assert again.rows == 0 and again.rows_resumed == 1500
    with pytest.raises(DataError, match=r"input 's3://data/nothing.parquet' does not exist"):
        score(iris_model, f"{s3_store}/nothing.parquet", tmp_path / "none", **options)


@pytest.mark.parametrize("keep", [[], ["id"]])
def test_dask_writes_an_empty_input_as_the_local_engine(
    rows, tmp_path: Path, iris_model: Path, cluster: str, keep: list[str]
) -> None:
    """A part without rows gets the output columns (and types) from the client's model check."""
    paths = [tmp_path / "empty.parquet", tmp_path / "some.parquet"]
    rows(0).to_parquet(paths[0], index=False)
    rows(30).to_parquet(paths[1], index=False)
    for output in ("folder", "one.parquet"):
        local = score(iris_model, paths, tmp_path / f"local-{output}", keep=keep)
        dask = score(
            iris_model, paths, tmp_path / f"dask-{output}", engine="dask", scheduler=cluster,
            keep=keep,
        )  # fmt: skip
        assert [p.rows for p in dask.parts] == [p.rows for p in local.parts]
        for a, b in zip(local.parts, dask.parts, strict=True):
            want, got = pq.read_table(a.path), pq.read_table(b.path)
            assert got.schema.equals(want.schema, check_metadata=True) and got.equals(want)


def test_relative_paths_are_the_clients_not_the_workers(
    rows, tmp_path: Path, logreg_model: Path, cluster: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The workers run in another folder than the client: the job's relative input and output
    # paths still mean the client's files, and the bad rows name the inputs as given.
    frame = rows(120).astype({"petal length (cm)": object})
    frame.loc[7, "petal length (cm)"] = "oops"
    (tmp_path / "in").mkdir()
    frame.to_csv(tmp_path / "in" / "a.csv", index=False)
    rows(80, seed=3).to_parquet(tmp_path / "in" / "b.parquet")
    monkeypatch.chdir(tmp_path)  # the workers were started in the tests' own folder
    options = {"keep": ["id"], "on_error": "skip"}
    local = score(logreg_model, "in", "local", **options)
    for out in ("dask", "dask.parquet"):
        dask = score(logreg_model, "in", out, engine="dask", scheduler=cluster, **options)
        assert dask.rows == local.rows == 199 and dask.bad_rows == 1
    for name in ("part-00000.parquet", "part-00001.parquet", "_bad_rows/part-00000.parquet"):
        pd.testing.assert_frame_equal(
            pd.read_parquet(Path("dask") / name),
            pd.read_parquet(Path("local") / name),
            check_exact=True,
        )
    assert pd.read_parquet("dask.bad-rows.parquet")["file"].tolist() == [str(Path("in/a.csv"))]
    pd.testing.assert_frame_equal(
        pd.read_parquet("dask.parquet"), pd.read_parquet("local"), check_exact=True
    )
