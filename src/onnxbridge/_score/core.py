"""``score()``: batch scoring of files larger than memory with an ONNX model.

The job: input files (:func:`~onnxbridge._score.inputs.list_inputs`) → parts (one per input file
for a folder output, one for a single output file) → record batches of ``batch_size`` rows →
:func:`~onnxbridge._score.batch.score_batch` → Parquet, written under temporary names and renamed
into place (:mod:`onnxbridge._score.output`). The local engine runs batches on a thread pool
(ONNX Runtime releases the GIL while it computes); the Dask engine
(:mod:`onnxbridge._score.dask_engine`) runs one task per input file on a cluster. Both go
through the same :class:`~onnxbridge.runtime.Predictor` code, so they write identical predictions.

Nothing is lost: every refusal (bad options, a model that does not load, an output that is an
input or not score's own, a resume of another job) is decided before anything on disk changes,
then again under the output's lock (:func:`~onnxbridge._score.output.output_lock`), and only then
is the output cleared for the job.

Only an ``.onnx`` file and ONNX Runtime are needed: nothing here imports scikit-learn.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import numbers
import os
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from onnxbridge._inspection import MAX_ONNX_BYTES
from onnxbridge._onnxfile import model_sha256
from onnxbridge._score.batch import Predicts, ScoredBatch, empty_table, score_batch
from onnxbridge._score.inputs import InputFile, iter_batches, list_inputs
from onnxbridge._score.memory import PeakMemory
from onnxbridge._score.output import (
    OutputLayout,
    PartSink,
    open_part,
    output_lock,
    part_identity,
    read_part,
)
from onnxbridge._score.rows import BAD_ROW_COLUMNS, RowPlan
from onnxbridge.errors import BadRowError, DataError, OnnxbridgeError, OnnxModelError
from onnxbridge.runtime import Predictor
from onnxbridge.runtime._settings import MAX_THREADS

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "ENGINES",
    "MAX_MODEL_BYTES",
    "ON_ERROR",
    "PartResult",
    "PartSpec",
    "ScoreJob",
    "ScoreResult",
    "available_cores",
    "keep_schema",
    "prepare_job",
    "score",
]

DEFAULT_BATCH_SIZE = 65_536
ENGINES = ("local", "dask")
ON_ERROR = ("raise", "skip")
# protobuf parses at most 2 GiB: a larger .onnx file cannot be a model (big models keep their
# weights in external data files), so it is refused from its size, before any byte is read.
# The same limit as inspect's.
MAX_MODEL_BYTES = MAX_ONNX_BYTES
ProgressCallback = Callable[[int, int | None], None]


def available_cores() -> int:
    """Cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


@dataclass
class PartResult:
    """One output file of a job.

    Attributes:
        path: the part file (or the single output file).
        sources: the input files scored into it.
        rows: rows written (scored).
        bad_rows: rows skipped into ``bad_rows_path`` (``--on-error skip``).
        resumed: the part was already complete (``--resume``) and was kept, not re-scored.
        bad_rows_path: the side file of skipped rows, if there are any.
        seconds: time this run spent on it (0 for a resumed part).
    """

    path: Path
    sources: list[str]
    rows: int
    bad_rows: int
    resumed: bool = False
    bad_rows_path: Path | None = None
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "path": str(self.path),
            "sources": self.sources,
            "rows": self.rows,
            "bad_rows": self.bad_rows,
            "resumed": self.resumed,
            "bad_rows_path": str(self.bad_rows_path) if self.bad_rows_path else None,
        }


