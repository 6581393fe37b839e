"""``tune --engines all``: build the installed compiled engines, check them, time them.

Each engine (:mod:`onnxbridge.engines._build`) is checked equivalent on validate's probe
rows, then timed against the tuned ONNX Runtime model as ``Predictor`` runs both, at every size
from one row; one is recorded only when it is both equivalent and faster.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from onnxbridge.bench._source import BenchSource, tile_rows
from onnxbridge.bench._timing import SPIN_COOLDOWN, measure_many, spin_cooldowns
from onnxbridge.errors import AcceleratorError, first_line
from onnxbridge.runtime import Predictor
from onnxbridge.runtime._settings import TuningSpec, available_cores
from onnxbridge.tune._candidates import MID_ROWS
from onnxbridge.tune._search import Measure
from onnxbridge.tune._store import keep_artifact

__all__ = ["EngineResult", "tune_engines"]


@dataclass
class EngineResult:
    """What ``--engines all`` found: the engine to record (or None), every check, the engines
    not tried and why."""

    record: dict[str, Any] | None
    checks: list[dict[str, Any]]
    skipped: list[str]


def tune_engines(
    source: BenchSource,
    estimator: Any,
    tuned: TuningSpec,
    throughput_rows: int,
    measure: Measure,
    *,
    write: bool,
) -> EngineResult:
    """Build, check and time the compiled engines of ``estimator`` against ``tuned``, in a
    folder removed afterwards (what is recorded is copied into the bundle)."""
    with tempfile.TemporaryDirectory(prefix="onnxbridge-tune-") as workdir:
        return _tune_engines(
            source, estimator, tuned, throughput_rows, Path(workdir), measure, write
        )


def _tune_engines(
    source: BenchSource,
    estimator: Any,
    tuned: TuningSpec,
    throughput_rows: int,
    workdir: Path,
    measure: Measure,
    write: bool,
) -> EngineResult:
    from onnxbridge.engines import _build as engines

    predictor = Predictor(source.onnx_path)
    n_classes = len(predictor.classes) if predictor.classes is not None else None
    double = any(i.type == "tensor(double)" for i in predictor.inputs)
    candidates, skipped = engines.build_candidates(
        estimator,
        workdir,
        n_classes=n_classes,
        threads=sorted({1, available_cores()}),
        precision="double" if double else "float",
    )
    if not candidates:
        return EngineResult(None, [], skipped)
    metadata = predictor.metadata
    probes = engines.probe_rows(
        source.rows,
        schema=metadata.features if metadata is not None else None,
        estimator=estimator,
        accepts_missing=metadata is not None and metadata.accepts_missing_everywhere(),
    )
    checks = [engines.check_candidate(c, predictor, probes) for c in candidates]
    # From one row: compiled code that beats ONNX Runtime even there serves every call.
    sizes = sorted(
        {min(n, throughput_rows) for n in (measure.latency_rows, MID_ROWS, 1_000, throughput_rows)}
    )
    paths = _Paths(source.onnx_path, tuned, n_classes)
    usable = list(zip(candidates, checks, strict=True))
    for size in sizes:
        X = next(iter(predictor.prepare(tile_rows(source.rows, size), allow_missing=True).values()))
        usable = _time_size(paths, usable, X, measure)
    chosen = engines.choose_accelerator(checks)
    record = None
    if chosen is not None:
        candidate = next(c for c in candidates if c.name == chosen.name)
        record = _record(candidate, chosen, engines.min_rows_of(chosen))
        if write and candidate.artifact is not None and source.bundle is not None:
            record["library"] = keep_artifact(source, candidate.artifact)
            if candidate.model_text is not None:
                record["model_text"] = keep_artifact(source, candidate.model_text)
    return EngineResult(record, [c.to_dict() for c in checks], skipped)


class _Paths:
    """Predictors as they run each side: ONNX Runtime alone with the tuned spec, or with a
    compiled engine in front of it."""

    def __init__(self, model: Path, tuned: TuningSpec, n_classes: int | None) -> None:
        self.model, self.tuned, self.n_classes = model, tuned, n_classes
        self.onnxruntime = Predictor(model, tuning=tuned)
        self.opened: dict[str, Any] = {}

    def get(self, candidate: Any) -> Any:
        if candidate.name not in self.opened:
            from onnxbridge.engines import AcceleratedPredictor

            self.opened[candidate.name] = AcceleratedPredictor(
                Predictor(self.model, tuning=self.tuned), candidate.as_accelerator(self.n_classes)
            )
        return self.opened[candidate.name]


def _time_size(paths: _Paths, usable: list[Any], X: Any, measure: Measure) -> list[Any]:
    """Time ONNX Runtime and every usable engine on ``X``, as ``Predictor`` runs them; record
    each engine's speed-up at this size. Returns the engines still usable."""
    calls: dict[str, Callable[[], Any]] = {"onnxruntime": _call(paths.onnxruntime, X)}
    settings = paths.onnxruntime.settings_for(len(X))
    kept = []
    for c, check in usable:
        try:
            calls[c.name] = _call(paths.get(c), X)
        except AcceleratorError as exc:  # a model Predictor cannot accelerate: not timed
            check.equivalent = False
            check.reason = f"Predictor cannot run it: {first_line(exc)}"
            continue
        kept.append((c, check))
    timings = measure_many(
        calls,
        repeat=measure.repeat,
        min_time=measure.min_time,
        progress=measure.progress,
        # OpenMP's threads (tl2cgen's) spin on after a call too.
        cooldown={
            **spin_cooldowns({"onnxruntime": settings}),
            **{c.name: SPIN_COOLDOWN for c, _ in kept if c.engine == "tl2cgen"},
        },
    )
    base = timings["onnxruntime"]
    for c, check in kept:
        check.speedups[len(X)] = base.median / timings[c.name].median
        check.timings[len(X)] = {
            "candidate": timings[c.name].to_dict(),
            "onnxruntime": base.to_dict(),
        }
    return kept


def _call(predictor: Any, X: Any) -> Callable[[], Any]:
    return lambda: predictor.predict(X, allow_missing=True)


def _record(candidate: Any, chosen: Any, min_rows: int) -> dict[str, Any]:
    """The accelerator entry of the stored spec."""
    return {
        "engine": candidate.engine,
        "threads": candidate.threads,
        "min_rows": min_rows,
        "speedup": chosen.speedups[max(chosen.speedups)],
        "verdict": "EQUIVALENT",
        "max_abs_diff": chosen.max_abs_diff,
        "probe_rows": chosen.probe_rows,
        "use": "on request only (score --accelerator --trust-native, or "
        "AcceleratedPredictor.load(predictor, trust_native=True)); "
        "ONNX Runtime stays the default engine",
    }
