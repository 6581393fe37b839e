"""The Dask engine of ``score``: the same job on a Dask distributed cluster.

Each input file is read by ``dask.dataframe`` as one partition (``dd.read_parquet`` /
``dd.read_csv``); one task per partition scores it in record batches of ``batch_size`` rows with
:func:`~onnxbridge._score.batch.score_batch` — the local engine's code — and writes its part file
itself, under a temporary name renamed into place, so the output never travels back through the
client. The model travels once per worker, as bytes: a worker plugin loads one ONNX Runtime
session per worker process when the worker joins (workers need not see the client's files, only
the input and output paths).

Without a scheduler address a LocalCluster (one single-threaded worker process per core) is
started for the job and closed after it. ``ONNXBRIDGE_DASK_CONNECT_TIMEOUT`` (seconds, default 10)
bounds the wait for a given scheduler.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import pandas as pd
import pyarrow as pa
from distributed import Client, LocalCluster, as_completed
from distributed.diagnostics.plugin import WorkerPlugin

from onnxbridge._score.batch import empty_table, score_batch
from onnxbridge._score.core import (
    PartResult,
    PartSpec,
    ProgressCallback,
    ScoreJob,
    available_cores,
    keep_schema,
)
from onnxbridge._score.inputs import CSV_NULL_VALUES, InputFile, rechunk
from onnxbridge._score.output import open_part
from onnxbridge._score.rows import RowPlan
from onnxbridge.errors import ClusterError, DataError, OnnxbridgeError, first_line
from onnxbridge.runtime import Predictor

__all__ = ["connect", "keep_environ", "run_dask"]

# One Predictor per worker process and model, created by the plugin when the worker starts.
_PREDICTORS: dict[str, Predictor] = {}
_LOCK = threading.Lock()


class SessionPlugin(WorkerPlugin):
    """Loads the model's ONNX Runtime session once on every worker, from the model's bytes."""

    def __init__(self, key: str, model: bytes, session_threads: int) -> None:
        self.key = key
        self.model = model
        self.session_threads = session_threads

    def setup(self, worker: Any) -> None:
        """Create the worker's session (worker threads share it: ``run`` is thread-safe)."""
        with _LOCK:
            if self.key not in _PREDICTORS:
                _PREDICTORS[self.key] = Predictor(
                    self.model, intra_op_num_threads=self.session_threads, regime="throughput"
                )

    def teardown(self, worker: Any) -> None:
        """Drop the session when the plugin is removed or the worker stops."""
        with _LOCK:
            _PREDICTORS.pop(self.key, None)


def _score_partition(
    frame: pd.DataFrame,
    key: str,
    part: PartSpec,
    plan: RowPlan,
    empty: pa.Table,
    batch_size: int,
    on_error: str,
    allow_missing: bool,
) -> dict[str, Any]:
    """Score one partition (one input file) on a worker and write its part file."""
    started = time.perf_counter()
    predictor = _PREDICTORS.get(key)
    if predictor is None:
        raise ClusterError(
            "this Dask worker has no ONNX Runtime session for the model (the worker plugin did "
            "not run); restart the workers and run the job again"
        )
    source = part.sources[0]
    table = pa.Table.from_pandas(frame, preserve_index=False)
    missing = plan.check_columns(str(source.path), table.column_names)
    first = 1
    with open_part(part.path, part.bad_path, part.identity, empty) as sink:
        for batch in rechunk(table.to_batches(), batch_size):
            scored = score_batch(
                predictor,
                batch,
                plan,
                file=str(source.path),
                first_row=first,
                on_error=on_error,
                allow_missing=allow_missing,
                missing=missing,
            )
            sink.write(scored.table, scored.bad)
            first += batch.num_rows
    return {
        "rows": sink.rows,
        "bad_rows": sink.bad_rows,
        "seconds": time.perf_counter() - started,
    }


def _partition(source: InputFile, plan: RowPlan) -> Any:
    """The file as a one-partition dask DataFrame, as a Delayed object."""
    import dask.dataframe as dd

    columns = source.column_names()
    wanted = plan.read_columns(columns)
    if source.fmt == "parquet":
        frame = dd.read_parquet(str(source.path), columns=wanted, split_row_groups=False)
    else:
        text = [c for c in plan.text_columns() if c in columns]
        frame = dd.read_csv(
            str(source.path),
            sep="\t" if source.fmt == "tsv" else ",",
            blocksize=None,
            usecols=wanted,
            dtype={c: "str" for c in text},
            na_values=CSV_NULL_VALUES,
            keep_default_na=False,
        )
    (delayed,) = frame.to_delayed()
    return delayed


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
            cluster = LocalCluster(
                n_workers=workers or available_cores(),
                threads_per_worker=1,
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


def run_dask(
    job: ScoreJob,
    local: Predictor,
    plan: RowPlan,
    client: Client,
    *,
    session_threads: int | None,
    progress: ProgressCallback | None,
) -> tuple[list[PartResult], int, dict[str, Any]]:
    """Run ``job``'s parts as Dask tasks on ``client`` (from :func:`connect`); returns the parts
    written, the worker threads and extra summary fields (the scheduler address).

    ``local`` is the client's session of the model (for the output columns), ``plan`` the row
    checks. An input that cannot be read (a corrupt file) stops the job after the parts before
    it are written, as on the local engine.
    """
    import dask

    total = job.total_rows()
    if progress is not None:
        progress(0, total)
    key = f"onnxbridge-score-{job.model_sha256[:16]}"
    written: list[PartResult] = []
    try:
        n_threads = sum(client.nthreads().values())
        address = client.scheduler.address
        if not job.parts:
            return written, n_threads, {"scheduler": address}
        plugin = SessionPlugin(key, job.read_model_bytes(), session_threads or 1)
        client.register_plugin(plugin, name=key)
        tasks = []
        failure: OnnxbridgeError | None = None
        for part in job.parts:
            try:
                partition = _partition(part.sources[0], plan)
            except OnnxbridgeError as exc:
                failure = exc  # raised once the parts before this input are written
                break
            empty = empty_table(local, plan, keep_schema(part, plan))
            tasks.append(
                dask.delayed(_score_partition, pure=False)(
                    partition,
                    key,
                    part,
                    plan,
                    empty,
                    job.batch_size,
                    job.on_error,
                    job.allow_missing,
                )
            )
        futures = client.compute(tasks)
        by_future = dict(zip(futures, job.parts[: len(tasks)], strict=True))
        done_rows = 0
        try:
            for future in as_completed(futures):
                stats = future.result()
                part = by_future[future]
                written.append(
                    PartResult(
                        part.path,
                        [str(s.path) for s in part.sources],
                        stats["rows"],
                        stats["bad_rows"],
                        bad_rows_path=part.bad_path if stats["bad_rows"] else None,
                        seconds=stats["seconds"],
                    )
                )
                done_rows += stats["rows"] + stats["bad_rows"]
                if progress is not None:
                    progress(done_rows, total)
        except OnnxbridgeError:
            client.cancel(futures)
            raise
        except OSError:
            client.cancel(futures)
            raise
        except Exception as exc:  # KilledWorker, CommClosedError, a worker without onnxbridge...
            client.cancel(futures)
            raise ClusterError(
                f"the Dask job failed: {type(exc).__name__}: {first_line(exc)}; check the "
                "workers' logs (they need onnxbridge and onnxruntime installed, and must see "
                "the input and output paths)"
            ) from exc
        if failure is not None:
            raise failure
        return written, n_threads, {"scheduler": address}
    finally:
        try:
            client.unregister_worker_plugin(key)
        except Exception:  # the plugin was never registered, or the cluster is gone
            pass