@dataclass
class ScoreResult:
    """The summary of a scoring job.

    Attributes:
        output: the output file or folder.
        engine: ``"local"`` or ``"dask"``.
        parts: every output part, in input order.
        seconds: wall time of this run.
        peak_rss_bytes: largest resident memory of this process and its children (Dask
            LocalCluster workers included) during the run.
        workers: threads (local) or Dask worker threads used.
    """

    output: Path
    engine: str
    parts: list[PartResult]
    seconds: float
    peak_rss_bytes: int
    workers: int
    batch_size: int
    inputs: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def rows(self) -> int:
        """Rows scored by this run (parts kept by ``--resume`` not counted)."""
        return sum(p.rows for p in self.parts if not p.resumed)

    @property
    def rows_resumed(self) -> int:
        """Rows of the parts that ``--resume`` kept."""
        return sum(p.rows for p in self.parts if p.resumed)

    @property
    def bad_rows(self) -> int:
        """Rows skipped (``--on-error skip``), in all parts."""
        return sum(p.bad_rows for p in self.parts)

    @property
    def rows_per_second(self) -> float:
        """Rows scored (and checked bad) per second of this run."""
        done = self.rows + sum(p.bad_rows for p in self.parts if not p.resumed)
        return done / self.seconds if self.seconds > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        """The ``--json`` summary."""
        return {
            "output": str(self.output),
            "engine": self.engine,
            "inputs": self.inputs,
            "rows": self.rows,
            "bad_rows": self.bad_rows,
            "rows_resumed": self.rows_resumed,
            "seconds": round(self.seconds, 3),
            "rows_per_second": round(self.rows_per_second, 1),
            "peak_rss_bytes": self.peak_rss_bytes,
            "peak_rss_mib": round(self.peak_rss_bytes / 2**20, 1),
            "workers": self.workers,
            "batch_size": self.batch_size,
            "parts": len(self.parts),
            "parts_resumed": sum(p.resumed for p in self.parts),
            "bad_rows_files": [str(p.bad_rows_path) for p in self.parts if p.bad_rows_path],
            **self.extra,
        }


@dataclass
class PartSpec:
    """One part to write: its final path, side file, input files and identity (for resume)."""

    index: int | None
    path: Path
    bad_path: Path
    sources: list[InputFile]
    identity: dict[str, Any]


@dataclass
class ScoreJob:
    """Everything both engines need to score: the model, the parts and the options.

    Attributes:
        model_bytes: the model's bytes when it was given as bytes (else read from
            ``model_path`` only by the Dask engine, whose workers load their session from them).
        model_path: the ``.onnx`` file, when the model was given as a path.
        model_sha256: content hash, recorded in every part (resume compares it).
        layout: where the output goes.
        parts: the parts still to write (those kept by resume are in ``done``).
        done: parts that ``--resume`` found complete.
        part_paths: every part's final path, in input order.
    """

    model_bytes: bytes | None
    model_path: Path | None
    model_sha256: str
    layout: OutputLayout
    inputs: list[InputFile]
    keep: list[str]
    batch_size: int
    on_error: str
    allow_missing: bool
    parts: list[PartSpec] = field(default_factory=list)
    done: list[PartResult] = field(default_factory=list)
    part_paths: list[Path] = field(default_factory=list)

    @property
    def model(self) -> Path | bytes:
        """The model as Predictor takes it: its file, or its bytes."""
        if self.model_path is not None:
            return self.model_path
        assert self.model_bytes is not None  # one of the two is always set (_read_model)
        return self.model_bytes

    def total_rows(self) -> int | None:
        """Rows to score when cheap to know (all inputs Parquet), else None (also when a
        footer does not read: that input fails in its turn, after the parts before it)."""
        total = 0
        for part in self.parts:
            for source in part.sources:
                try:
                    n = source.num_rows()
                except DataError:
                    return None
                if n is None:
                    return None
                total += n
        return total

    def plan(self, predictor: Predictor) -> RowPlan:
        """The row checks for ``predictor``'s model.

        Raises:
            DataError: a ``--keep`` column named like an output column (or, skipping bad rows,
                like a column of the bad-rows file), or missing from an input still to score.
        """
        plan = RowPlan.for_model(predictor, self.keep, allow_missing=self.allow_missing)
        outputs = set(empty_table(predictor, plan, pa.schema([])).column_names)
        clash = [k for k in self.keep if k in outputs]
        if clash:
            raise DataError(
                f"keep= column {clash[0]!r} has the name of an output column "
                f"({', '.join(sorted(outputs))}); rename it in the input",
                arguments=("keep",),
            )
        clash = [k for k in self.keep if k in BAD_ROW_COLUMNS]
        if clash and self.on_error == "skip":
            raise DataError(
                f"keep= column {clash[0]!r} has the name of a column of the bad-rows file "
                f"({', '.join(BAD_ROW_COLUMNS)}); rename it in the input, or keep another",
                arguments=("keep",),
            )
        if self.keep:
            # A --keep column missing from an input is a usage error: refused before the output
            # is touched. An input whose header does not read fails in its turn instead, after
            # the parts before it are written.
            for part in self.parts:
                for source in part.sources:
                    try:
                        columns = source.column_names()
                    except DataError:
                        continue
                    plan.check_columns(str(source.path), columns)
        return plan


