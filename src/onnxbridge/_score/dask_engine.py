"""The Dask engine of ``score``: the same job on a Dask distributed cluster.

One task per input file. A task streams its file in record batches of ``batch_size`` rows with
the local engine's reader (:func:`~onnxbridge._score.core.part_batches`), scores them with
:func:`~onnxbridge._score.batch.score_batch` and writes its part file itself, under a temporary
name renamed into place: a worker holds a batch per thread, never a whole file, and predictions
never travel back through the client. A single output file is written the same way, in parts
inside a hidden folder beside it, then concatenated by the client in input order under a
temporary name and renamed into place.

The model travels once per worker, as bytes (a model past 2 GiB, which no message holds, as its
path, which every worker must see); each worker process loads one ONNX Runtime session per model
(cached by the model's hash) that its threads share, each run on one intra-op thread.

Without a scheduler address a LocalCluster is started for the job — one worker process with one
thread per core (one session, as the local engine) — and closed after it.
``ONNXBRIDGE_DASK_CONNECT_TIMEOUT`` (seconds, default 10) bounds the wait for a given scheduler.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
from distributed import Client, Future, LocalCluster, Variable, as_completed

from onnxbridge._onnxfile import read_model_bytes
from onnxbridge._score.batch import _join, score_batch
from onnxbridge._score.core import (
    PartResult,
    PartSpec,
    ProgressCallback,
    ScoreJob,
    available_cores,
    keep_schema,
    part_batches,
)
from onnxbridge._score.output import BAD_ROWS_DIR, open_part, parts_folder
from onnxbridge._score.rows import RowPlan
from onnxbridge.errors import ClusterError, DataError, OnnxbridgeError, first_line
from onnxbridge.runtime import Predictor

__all__ = ["connect", "keep_environ", "run_dask"]

# The sessions of this worker process, by model hash and intra-op threads; the most recent
# models only, so a long-lived worker that scores many models does not keep them all.
_SESSIONS: dict[tuple[str, int], Predictor] = {}
_SESSIONS_KEPT = 2
_LOCK = threading.Lock()


def _model_for_workers(job: ScoreJob) -> bytes | str:
    """The model as the workers get it: one message of its bytes (external data read in), or,
    past the 2 GiB one message can hold, the path of its file, which every worker must then see
    (a LocalCluster's workers do; a remote cluster needs the model on a shared file system)."""
    if job.model_bytes is not None:
        return job.model_bytes
    assert job.model_path is not None  # one of the two is always set
    whole = read_model_bytes(job.model_path)
    return whole if whole is not None else str(job.model_path.resolve())


def _session(sha256: str, model: bytes | str, threads: int) -> Predictor:
    """This process's session of the model (created by the first task that needs it), from its
    bytes or, for a model too big for one message, from its path."""
    key = (sha256, threads)
    with _LOCK:
        predictor = _SESSIONS.pop(key, None)
        if predictor is None:
            predictor = Predictor(model, intra_op_num_threads=threads, regime="throughput")
        _SESSIONS[key] = predictor  # most recent last
        while len(_SESSIONS) > _SESSIONS_KEPT:
            del _SESSIONS[next(iter(_SESSIONS))]
        return predictor


class _Stopped(Exception):
    """A task left before it committed: an input before its own failed, or the job stopped."""


@contextlib.contextmanager
def _stop_flag(client: Client) -> Iterator[Variable]:
    """A cluster-wide number: tasks of a higher index stop at their next batch."""
    flag = Variable(f"onnxbridge-score-stop-{uuid.uuid4().hex}", client=client)
    try:
        yield flag
    finally:
        with contextlib.suppress(Exception):  # the cluster may be gone
            flag.delete()


# How long a task waits for the stop flag: a flag the client has deleted (a job stopped or
# interrupted while this task ran) never answers, and then the task stops.
_FLAG_TIMEOUT = 30


def _check_stop(flag: Variable, index: int) -> None:
    try:
        stop_after = flag.get(timeout=_FLAG_TIMEOUT)
    except Exception:  # TimeoutError, or the scheduler gone
        raise _Stopped(index) from None
    if index > stop_after:
        raise _Stopped(index)


def _score_part(
    model: bytes | str,
    sha256: str,
    threads: int,
    part: PartSpec,
    index: int,
    plan: RowPlan,
    empty: pa.Table,
    options: dict[str, Any],
    flag: Variable,
) -> dict[str, Any]:
    """Score one part on a worker, batch by batch, and commit its file (the task).

    The part's relative paths are the client's: they are taken from its working folder
    (``options["cwd"]``), not the worker's; bad rows name the input as the client gave it."""
    started = time.perf_counter()
    _check_stop(flag, index)
    predictor = _session(sha256, model, threads)
    given = part
    part = _rooted(part, Path(options["cwd"]))
    pairs = zip(part.sources, given.sources, strict=True)
    names = {id(ours): str(theirs.path) for ours, theirs in pairs}
    with open_part(part.path, part.bad_path, part.identity, empty) as sink:
        for source, first, batch, missing in part_batches(part, plan, options["batch_size"]):
            scored = score_batch(
                predictor,
                batch,
                plan,
                file=names[id(source)],
                first_row=first,
                on_error=options["on_error"],
                allow_missing=options["allow_missing"],
                missing=missing,
            )
            sink.write(scored.table, scored.bad)
            _check_stop(flag, index)
    return {"rows": sink.rows, "bad_rows": sink.bad_rows, "seconds": time.perf_counter() - started}


def _rooted(part: PartSpec, cwd: Path) -> PartSpec:
    """``part`` with its relative local paths taken from ``cwd``."""
    sources = [
        replace(s, path=cwd / s.path) if isinstance(s.path, Path) else s for s in part.sources
    ]
    return replace(part, path=cwd / part.path, bad_path=cwd / part.bad_path, sources=sources)


@contextlib.contextmanager
def keep_environ() -> Iterator[None]:
    """Restore the environment variables a LocalCluster sets in *this* process.

    distributed's nanny sets ``distributed.nanny.pre-spawn-environ`` (``OMP_NUM_THREADS=1``
    and others) in the parent's ``os.environ`` before it spawns a worker, and leaves them there:
    a caller of :func:`onnxbridge.score` would then run every later OpenMP library (ONNX Runtime,
    compiled accelerators) on one thread, or be refused by one that checks.
    """
    before = dict(os.environ)
    try:
        yield
    finally:
        for key in set(os.environ) - set(before):
            del os.environ[key]
        os.environ.update(before)


def _connect(scheduler: str | None, workers: int | None) -> tuple[Client, LocalCluster | None]:
    if scheduler is None:
        with keep_environ():
            # One worker process whose threads share one session, like the local engine's
            # pool: a process per core would hold a runtime and a session each.
            cluster = LocalCluster(
                n_workers=1,
                threads_per_worker=workers or available_cores(),
                processes=True,
                dashboard_address=":0",
                # Our own cluster: its shutdown chatter (workers killed after a grace period on
                # a busy machine, a worker's last heartbeat to a scheduler already closed, logged
                # as an ERROR with its traceback) is not the user's business; failures of the
                # job itself reach the client as exceptions.
                silence_logs=logging.CRITICAL,
            )
        return Client(cluster), cluster
    timeout = os.environ.get("ONNXBRIDGE_DASK_CONNECT_TIMEOUT", "10")
    try:
        seconds = float(timeout)
    except ValueError as exc:
        raise DataError(
            f"ONNXBRIDGE_DASK_CONNECT_TIMEOUT={timeout!r} is not a number of seconds"
        ) from exc
    try:
        return Client(scheduler, timeout=seconds), None
    except (OSError, TimeoutError, ValueError) as exc:
        raise ClusterError(
            f"cannot reach the Dask scheduler at {scheduler!r} ({first_line(exc)}); check the "
            "address (tcp://HOST:8786) and that the scheduler is running, or leave out "
            "scheduler= to start a local cluster",
            arguments=("scheduler",),
        ) from exc


@contextlib.contextmanager
def connect(scheduler: str | None, workers: int | None) -> Iterator[Client]:
    """A client of the cluster at ``scheduler``, or of a LocalCluster started for the job;
    closed (and the LocalCluster stopped) on exit.

    ``score`` connects before it changes anything in the output, so an unreachable scheduler
    is a refused run like any other.

    Raises:
        ClusterError: the scheduler cannot be reached. DataError: a bad connect timeout.
    """
    client, cluster = _connect(scheduler, workers)
    try:
        yield client
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def _pieces(part: PartSpec, folder: Path) -> list[PartSpec]:
    """The single output file's part as one piece per input, written inside ``folder``."""
    return [
        PartSpec(
            i,
            folder / f"part-{i:05d}.parquet",
            folder / BAD_ROWS_DIR / f"part-{i:05d}.parquet",
            [source],
            part.identity,
        )
        for i, source in enumerate(part.sources)
    ]


def _readable(pieces: list[PartSpec], plan: RowPlan) -> tuple[int, OnnxbridgeError | None]:
    """How many pieces, from the first, have a header that reads with the columns the job needs
    (checked here, so an input that fails this way stops the job after the parts before it),
    and the error of the first that does not."""
    for n, piece in enumerate(pieces):
        source = piece.sources[0]
        try:
            plan.check_columns(str(source.path), source.column_names())
        except OnnxbridgeError as exc:
            return n, exc
    return len(pieces), None


def _result(part: PartSpec, stats: dict[str, Any]) -> PartResult:
    return PartResult(
        part.path,
        [str(s.path) for s in part.sources],
        stats["rows"],
        stats["bad_rows"],
        bad_rows_path=part.bad_path if stats["bad_rows"] else None,
        seconds=stats["seconds"],
    )


def _run_pieces(
    client: Client,
    job: ScoreJob,
    pieces: list[PartSpec],
    outputs: pa.Table,
    plan: RowPlan,
    session_threads: int,
    progress: ProgressCallback | None,
) -> dict[int, dict[str, Any]]:
    """Run one task per piece; returns the statistics of each, by index.

    The first failure in input order is raised once every task has ended: the pieces before it
    are committed, those after it stop at their next batch (pieces already committed stay).
    """
    total = job.total_rows()
    if progress is not None:
        progress(0, total)
    count, unreadable = _readable(pieces, plan)
    options = {"batch_size": job.batch_size, "on_error": job.on_error}
    options["allow_missing"] = job.allow_missing
    options["cwd"] = os.getcwd()  # a worker may run elsewhere: relative paths are ours
    model = client.scatter(_model_for_workers(job), broadcast=True)
    futures: list[Future] = []
    done: dict[int, dict[str, Any]] = {}
    failures: dict[int, BaseException] = {}
    with _stop_flag(client) as flag:
        flag.set(count)
        try:
            for i, piece in enumerate(pieces[:count]):
                empty = _join(keep_schema(piece, plan).empty_table(), outputs)
                args = (model, job.model_sha256, session_threads, piece, i, plan, empty, options)
                futures.append(client.submit(_score_part, *args, flag, pure=False))
            index = {future.key: i for i, future in enumerate(futures)}
            done_rows = 0
            for future in as_completed(futures):
                i = index[future.key]
                try:
                    done[i] = future.result()
                except _Stopped:
                    continue
                except Exception as exc:  # raised once every task has ended
                    failures[i] = exc
                    flag.set(min(failures))
                    continue
                done_rows += done[i]["rows"] + done[i]["bad_rows"]
                if progress is not None:
                    progress(done_rows, total)
        except BaseException:
            flag.set(-1)  # interrupted: every task stops at its next batch
            client.cancel(futures)
            raise
        finally:
            client.cancel(model)
    if failures:
        _raise(failures[min(failures)])
    if unreadable is not None:
        raise unreadable
    return done


def _raise(error: BaseException) -> None:
    if isinstance(error, (OnnxbridgeError, OSError)):
        raise error
    # KilledWorker, CommClosedError, a worker without onnxbridge...
    raise ClusterError(
        f"the Dask job failed: {type(error).__name__}: {first_line(error)}; check the "
        "workers' logs (they need onnxbridge and onnxruntime installed, and must see "
        "the input and output paths)"
    ) from error


def _concatenate(part: PartSpec, pieces: list[PartSpec], empty: pa.Table) -> tuple[int, int]:
    """Write the pieces, in order, into the part's file (and side file), atomically; returns
    ``(rows, bad rows)``. Row groups are copied one at a time, as the pieces wrote them."""
    import pyarrow.parquet as pq

    with open_part(part.path, part.bad_path, part.identity, empty) as sink:
        for piece in pieces:
            scored = pq.ParquetFile(piece.path)
            for group in range(scored.num_row_groups):
                sink.write(scored.read_row_group(group))
            if piece.bad_path.is_file():
                bad = pq.ParquetFile(piece.bad_path)
                for group in range(bad.num_row_groups):
                    sink.write(None, bad.read_row_group(group))
    return sink.rows, sink.bad_rows


def run_dask(
    job: ScoreJob,
    outputs: pa.Table,
    plan: RowPlan,
    client: Client,
    *,
    session_threads: int | None,
    progress: ProgressCallback | None,
) -> tuple[list[PartResult], int, dict[str, Any]]:
    """Run ``job``'s parts as Dask tasks on ``client`` (from :func:`connect`); returns the parts
    written, the worker threads and extra summary fields (the scheduler address).

    ``outputs`` holds the prediction columns a part gets (zero rows, for a part without any),
    ``plan`` the row checks. An input that cannot be read (a corrupt file) stops the job after
    the parts before it are written, as on the local engine; a single output file is written
    only if every input is scored.
    """
    try:
        n_threads = sum(client.nthreads().values())
        address = client.scheduler.address
    except Exception as exc:  # the cluster went away after connect
        raise ClusterError(f"the Dask cluster is gone: {first_line(exc)}") from exc
    extra = {"scheduler": address}
    threads = session_threads or 1
    if not job.parts:
        return [], n_threads, extra
    if not job.layout.single_file:
        stats = _run_pieces(client, job, job.parts, outputs, plan, threads, progress)
        return [_result(job.parts[i], stats[i]) for i in sorted(stats)], n_threads, extra
    (part,) = job.parts
    started = time.perf_counter()
    with parts_folder(job.layout) as folder:
        pieces = _pieces(part, folder)
        _run_pieces(client, job, pieces, outputs, plan, threads, progress)
        empty = _join(keep_schema(part, plan).empty_table(), outputs)
        rows, bad = _concatenate(part, pieces, empty)
    joined = {"rows": rows, "bad_rows": bad, "seconds": time.perf_counter() - started}
    return [_result(part, joined)], n_threads, extra
