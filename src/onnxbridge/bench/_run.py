"""``onnxbridge bench``: scikit-learn against ONNX Runtime sessions, over batch sizes and threads.

Engines (each timed on the same rows, tiled from the holdout or the given data to each batch size):

- ``sklearn``: the bundle's ``model.skops``, ``estimator.predict`` on a float32 DataFrame (the
  values a deployed float32 model sees, with the training column names);
- ``ort-default``: ``onnxruntime.InferenceSession(path)`` with ONNX Runtime's own defaults,
  ``session.run`` on prepared feeds;
- ``ort-Nt``: the same with ``N`` intra-op threads and no spinning, for each thread count asked;
- ``onnxbridge``: :class:`onnxbridge.Predictor` ``.predict`` on a numpy array — the path
  ``predict``, ``serve`` and ``score`` take, with the tuned settings when the model has them
  (``onnxbridge tune``) and its defaults otherwise. It includes input checks and the result
  object, so it is the end-to-end figure.

At each batch size the engines' repeats are interleaved after a warm-up and calibration
(:func:`onnxbridge.bench.measure_many`), so machine noise hits them alike. Figures are per call
in seconds (median, quartiles), per row, rows per second and the speed-up over ``sklearn``
(sklearn median / engine median: above 1 the engine is faster).
"""

from __future__ import annotations

import math
import os
import platform
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from onnxbridge.bench._source import open_source, parse_batch_sizes, tile_rows
from onnxbridge.bench._timing import Timing, measure, measure_many, spin_cooldowns
from onnxbridge.bundle import MODEL_NAME, now_iso
from onnxbridge.errors import DataError
from onnxbridge.runtime import Predictor
from onnxbridge.runtime._settings import MAX_THREADS, SessionSettings, available_cores

__all__ = [
    "DEFAULT_BATCH_SIZES",
    "BenchReport",
    "EngineTiming",
    "ModelFacts",
    "ProgressFn",
    "bench_engines",
    "bench_model",
    "bench_steps",
    "machine_info",
    "model_facts",
    "write_bench_report",
]

DEFAULT_BATCH_SIZES = (1, 10, 100, 1_000, 10_000, 100_000)
BENCH_FORMAT = "1"

# progress(done, total, label): called as the measurement advances.
ProgressFn = Callable[[int, int, str], None]


@dataclass(frozen=True)
class EngineTiming:
    """One engine at one batch size.

    Attributes:
        engine: the engine's name (``sklearn``, ``ort-default``, ``ort-1t``, ``onnxbridge``...).
        batch: rows per call.
        timing: per-call seconds.
        speedup: sklearn median / this median in the same run (None without sklearn).
    """

    engine: str
    batch: int
    timing: Timing
    speedup: float | None = None

    @property
    def per_row(self) -> float:
        """Median seconds per row."""
        return self.timing.median / self.batch

    @property
    def rows_per_second(self) -> float:
        """Rows per second at the median."""
        return self.batch / self.timing.median

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "engine": self.engine,
            "batch": self.batch,
            "median": self.timing.median,
            "q1": self.timing.q1,
            "q3": self.timing.q3,
            "spread": self.timing.spread,
            "per_row": self.per_row,
            "rows_per_second": self.rows_per_second,
            "speedup_vs_sklearn": self.speedup,
            "timing": self.timing.to_dict(),
        }


@dataclass(frozen=True)
class ModelFacts:
    """Size and one-off costs of a model.

    Attributes:
        onnx_bytes: size of the ``.onnx`` file, with its external data files.
        load: seconds to open an ONNX Runtime session on it.
        skops_bytes: size of ``model.skops`` (None without it).
        sklearn_load: seconds to load ``model.skops`` (None without it).
        conversion: seconds to convert the estimator (None without it).
    """

    onnx_bytes: int
    load: Timing
    skops_bytes: int | None = None
    sklearn_load: Timing | None = None
    conversion: Timing | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "onnx_bytes": self.onnx_bytes,
            "load_seconds": self.load.median,
            "load": self.load.to_dict(),
            "skops_bytes": self.skops_bytes,
            "sklearn_load_seconds": self.sklearn_load.median if self.sklearn_load else None,
            "conversion_seconds": self.conversion.median if self.conversion else None,
            "conversion": self.conversion.to_dict() if self.conversion else None,
        }