def _read_model(model: str | os.PathLike[str] | bytes) -> tuple[bytes | None, Path | None, str]:
    """``(bytes or None, file or None, sha256)``; a file is hashed in chunks, never held whole
    (with its external data files, if it has any: see :func:`onnxbridge._onnxfile.model_sha256`).

    Raises:
        OnnxModelError: no such file, a file larger than :data:`MAX_MODEL_BYTES`, or external
            data outside its folder, missing or damaged.
    """
    if isinstance(model, bytes):
        return model, None, hashlib.sha256(model).hexdigest()
    path = Path(model)
    if path.is_dir():
        path = path / "model.onnx"  # a bundle folder stands for its model
    if not path.is_file():
        raise OnnxModelError(
            f"model file {str(path)!r} does not exist; pass a .onnx file or a bundle folder "
            "(`onnxbridge convert` writes BUNDLE/model.onnx)"
        )
    size = path.stat().st_size
    if size > MAX_MODEL_BYTES:
        raise OnnxModelError(
            f"model file {str(path)!r} is {size:,} bytes; an .onnx file holds at most "
            f"{MAX_MODEL_BYTES:,} bytes (2 GiB, the protobuf limit): check that this is the "
            "model you meant (larger models keep their weights in external data files)"
        )
    return None, path, model_sha256(path)


# The most rows a batch may have: the largest signed 32-bit integer. pyarrow's readers take it
# (the Parquet reader's batch size is a C integer, which a larger Python int overflows), and no
# batch that large fits in memory anyway: a file smaller than a batch is read as one batch.
MAX_BATCH_SIZE = 2**31 - 1


def _check_options(
    engine: str, batch_size: int, on_error: str, workers: int | None, session_threads: int | None
) -> None:
    if engine not in ENGINES:
        raise DataError(
            f"engine={engine!r} is not supported; use one of {', '.join(ENGINES)}",
            arguments=("engine",),
        )
    if on_error not in ON_ERROR:
        raise DataError(
            f"on_error={on_error!r} is not supported; use 'raise' (stop at the first bad row) "
            "or 'skip' (write bad rows to a side file)",
            arguments=("on_error",),
        )
    if not isinstance(batch_size, int) or not 1 <= batch_size <= MAX_BATCH_SIZE:
        raise DataError(
            f"batch_size={batch_size!r} is not allowed: it must be a positive number of rows, "
            f"from 1 to {MAX_BATCH_SIZE:,}",
            arguments=("batch_size",),
        )
    for name, value in (("workers", workers), ("session_threads", session_threads)):
        if value is not None and not (
            isinstance(value, numbers.Integral) and 1 <= value <= MAX_THREADS
        ):
            raise DataError(
                f"{name}={value!r} is not allowed: it must be a number of threads from 1 to "
                f"{MAX_THREADS}",
                arguments=(name,),
            )


def prepare_job(
    model: str | os.PathLike[str] | bytes,
    inputs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    output: str | os.PathLike[str],
    *,
    keep: Sequence[str],
    batch_size: int,
    on_error: str,
    allow_missing: bool,
    resume: bool,
    overwrite: bool,
    locked: bool = False,
) -> ScoreJob:
    """Find the inputs, check the output and decide which parts are left to write.

    Reads only: a job that is refused here changed nothing on disk. The caller clears the
    output (:meth:`OutputLayout.clear`) under its lock once the job is accepted; ``locked``
    says it holds that lock already.

    Raises:
        DataError: bad inputs or output, a part of another job under ``resume``.
        BadRowError: ``resume`` with ``on_error="raise"`` over a part that skipped rows.
        OnnxModelError: no such model file, or one too large to be a model.
    """
    files = list_inputs(inputs)
    model_bytes, model_path, model_sha256 = _read_model(model)
    layout = OutputLayout.for_output(os.fspath(output))
    layout.check(files, resume=resume, overwrite=overwrite, locked=locked)
    job = ScoreJob(
        model_bytes=model_bytes,
        model_path=model_path,
        model_sha256=model_sha256,
        layout=layout,
        inputs=files,
        keep=list(dict.fromkeys(keep)),  # a column named twice is kept once
        batch_size=batch_size,
        on_error=on_error,
        allow_missing=allow_missing,
    )
    # --on-error is not part of a part's identity: a part finished with "raise" has no bad
    # row, so it is what "skip" would write too (the reverse is checked below).
    options = {"keep": job.keep, "allow_missing": allow_missing}
    groups: list[tuple[int | None, list[InputFile]]] = (
        [(None, files)] if layout.single_file else [(i, [f]) for i, f in enumerate(files)]
    )
    for index, sources in groups:
        path = layout.path if index is None else layout.part_path(index)
        job.part_paths.append(path)
        identity = part_identity(sources, job.model_sha256, options)
        part = PartSpec(index, path, layout.bad_rows_path(index), sources, identity)
        if resume and path.is_file():
            try:
                job.done.append(_resumed(part, identity, on_error))
                continue
            except (DataError, BadRowError):
                if not overwrite:
                    raise
                # resume and overwrite: a part of this same job is kept, another is redone
        job.parts.append(part)
    return job


def _resumed(part: PartSpec, identity: dict[str, Any], on_error: str) -> PartResult:
    """The finished part ``--resume`` keeps, after checking it was made by this same job."""
    found, rows = read_part(part.path)
    if found != identity:
        raise DataError(
            f"cannot resume: {str(part.path)!r} was not made from the same input, model and "
            "options as this job (an input file, the model, keep= or allow_missing= "
            "changed); add overwrite=True to score the parts that differ again",
            arguments=("keep", "allow_missing", "overwrite"),
        )
    bad = _bad_count(part.bad_path)
    if bad and on_error == "raise":
        raise BadRowError(
            f"cannot resume with on_error='raise': {str(part.path)!r} was finished with "
            f"{bad} bad row{'s' if bad != 1 else ''} skipped into "
            f"{str(part.bad_path)!r}; resume with on_error='skip', or pass overwrite=True",
            arguments=("on_error", "overwrite"),
            file=str(part.sources[0].path),
            row=None,
            column="",
        )
    return PartResult(
        part.path,
        [str(s.path) for s in part.sources],
        rows,
        bad,
        resumed=True,
        bad_rows_path=part.bad_path if bad else None,
    )


def _bad_count(path: Path) -> int:
    if not path.is_file():
        return 0
    import pyarrow.parquet as pq

    return int(pq.read_metadata(path).num_rows)