@dataclass
class BenchReport:
    """What ``onnxbridge bench`` measured.

    Attributes:
        model: the ``.onnx`` file measured.
        engines: engine name → what it is.
        batch_sizes: rows per call, ascending.
        results: one entry per engine and batch size.
        facts: file sizes, load and conversion times.
        rows_from: where the rows came from.
        tuned: whether the model carried tuned settings (``onnxbridge tune``).
        machine: cores, load average, library versions.
        repeat: repeats per engine and batch size.
        sweep: the ``--sweep`` variants, if any (each a dict like this report's).
    """

    model: str
    engines: dict[str, str]
    batch_sizes: list[int]
    results: list[EngineTiming]
    facts: ModelFacts
    rows_from: str
    tuned: bool
    machine: dict[str, Any]
    repeat: int
    sweep: dict[str, Any] | None = None
    created_at: str = field(default_factory=now_iso)

    def result(self, engine: str, batch: int) -> EngineTiming | None:
        """The entry for one engine and batch size, or None."""
        for r in self.results:
            if r.engine == engine and r.batch == batch:
                return r
        return None

    def fastest(self, batch: int) -> EngineTiming:
        """The engine with the lowest median at ``batch`` rows."""
        return min((r for r in self.results if r.batch == batch), key=lambda r: r.timing.median)

    def _repr_html_(self) -> str:
        """The tables ``onnxbridge bench`` prints and its plot (and the sweep's), as HTML with
        the plots embedded: how a notebook shows the report."""
        from onnxbridge.bench._html import bench_html

        return bench_html(self)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (what ``reports/bench.json`` holds)."""
        return {
            "format": BENCH_FORMAT,
            "created_at": self.created_at,
            "model": self.model,
            "rows_from": self.rows_from,
            "tuned": self.tuned,
            "repeat": self.repeat,
            "batch_sizes": self.batch_sizes,
            "engines": self.engines,
            "facts": self.facts.to_dict(),
            "machine": self.machine,
            "results": [r.to_dict() for r in self.results],
            "fastest": {str(b): self.fastest(b).engine for b in self.batch_sizes},
            "sweep": self.sweep,
        }


def machine_info() -> dict[str, Any]:
    """Where the figures come from: cores, load average, Python and library versions."""
    info: dict[str, Any] = {
        "cores": available_cores(),
        "cpu_count": os.cpu_count(),
        "machine": platform.machine(),
        "python": platform.python_version(),
    }
    if hasattr(os, "getloadavg"):
        info["load_average"] = [round(v, 2) for v in os.getloadavg()]
    for name in ("onnxruntime", "scikit-learn", "numpy"):
        try:
            info[name] = importlib_metadata.version(name)
        except importlib_metadata.PackageNotFoundError:
            continue
    return info


def _session(path: Path, settings: SessionSettings) -> Any:
    import onnxruntime as ort

    return ort.InferenceSession(
        str(path), settings.to_session_options(), providers=["CPUExecutionProvider"]
    )


def _check_threads(threads: list[int]) -> list[int]:
    bad = [t for t in threads if isinstance(t, bool) or not isinstance(t, int) or t < 1]
    if bad:
        raise DataError(f"thread count {bad[0]!r} is not a whole number >= 1; give counts like 1,2")
    if max(threads, default=0) > MAX_THREADS:
        raise DataError(
            f"thread count {max(threads)} is above {MAX_THREADS}, the most a session takes; "
            "give counts like 1,2"
        )
    return sorted(set(threads))


def _finite_positive(timing: Timing, what: str) -> Timing:
    if not (math.isfinite(timing.median) and timing.median > 0):
        # perf_counter has sub-µs resolution; a zero here means the clock is broken.
        raise DataError(f"timing {what} gave {timing.median!r} s; the clock is not usable here")
    return timing


def model_facts(
    onnx_path: Path,
    *,
    estimator: Any = None,
    skops_path: Path | None = None,
    sample: pd.DataFrame | None = None,
    repeat: int = 3,
    trusted: Sequence[str] = (),
) -> ModelFacts:
    """File sizes, session load time and (with an estimator) conversion time.

    Conversion is timed with the same call ``convert`` makes (``convert_estimator`` on 100
    sample rows, which includes its checks: onnx.checker and a test run in ONNX Runtime).
    ``trusted``: extra names to trust in ``skops_path`` while timing its load.
    """
    from onnxbridge.runtime._settings import SessionSettings

    load = measure(lambda: _session(onnx_path, SessionSettings()), repeat=max(3, repeat), number=1)
    skops_bytes = sklearn_load = conversion = None
    if skops_path is not None and skops_path.is_file():
        from onnxbridge.bundle import load_estimator

        skops_bytes = skops_path.stat().st_size
        sklearn_load = measure(
            lambda: load_estimator(skops_path, trusted=trusted), repeat=repeat, number=1
        )
    if estimator is not None and sample is not None:
        conversion = _time_conversion(estimator, sample, onnx_path, repeat=repeat)
    from onnxbridge._onnxfile import total_bytes

    return ModelFacts(
        onnx_bytes=total_bytes(onnx_path),  # with its external data files, if any
        load=load,
        skops_bytes=skops_bytes,
        sklearn_load=sklearn_load,
        conversion=conversion,
    )


def _time_conversion(
    estimator: Any, sample: pd.DataFrame, onnx_path: Path, *, repeat: int
) -> Timing | None:
    from onnxbridge._meta import ModelMetadata
    from onnxbridge.convert import convert_estimator

    meta = Predictor(onnx_path).metadata
    opsets: dict[str, int] = meta.opsets if isinstance(meta, ModelMetadata) else {}
    # Convert with the opset the model was converted with, so the timing is of the same work.
    kwargs: dict[str, Any] = {"opset": opsets.get("")} if opsets.get("") else {}
    try:
        return measure(
            lambda: convert_estimator(estimator, sample.head(100), **kwargs),
            repeat=repeat,
            number=1,
        )
    except Exception:  # a model converted elsewhere may not reconvert here
        return None


def bench_engines(
    onnx_path: Path,
    rows: pd.DataFrame,
    batch_sizes: list[int],
    *,
    estimator: Any = None,
    threads: list[int] | None = None,
    repeat: int = 7,
    min_time: float = 0.05,
    progress: ProgressFn | None = None,
    label: str = "",
    done_before: int = 0,
    total: int | None = None,
    with_threads: bool = True,
) -> tuple[dict[str, str], list[EngineTiming]]:
    """Time every engine at every batch size; see the module docstring for the engines.

    Args:
        with_threads: include the ``ort-Nt`` engines (one per count in ``threads``).

    Returns:
        The engines (name → description) and one :class:`EngineTiming` per engine and size.
    """
    threads = _check_threads(list(threads or range(1, available_cores() + 1)))
    if not with_threads:
        threads = []
    predictor = Predictor(onnx_path)
    engines: dict[str, str] = {}
    sessions: dict[str, Any] = {}
    if estimator is not None:
        engines["sklearn"] = f"scikit-learn {type(estimator).__name__}.predict on a DataFrame"
    engines["ort-default"] = "onnxruntime session with its default options, session.run"
    sessions["ort-default"] = _session(onnx_path, SessionSettings())
    for n in threads:
        name = f"ort-{n}t"
        settings = SessionSettings(intra_op_num_threads=n, allow_spinning=False)
        engines[name] = f"onnxruntime session, {settings.label()}, session.run"
        sessions[name] = _session(onnx_path, settings)
    engines["onnxbridge"] = (
        "onnxbridge Predictor.predict on an array ("
        + ("tuned settings" if _tuning_of(predictor) is not None else "default settings")
        + ")"
    )
    total = total or bench_steps(len(engines), batch_sizes, repeat)
    done = done_before
    # Predictor refuses missing values for models whose source did: let them through only when
    # the rows have some (their results are timed, not validated, here).
    allow_missing = bool(rows.isna().to_numpy().any())
    numeric = all(pd.api.types.is_numeric_dtype(rows[c]) for c in rows.columns)
    results: list[EngineTiming] = []
    for batch in batch_sizes:
        try:
            frame = tile_rows(rows, batch)
            feeds = predictor.prepare(frame, allow_missing=True)
        except MemoryError as exc:
            raise DataError(
                f"a batch of {batch:,} rows of {rows.shape[1]} columns does not fit in memory "
                "here; give smaller --batch-sizes"
            ) from exc
        array = next(iter(feeds.values())) if len(feeds) == 1 else frame
        calls: dict[str, Callable[[], Any]] = {}
        if estimator is not None:
            # The float32 values a deployed float32 model sees (mixed-type rows as they are).
            from onnxbridge.train import source_frame

            sk_frame = frame.astype(np.float32) if numeric else source_frame(estimator, frame)
            calls["sklearn"] = partial(estimator.predict, sk_frame)
        for name, session in sessions.items():
            calls[name] = partial(session.run, None, feeds)
        calls["onnxbridge"] = partial(predictor.predict, array, allow_missing=allow_missing)

        def step(batch: int = batch) -> None:
            nonlocal done
            done += 1
            if progress is not None:
                progress(done, total, f"{label}{batch} rows")

        # Sessions whose threads spin on after a call get a pause before the next engine.
        cooldown = spin_cooldowns(
            {"ort-default": SessionSettings(), "onnxbridge": predictor.settings_for(batch)}
        )
        timings = measure_many(
            calls, repeat=repeat, min_time=min_time, progress=step, cooldown=cooldown
        )
        base = timings.get("sklearn")
        for name, timing in timings.items():
            _finite_positive(timing, f"{name} at {batch} rows")
            speedup = base.median / timing.median if base is not None else None
            results.append(EngineTiming(engine=name, batch=batch, timing=timing, speedup=speedup))
    return engines, results


def bench_steps(n_engines: int, batch_sizes: list[int], repeat: int) -> int:
    """How many progress steps :func:`bench_engines` takes."""
    return n_engines * len(batch_sizes) * (repeat + 1)


def _tuning_of(predictor: Predictor) -> Any:
    from onnxbridge.runtime._settings import TuningSpec

    props = dict(predictor.session.get_modelmeta().custom_metadata_map)
    return TuningSpec.find_in_props(props)


def bench_model(
    target: str | Path,
    *,
    data: str | Path | None = None,
    batch_sizes: str | list[int] | tuple[int, ...] = DEFAULT_BATCH_SIZES,
    threads: list[int] | None = None,
    repeat: int = 7,
    min_time: float = 0.05,
    sweep: str | None = None,
    sweep_batch_sizes: str | list[int] | tuple[int, ...] | None = None,
    write: bool = True,
    progress: ProgressFn | None = None,
    trusted: Sequence[str] = (),
) -> BenchReport:
    """Benchmark a bundle (or a ``.onnx`` file): engines × batch sizes, plus model facts.

    Args:
        target: a bundle folder or a ``.onnx`` file.
        data: rows to use instead of the holdout (tiled to each batch size).
        batch_sizes: rows per call.
        threads: intra-op thread counts for the ``ort-Nt`` engines [default: 1 … cores].
        repeat: interleaved repeats per engine and batch size.
        min_time: seconds one repeat lasts at least (calls per repeat are calibrated to it).
        sweep: ``"PARAM=V1,V2,..."``: retrain and convert one variant per value (bundles with
            ``model.skops`` only) and time each; see :mod:`onnxbridge.bench._sweep`.
        sweep_batch_sizes: batch sizes for the variants [default: ``batch_sizes``].
        write: write ``reports/bench.json`` and ``reports/bench.png``.
        progress: called as ``progress(done, total, label)`` while it runs.
        trusted: extra names to trust in the bundle's ``model.skops`` for this run (see
            :func:`onnxbridge.bundle.load_estimator`); never stored.

    Raises:
        BundleError, OnnxModelError, DataError, ModelSpecError: bad bundle, model, data,
        batch sizes or sweep. UnsafeModelFileError: ``model.skops`` holds a name nobody
        trusted, or a damaged tree.
    """
    from onnxbridge.bench._sweep import parse_sweep, run_sweep, sweep_steps

    if repeat < 1:
        raise DataError(
            f"repeat={repeat} is not allowed: it must be at least 1", arguments=("repeat",)
        )
    if not (math.isfinite(min_time) and min_time > 0):
        raise DataError(
            f"min_time={min_time} is not allowed: it must be a number of seconds > 0",
            arguments=("min_time",),
        )
    sizes = parse_batch_sizes(batch_sizes)
    sweep_spec = parse_sweep(sweep) if sweep else None
    source = open_source(target, data=data, trusted=trusted)
    if sweep_spec is not None and not source.has_estimator:
        raise DataError(
            "sweep= retrains the model, so it needs a bundle with model.skops; "
            f"{str(target)!r} has none",
            arguments=("sweep",),
        )
    sweep_sizes = parse_batch_sizes(sweep_batch_sizes) if sweep_batch_sizes else sizes
    estimator = source.load_estimator()
    threads = _check_threads(list(threads or range(1, available_cores() + 1)))
    n_engines = len(threads) + 2 + (estimator is not None)
    total = bench_steps(n_engines, sizes, repeat)
    if sweep_spec is not None:
        total += sweep_steps(sweep_spec, sweep_sizes, repeat)
    engines, results = bench_engines(
        source.onnx_path,
        source.rows,
        sizes,
        estimator=estimator,
        threads=threads,
        repeat=repeat,
        min_time=min_time,
        progress=progress,
        total=total,
    )
    facts = model_facts(
        source.onnx_path,
        estimator=estimator,
        skops_path=source.bundle.path / MODEL_NAME if source.bundle else None,
        sample=source.rows,
        trusted=source.trusted,
    )
    sweep_payload = None
    if sweep_spec is not None and source.bundle is not None:
        sweep_payload = run_sweep(
            source.bundle,
            sweep_spec,
            source.rows,
            sweep_sizes,
            repeat=repeat,
            min_time=min_time,
            progress=progress,
            done_before=bench_steps(n_engines, sizes, repeat),
            total=total,
        )
    report = BenchReport(
        model=str(source.onnx_path),
        engines=engines,
        batch_sizes=sizes,
        results=results,
        facts=facts,
        rows_from=source.rows_from,
        tuned=_tuning_of(Predictor(source.onnx_path)) is not None,
        machine=machine_info(),
        repeat=repeat,
        sweep=sweep_payload,
    )
    if write:
        write_bench_report(report, source.reports_dir, bundle=source.bundle)
    return report


def write_bench_report(report: BenchReport, reports_dir: Path, *, bundle: Any = None) -> Path:
    """Write ``bench.json`` and ``bench.png`` into ``reports_dir``; returns the JSON's path.

    With a bundle, ``card.json`` records where the report is and when it was made.
    """
    import json

    from onnxbridge._files import atomic_write_path, check_not_folders
    from onnxbridge.bench._plot import plot_bench

    check_not_folders(reports_dir / "bench.json", reports_dir / "bench.png")
    reports_dir.mkdir(parents=True, exist_ok=True)
    target = reports_dir / "bench.json"
    payload = report.to_dict()
    with atomic_write_path(target) as tmp:
        tmp.write_text(json.dumps(payload, indent=2) + "\n")
    plot_bench(report, reports_dir / "bench.png")
    if bundle is not None:
        bundle.card["bench"] = {
            "report": "reports/bench.json",
            "plot": "reports/bench.png",
            "benched_at": report.created_at,
            "fastest": payload["fastest"],
        }
        bundle.save_card()
    return target