def score(
    model: str | os.PathLike[str] | bytes,
    inputs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    output: str | os.PathLike[str],
    *,
    engine: str = "local",
    keep: Sequence[str] = (),
    batch_size: int = DEFAULT_BATCH_SIZE,
    on_error: str = "raise",
    allow_missing: bool = False,
    resume: bool = False,
    overwrite: bool = False,
    workers: int | None = None,
    session_threads: int | None = None,
    scheduler: str | None = None,
    accelerator: bool = False,
    progress: ProgressCallback | None = None,
    trust_native: bool = False,
) -> ScoreResult:
    """Score CSV / Parquet files larger than memory with an ONNX model; write Parquet.

    Args:
        model: a ``.onnx`` file, a bundle folder (its ``model.onnx``) or the model's bytes.
        inputs: files, folders or globs of ``.csv`` / ``.tsv`` / ``.parquet`` files.
        output: a ``.parquet`` file (all inputs in one file), or a folder that gets one
            ``part-NNNNN.parquet`` per input file (either engine).
        engine: ``"local"`` (a thread pool) or ``"dask"`` (a Dask cluster).
        keep: input columns copied to the output before the predictions (row keys).
        batch_size: rows per record batch; memory grows with it.
        on_error: ``"raise"``: the first bad row raises :class:`BadRowError` naming its file,
            row and column; ``"skip"``: bad rows go to a side file with the reason.
        allow_missing: score rows with missing values even if the source model refused them.
        resume: keep the parts a previous run of the same job completed; write the rest.
        overwrite: replace an existing output (only one that score wrote).
        workers: local: threads in the pool [default: cores]; dask: threads of the
            LocalCluster's worker process, started when no ``scheduler`` is given [default:
            cores].
        session_threads: ONNX Runtime intra-op threads per session [default: 1: parallelism
            comes from ``workers``, and results then do not depend on ``batch_size``].
        scheduler: the address of a running Dask scheduler (``tcp://host:8786``); without it
            the Dask engine starts a LocalCluster for the job.
        accelerator: score batches of at least the recorded ``min_rows`` rows on the compiled
            engine ``onnxbridge tune --engines all`` recorded in the bundle (compiled trees
            checked equivalent to the ONNX model; :mod:`onnxbridge.engines`); smaller batches
            run on ONNX Runtime. Its library is native code, loaded only when asked for, only
            with ``trust_native`` and only when its hash matches the card. Local engine only.
        progress: called with ``(rows done, total rows or None)`` as rows are written.
        trust_native: you trust the bundle's native code (you made it with ``tune --engines
            all``): required with ``accelerator``.

    Returns:
        The summary: rows, bad rows, seconds, rows/s, peak memory and every part.

    Raises:
        DataError: bad inputs, options or output; BadRowError for a bad row.
        OnnxModelError: the model does not load. ClusterError: the Dask cluster failed.
    """
    _check_options(engine, batch_size, on_error, workers, session_threads)
    if accelerator and engine != "local":
        raise DataError(
            "accelerator=True runs with engine='local' only (Dask workers get the .onnx model "
            "alone); drop one of them",
            arguments=("accelerator", "engine"),
        )
    if engine == "local" and scheduler is not None:
        raise DataError(
            "scheduler= is for engine='dask'; add engine='dask' or drop it",
            arguments=("scheduler", "engine"),
        )
    started = time.perf_counter()
    options: dict[str, Any] = {
        "keep": keep,
        "batch_size": batch_size,
        "on_error": on_error,
        "allow_missing": allow_missing,
        "resume": resume,
        "overwrite": overwrite,
    }
    with PeakMemory() as memory:
        # Every refusal comes before the lock and before anything on disk changes: the job's
        # inputs, model and output, then the model loads and the --keep columns are checked.
        job = prepare_job(model, inputs, output, **options)
        predictor: Predictor | None = None
        runner: Predicts | None = None
        if engine == "local":
            predictor = Predictor(
                job.model,
                # One thread per session: parallelism comes from the pool, and tree votes are
                # then added in one order whatever the batch size.
                intra_op_num_threads=session_threads or 1,
                regime="throughput",  # one session for every batch, also a file's last one
            )
            runner = predictor
            if accelerator:
                from onnxbridge.engines import AcceleratedPredictor

                # Refuses a bundle without a compiled engine, then one the caller has not
                # trusted, before any file of it is opened and before the output is touched.
                runner = AcceleratedPredictor.load(predictor, trust_native=trust_native)
            plan = job.plan(predictor)
        else:
            plan, outputs = _check_model(job)
        with contextlib.ExitStack() as stack:
            client = None
            if engine != "local":
                from onnxbridge._score.dask_engine import connect

                # Before the output changes: an unreachable cluster is a refused run.
                client = stack.enter_context(connect(scheduler, workers))
            with output_lock(job.layout):
                # Again under the lock: another run may have changed the output meanwhile.
                job = prepare_job(model, inputs, output, **options, locked=True)
                job.layout.clear(resume=resume, overwrite=overwrite, parts=len(job.inputs))
                if client is None:
                    assert predictor is not None and runner is not None  # engine="local"
                    n_workers = workers or available_cores()
                    written = _run_local(job, predictor, runner, plan, n_workers, progress)
                    extra: dict[str, Any] = {}
                else:
                    from onnxbridge._score.dask_engine import run_dask

                    written, n_workers, extra = run_dask(
                        job,
                        outputs,
                        plan,
                        client,
                        session_threads=session_threads,
                        progress=progress,
                    )
                result = _finish(job, written, engine, n_workers, batch_size, extra, started)
    result.peak_rss_bytes = memory.peak_bytes
    return result


def _check_model(job: ScoreJob) -> tuple[RowPlan, pa.Table]:
    """The Dask engine's checks on the client: the model loads, and the row plan and the output
    columns (a zero-row table) it gives. The workers score with their own sessions, so this
    one is dropped before they start.

    Raises:
        OnnxModelError: the model does not load. DataError: bad ``--keep`` columns.
    """
    predictor = Predictor(job.model, intra_op_num_threads=1)
    plan = job.plan(predictor)
    return plan, empty_table(predictor, plan, pa.schema([]))


def _finish(
    job: ScoreJob,
    written: list[PartResult],
    engine: str,
    n_workers: int,
    batch_size: int,
    extra: dict[str, Any],
    started: float,
) -> ScoreResult:
    """The job's summary; a folder output gets its manifest (the job is complete)."""
    order = {p: i for i, p in enumerate(job.part_paths)}
    parts = sorted([*job.done, *written], key=lambda p: order[p.path])
    result = ScoreResult(
        output=job.layout.path,
        engine=engine,
        parts=parts,
        seconds=time.perf_counter() - started,
        peak_rss_bytes=0,
        workers=n_workers,
        batch_size=batch_size,
        inputs=len(job.inputs),
        extra=extra,
    )
    if not job.layout.single_file:
        job.layout.write_manifest(
            {
                "format": 1,
                "complete": True,
                "model_sha256": job.model_sha256,
                "rows": sum(p.rows for p in parts),
                "bad_rows": result.bad_rows,
                "parts": [
                    {**p.to_dict(), "path": p.path.name}
                    | (
                        {"bad_rows_path": str(p.bad_rows_path.relative_to(job.layout.path))}
                        if p.bad_rows_path
                        else {}
                    )
                    for p in parts
                ],
            }
        )
    return result


def part_batches(
    part: PartSpec, plan: RowPlan, batch_size: int
) -> Iterator[tuple[InputFile, int, pa.RecordBatch, tuple[str, str] | None]]:
    """Every record batch of a part: ``(source, first row (1-based), batch, missing column)``."""
    for source in part.sources:
        columns = source.column_names()
        missing = plan.check_columns(str(source.path), columns)
        first = 1
        for batch in iter_batches(
            source,
            batch_size=batch_size,
            columns=plan.read_columns(columns),
            text_columns=[c for c in plan.text_columns() if c in columns],
        ):
            yield source, first, batch, missing
            first += batch.num_rows


@dataclass(frozen=True)
class _Open:
    """Start writing a part."""

    part: PartSpec


@dataclass(frozen=True)
class _Close:
    """Every batch of the part is written: commit it."""

    part: PartSpec


@dataclass(frozen=True)
class _Failed:
    """Reading the inputs failed here; the parts before it are committed first."""

    error: BaseException


def _run_local(
    job: ScoreJob,
    predictor: Predictor,
    runner: Predicts,
    plan: RowPlan,
    workers: int,
    progress: ProgressCallback | None,
) -> list[PartResult]:
    """The local engine: batches of every part go through one thread pool, in order; ``runner``
    scores them (``predictor``, or it with a compiled engine for large batches).

    The main thread reads ahead (a window of batches in flight) and handles events in input
    order: a part is committed when its last batch is written, so an input that fails to read
    after it (a corrupt file, a missing column) never costs a finished part.
    """
    if not job.parts:
        return []
    total = job.total_rows()
    done_rows = 0
    results: list[PartResult] = []

    def run(source: InputFile, first: int, batch: pa.RecordBatch, missing: Any) -> ScoredBatch:
        return score_batch(
            runner,
            batch,
            plan,
            file=str(source.path),
            first_row=first,
            on_error=job.on_error,
            allow_missing=job.allow_missing,
            missing=missing,
        )

    def events(pool: ThreadPoolExecutor) -> Iterator[Future[ScoredBatch] | _Open | _Close]:
        for part in job.parts:
            batches = part_batches(part, plan, job.batch_size)
            head = next(batches, None)  # the part opens once its input's columns check out
            yield _Open(part)
            for source, first, batch, missing in itertools.chain([head] if head else [], batches):
                yield pool.submit(run, source, first, batch, missing)
            yield _Close(part)

    window = max(2, 2 * workers)  # batches in flight: bounds memory, keeps the pool busy
    pending: deque[Future[ScoredBatch] | _Open | _Close | _Failed] = deque()
    in_flight = 0
    current: contextlib.AbstractContextManager[PartSink] | None = None
    sink: PartSink | None = None
    started = 0.0
    if progress is not None:
        progress(0, total)
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="score") as pool:
        stream = events(pool)
        try:
            exhausted = False
            while True:
                while not exhausted and in_flight < window:
                    event: Future[ScoredBatch] | _Open | _Close | _Failed | None
                    try:
                        event = next(stream, None)
                    except (OnnxbridgeError, OSError) as exc:
                        event = _Failed(exc)  # raised in its turn, after the parts before it
                        exhausted = True
                    if event is None:
                        exhausted = True
                        continue
                    pending.append(event)
                    in_flight += isinstance(event, Future)
                if not pending:
                    break
                item = pending.popleft()
                if isinstance(item, Future):
                    in_flight -= 1
                    scored: ScoredBatch = item.result()
                    assert sink is not None
                    sink.write(scored.table, scored.bad)
                    done_rows += scored.table.num_rows + scored.n_bad
                    if progress is not None:
                        progress(done_rows, total)
                elif isinstance(item, _Open):
                    empty = empty_table(predictor, plan, keep_schema(item.part, plan))
                    current = open_part(
                        item.part.path, item.part.bad_path, item.part.identity, empty
                    )
                    sink = current.__enter__()
                    started = time.perf_counter()
                elif isinstance(item, _Close):
                    assert current is not None and sink is not None
                    committing, current = current, None
                    committing.__exit__(None, None, None)
                    results.append(_part_result(item.part, sink, time.perf_counter() - started))
                    sink = None
                else:
                    raise item.error
        except BaseException as exc:
            for item in pending:
                if isinstance(item, Future):
                    item.cancel()
            if current is not None:
                current.__exit__(type(exc), exc, exc.__traceback__)
            raise
    return results


def keep_schema(part: PartSpec, plan: RowPlan) -> pa.Schema:
    """The types of the ``--keep`` columns in the part's first input (for an empty part)."""
    if not plan.keep:
        return pa.schema([])
    source = part.sources[0]
    if source.fmt == "parquet":
        schema = source.parquet_schema()
        return pa.schema([schema.field(name) for name in plan.keep])
    return pa.schema([pa.field(name, pa.string()) for name in plan.keep])


def _part_result(part: PartSpec, sink: PartSink, seconds: float) -> PartResult:
    return PartResult(
        part.path,
        [str(s.path) for s in part.sources],
        sink.rows,
        sink.bad_rows,
        bad_rows_path=part.bad_path if sink.bad_rows else None,
        seconds=seconds,
    )
