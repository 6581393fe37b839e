"""``onnxbridge tune``: measure ONNX Runtime session settings per regime and store the winners.

For each regime, ``latency`` (``latency_rows`` rows per call, 1 by default) and ``throughput``
(``throughput_rows``, 10 000 by default), candidate sessions are timed with interleaved repeats
(:func:`onnxbridge.bench.measure_many`) calling ``session.run`` on the same prepared feeds:

1. intra-op threads 1 … cores without spinning, then 2 … cores spinning within runs only, then
   spinning between runs too (sequential, all graph optimisations), plus ONNX Runtime's own
   defaults;
2. on the winner of step 1: parallel execution mode, and graph optimisation levels ``extended``,
   ``basic``, ``disabled``; for the throughput regime of a model with a large tree ensemble,
   also its trees in blocks (:mod:`onnxbridge.runtime.blocking`), alone and with the blocks
   run side by side (parallel mode, one thread each).

**Timing fairly**: a candidate whose threads spin on after its calls is followed by a pause
(``measure_many``'s ``cooldown``), so that its spinning does not slow the candidate timed next.

**Choosing** within a step: candidates are listed from the cheapest for a shared machine (fewer
threads, no spinning, sequential, all optimisations) to the dearest, and the first one whose median
is within ``margin`` (2 %) of the fastest wins — a difference smaller than that is noise here, and
the cheaper setting leaves the cores to other processes. The throughput regime's candidates are
also timed on calls of ``MID_ROWS`` (100) rows and judged by the worse of their two ratios to the
best: its settings serve every call above the boundary, not only the large ones (candidates
that run a 100-row call the same way, such as a blocked twin, share one timing of it). Step two's
close candidates are timed a third time, on calls ten times larger (at most 100 000 rows and
64 MiB of inputs), and judged by the worst of their three ratios: two settings tied at 10 000
rows can be 25 % apart at 100 000.

**The regime boundary** (both regimes tuned, with different winners): the two winners are timed
against each other at batch sizes between the two regimes (10, 100, 1 000 rows); the boundary
is the split that comes closest to the faster of the two at every size (:func:`boundary_limit`).
``Predictor`` then runs calls of at most ``latency_max_rows`` rows with the latency settings and
larger ones with the throughput settings (:mod:`onnxbridge.runtime.settings`).

The result, a :class:`~onnxbridge.runtime.settings.TuningSpec`, is written into the model's
``metadata_props`` (``onnxbridge.session``, JSON) and, for a bundle, into ``card.json``
(``tuning``; ``model.onnx`` is re-hashed), with the full measurements in ``reports/tune.json``.

With ``engines="all"``, installed accelerators (:mod:`onnxbridge.bench.accelerators`) are built,
checked and timed against the tuned throughput session; one is recorded only when it is both
equivalent and faster.
"""

from __future__ import annotations

import json
import math
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any

import numpy as np

from onnxbridge._files import atomic_write_path
from onnxbridge.bench.run import ProgressFn, machine_info
from onnxbridge.bench.source import BenchSource, open_source, tile_rows
from onnxbridge.bench.timing import SPIN_COOLDOWN, Timing, measure_many, spin_cooldowns
from onnxbridge.bundle import ONNX_NAME, now_iso
from onnxbridge.errors import AcceleratorError, DataError, OnnxModelError, first_line
from onnxbridge.runtime import Predictor
from onnxbridge.runtime.rewrites import blocked_model, linear_model
from onnxbridge.runtime.rewrites.tree_blocks import ONE_THREAD_TREE_BLOCK_NODES
from onnxbridge.runtime.router import (
    ROW_SPLIT_MIN_PART,
    open_ort_session,
    settings_for_rows,
    tree_block_nodes_for,
)
from onnxbridge.runtime.settings import (
    SESSION_KEY,
    SessionSettings,
    TuningSpec,
    available_cores,
)

__all__ = [
    "DEFAULT_LATENCY_MAX_ROWS",
    "REGIMES",
    "CandidateTiming",
    "RegimeResult",
    "TuneReport",
    "read_tuning",
    "store_tuning",
    "tune_model",
]

REGIMES = ("latency", "throughput", "both")
ENGINE_CHOICES = ("onnxruntime", "all")
# The boundary used when it was not measured (one regime tuned alone).
DEFAULT_LATENCY_MAX_ROWS = 100
_BOUNDARY_SIZES = (10, 100, 1_000)
# The boundary's calls are small and cheap to repeat, and their noise picks the regime of every
# call up to 1 000 rows: they take this many times the candidates' repeats.
_BOUNDARY_REPEAT_FACTOR = 3
# The throughput regime's candidates are also timed on calls of this many rows (see
# _tune_regime), when it lies between the two regimes' sizes.
MID_ROWS = 100
# Step two's close candidates are also timed on calls this many times the throughput size (at
# most LARGE_ROWS rows and LARGE_BYTES of inputs): the throughput settings serve every larger
# call too, and two settings tied at 10 000 rows can be 25 % apart at 100 000 (a 100-tree
# forest's rows split across the cores against two threads per operator, docs/benchmarks.md).
LARGE_FACTOR = 10
LARGE_ROWS = 100_000
LARGE_BYTES = 64 << 20
# "Close": a score within this factor of the best after the throughput and 100-row calls.
LARGE_CONTENDERS = 1.25
TUNE_FORMAT = "1"


@dataclass(frozen=True)
class CandidateTiming:
    """One candidate's timing in one regime, in one step (1 or 2) of the search."""

    settings: SessionSettings
    timing: Timing
    step: int = 1
    # The throughput regime's second size (MID_ROWS rows per call), when measured.
    mid: Timing | None = None
    # Its third size (``large_rows`` rows per call), for step two's close candidates.
    large: Timing | None = None
    large_rows: int = 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        out = {
            "step": self.step,
            "settings": self.settings.to_dict(),
            "label": self.settings.label(),
            "median": self.timing.median,
            "spread": self.timing.spread,
            "timing": self.timing.to_dict(),
        }
        if self.mid is not None:
            out["mid_rows"] = MID_ROWS
            out["mid_timing"] = self.mid.to_dict()
        if self.large is not None:
            out["large_rows"] = self.large_rows
            out["large_timing"] = self.large.to_dict()
        return out


@dataclass
class RegimeResult:
    """What one regime measured and chose.

    Attributes:
        regime: ``"latency"`` or ``"throughput"``.
        rows: rows per call measured.
        candidates: every candidate of every step, in measurement order.
        winner: the chosen settings.
        winner_timing: its timing (from the last step it was measured in).
        ort_default: ONNX Runtime's defaults in the same run.
        onnxbridge_default: ``Predictor``'s untuned defaults in the same run.
    """

    regime: str
    rows: int
    candidates: list[CandidateTiming]
    winner: SessionSettings
    winner_timing: Timing
    ort_default: Timing
    onnxbridge_default: Timing

    def passed_on(self, step: int) -> SessionSettings | None:
        """The settings step ``step`` kept: the winner after the last step, otherwise the
        candidate the next step started from (None when there is no such step)."""
        steps = sorted({c.step for c in self.candidates})
        if steps and step == steps[-1]:
            return self.winner
        later = [c for c in self.candidates if c.step == step + 1]
        return later[0].settings if later else None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "regime": self.regime,
            "rows": self.rows,
            "winner": self.winner.to_dict(),
            "winner_label": self.winner.label(),
            "winner_median": self.winner_timing.median,
            "speedup_vs_ort_default": self.ort_default.median / self.winner_timing.median,
            "speedup_vs_onnxbridge_default": (
                self.onnxbridge_default.median / self.winner_timing.median
            ),
            "candidates": [c.to_dict() for c in self.candidates],
        }


@dataclass
class TuneReport:
    """What ``onnxbridge tune`` measured and stored.

    Attributes:
        model: the ``.onnx`` file tuned.
        spec: the stored settings.
        regimes: the regimes measured.
        boundary: ``[{"rows": 10, "latency": s, "throughput": s}, ...]`` when measured.
        accelerators: one check per accelerator candidate (``engines="all"``).
        accelerators_skipped: engines not tried, and why.
        machine: cores, load average, versions.
    """

    model: str
    spec: TuningSpec
    regimes: list[RegimeResult]
    boundary: list[dict[str, Any]] = field(default_factory=list)
    accelerators: list[dict[str, Any]] = field(default_factory=list)
    accelerators_skipped: list[str] = field(default_factory=list)
    machine: dict[str, Any] = field(default_factory=dict)
    created_at: str = field(default_factory=now_iso)

    def _repr_html_(self) -> str:
        """The tables ``onnxbridge tune`` prints, as HTML (how a notebook shows the report)."""
        from onnxbridge.bench.html import tune_html

        return tune_html(self)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (what ``reports/tune.json`` holds)."""
        return {
            "format": TUNE_FORMAT,
            "created_at": self.created_at,
            "model": self.model,
            "spec": self.spec.to_dict(),
            "regimes": [r.to_dict() for r in self.regimes],
            "boundary": self.boundary,
            "accelerators": self.accelerators,
            "accelerators_skipped": self.accelerators_skipped,
            "machine": self.machine,
        }


def _session(path: Path, settings: SessionSettings) -> Any:
    return open_ort_session(path, settings)


def stage_one_candidates(cores: int) -> list[SessionSettings]:
    """Threads × spinning, cheapest first, then ONNX Runtime's defaults.

    Spinning means nothing to one thread (no pool to spin), so it is tried from two threads on:
    first spinning within runs only (threads sleep once a run returns), then spinning on between
    runs as well (ONNX Runtime's default, dearest for the other sessions on the cores).
    """
    candidates = [
        SessionSettings(intra_op_num_threads=n, allow_spinning=False) for n in range(1, cores + 1)
    ]
    for in_runs_only in (True, False):
        candidates += [
            SessionSettings(
                intra_op_num_threads=n, allow_spinning=True, spin_in_runs_only=in_runs_only
            )
            for n in range(2, cores + 1)
        ]
    return [*candidates, SessionSettings()]


def stage_two_candidates(
    winner: SessionSettings,
    cores: int,
    *,
    blocks: bool = False,
    split: bool = False,
    linear: bool = False,
) -> list[SessionSettings]:
    """The step-one winner, then its parallel-mode and lower-optimisation variants.

    With ``split`` (a throughput regime, several cores) also the winner with each large call's
    rows split across the cores (``row_split``: one thread per part; calls too small to split
    keep the winner's threads). With ``blocks`` (the model has a tree ensemble large enough to
    split, see :mod:`onnxbridge.runtime.blocking`) also the winner with its trees in blocks, and
    on several cores the blocks run side by side (parallel mode, one thread per block) and the
    blocked winner with the rows split across the cores. With ``linear`` (the model has a linear
    operator :mod:`onnxbridge.runtime.linear` rewrites) also the winner with those operators as
    dot products, and before it the same on one thread without spinning (the dot-product
    kernel gains little from a second thread; listed first, it wins a tie within the margin).
    ``tune`` appends ``Predictor``'s and ONNX Runtime's defaults when they are not among these.
    """
    variants = [winner]
    if cores > 1:
        variants.append(replace(winner, execution_mode="parallel", inter_op_num_threads=cores))
    for level in ("extended", "basic", "disabled"):
        variants.append(replace(winner, graph_optimization_level=level))
    if split and cores > 1:
        # Large calls split across the cores (one thread per part); smaller ones keep the
        # winner's own threads.
        variants.append(replace(winner, row_split=cores))
    if blocks:
        # Each with blocks of the size for its threads per operator (tree_block_nodes_for).
        blocked = [winner]
        if cores > 1:
            blocked.append(
                replace(
                    winner,
                    intra_op_num_threads=1,
                    execution_mode="parallel",
                    inter_op_num_threads=cores,
                )
            )
            blocked.append(replace(winner, row_split=cores))
        variants += [replace(s, tree_block_nodes=tree_block_nodes_for(s)) for s in blocked]
    if linear:
        # One thread first: the cheaper of the two wins when they are within the margin.
        if winner.intra_op_num_threads != 1:
            variants.append(
                replace(
                    winner,
                    linear_gemv=True,
                    intra_op_num_threads=1,
                    allow_spinning=False,
                    spin_in_runs_only=False,
                    execution_mode="sequential",
                    inter_op_num_threads=0,
                    row_split=0,
                )
            )
        variants.append(replace(winner, linear_gemv=True))
    return variants


def _tune_regime(
    regime: str,
    path: Path,
    feeds: dict[str, np.ndarray],
    rows: int,
    *,
    cores: int,
    repeat: int,
    min_time: float,
    margin: float,
    progress: Any,
    blocks: bool = False,
    linear: bool = False,
    mid_feeds: dict[str, np.ndarray] | None = None,
    large_feeds: dict[str, np.ndarray] | None = None,
) -> RegimeResult:
    """Steps one and two for one regime.

    With ``mid_feeds`` (the throughput regime: a call of :data:`MID_ROWS` rows) every candidate
    is also timed on those, and judged by the worse of its two ratios to the best: the
    throughput settings serve every call above the boundary, and a setting that only shines at
    10 000 rows (spinning within runs, say, which wakes its threads on every call) can be twice
    as slow at 100. With ``large_feeds`` (a call of :func:`large_rows_for` rows) step two's close
    candidates (a score within :data:`LARGE_CONTENDERS` of the best) are timed on those too and
    judged by the worst of their three ratios; the others keep their score, already out of
    reach.
    """
    measured: list[CandidateTiming] = []
    large_rows = len(next(iter(large_feeds.values()))) if large_feeds else 0

    def time_all(sessions: list[Any], candidates: list[SessionSettings], on: Any) -> list[Timing]:
        calls = {str(i): (lambda s=s: s.run(None, on)) for i, s in enumerate(sessions)}
        timings = measure_many(
            calls,
            repeat=repeat,
            min_time=min_time,
            progress=progress,
            cooldown=spin_cooldowns(dict(zip(calls, candidates, strict=True))),
        )
        return [timings[str(i)] for i in range(len(candidates))]

    def run_stage(candidates: list[SessionSettings], step: int) -> tuple[list[Any], int]:
        sessions = [_session(path, s) for s in candidates]
        main = time_all(sessions, candidates, feeds)
        mid = None
        if mid_feeds is not None:
            # Candidates that run a 100-row call the same way share one timing of it: their
            # differences there would be noise alone (measured at up to 17 %, enough to turn
            # the pick of step two).
            runs_as = [_runs_as(c, MID_ROWS) for c in candidates]
            opened = {c: s for c, s in zip(candidates, sessions, strict=True)}
            distinct = list(dict.fromkeys(runs_as))
            small = [opened.get(r) or _session(path, r) for r in distinct]
            timed = dict(zip(distinct, time_all(small, distinct, mid_feeds), strict=True))
            mid = [timed[r] for r in runs_as]
        scores = _ratios(main)
        if mid is not None:
            scores = [max(a, b) for a, b in zip(scores, _ratios(mid), strict=True)]
        large: dict[int, Timing] = {}
        if step == 2 and large_feeds is not None:
            close = [i for i, x in enumerate(scores) if x <= min(scores) * LARGE_CONTENDERS]
            if len(close) > 1:
                on_large = [settings_for_rows(candidates[i], large_rows) for i in close]
                timed = time_all(
                    [
                        sessions[i] if c == candidates[i] else _session(path, c)
                        for i, c in zip(close, on_large, strict=True)
                    ],
                    on_large,
                    large_feeds,
                )
                large = dict(zip(close, timed, strict=True))
                for i, ratio in zip(close, _ratios(timed), strict=True):
                    scores[i] = max(scores[i], ratio)
        pairs = list(zip(candidates, main, strict=True))
        for i, (settings, timing) in enumerate(pairs):
            measured.append(
                CandidateTiming(
                    settings,
                    timing,
                    step,
                    mid[i] if mid else None,
                    large.get(i),
                    large_rows if i in large else 0,
                )
            )
        return pairs, _pick_score(scores, margin)

    stage1, chosen = run_stage(stage_one_candidates(cores), 1)
    winner, _ = stage1[chosen]
    # Step two also re-times both defaults, so that every ratio reported compares timings of
    # one interleaved run (timings of separate runs on a shared machine differ by up to 3×).
    ort_default, ours = SessionSettings(), SessionSettings.onnxbridge_default()
    stage2_candidates = stage_two_candidates(
        winner, cores, blocks=blocks, split=regime == "throughput", linear=linear
    )
    stage2_candidates += [s for s in (ours, ort_default) if s not in stage2_candidates]
    stage2, chosen = run_stage(stage2_candidates, 2)
    winner, winner_timing = stage2[chosen]
    timing_of = dict(stage2)
    return RegimeResult(
        regime=regime,
        rows=rows,
        candidates=measured,
        winner=winner,
        winner_timing=winner_timing,
        ort_default=timing_of[ort_default],
        onnxbridge_default=timing_of[ours],
    )


def _runs_as(settings: SessionSettings, rows: int) -> SessionSettings:
    """The settings a call of ``rows`` rows really runs with: a Predictor runs calls too small
    for trees in blocks (or dot products) on the plain twin (RegimeSessions), and a row split
    runs calls too small to split on the candidate's own threads (RowSplitSession)."""
    settings = settings_for_rows(settings, rows)
    if settings.row_split > 1 and rows < 2 * ROW_SPLIT_MIN_PART:
        settings = replace(settings, row_split=0)
    return settings


def _ratios(timings: list[Timing]) -> list[float]:
    best = min(t.median for t in timings)
    return [t.median / best for t in timings]


def _pick_score(scores: list[float], margin: float) -> int:
    """Index of the first (cheapest) candidate whose score is within ``margin`` of the best."""
    best = min(scores)
    return next(i for i, score in enumerate(scores) if score <= best * (1.0 + margin))


def large_rows_for(throughput_rows: int, row_bytes: float) -> int:
    """Rows of the throughput regime's third size (0: none larger than ``throughput_rows``)."""
    rows = min(throughput_rows * LARGE_FACTOR, LARGE_ROWS, int(LARGE_BYTES // max(row_bytes, 1.0)))
    return rows if rows > throughput_rows else 0


def _regime_steps(
    cores: int,
    repeat: int,
    blocks: bool = False,
    split: bool = False,
    mid: bool = False,
    linear: bool = False,
    large: bool = False,
) -> int:
    """Progress steps of one regime, at most (step two's close candidates are not known yet)."""
    stage1 = len(stage_one_candidates(cores))
    # At most: the winner's variants and the two defaults.
    variants = stage_two_candidates(
        SessionSettings(), cores, blocks=blocks, split=split, linear=linear
    )
    stage2 = len(variants) + 2
    sizes = 2 if mid else 1
    return ((stage1 + stage2) * sizes + (stage2 if large else 0)) * (repeat + 1)


def read_tuning(path: str | Path) -> TuningSpec | None:
    """The tuned settings stored in a ``.onnx`` file, or None.

    Raises:
        SessionSettingsError: the entry is there but damaged.
    """
    predictor = Predictor(path)
    return TuningSpec.find_in_props(dict(predictor.session.get_modelmeta().custom_metadata_map))


def store_tuning(source: BenchSource, spec: TuningSpec, report: dict[str, Any] | None) -> None:
    """Write ``spec`` into the model's metadata (and the bundle's card), atomically.

    The model file is rewritten to a temporary name and renamed into place; for a bundle the
    card then records the new hash of ``model.onnx`` and the spec under ``tuning``.
    """
    import onnx

    model = onnx.load(str(source.onnx_path))
    keep = [p for p in model.metadata_props if p.key != SESSION_KEY]
    del model.metadata_props[:]
    for prop in keep:
        model.metadata_props.add(key=prop.key, value=prop.value)
    model.metadata_props.add(key=SESSION_KEY, value=spec.to_json())
    with atomic_write_path(source.onnx_path) as tmp:
        tmp.write_bytes(model.SerializeToString())
    if report is not None:
        source.reports_dir.mkdir(parents=True, exist_ok=True)
        with atomic_write_path(source.reports_dir / "tune.json") as tmp:
            tmp.write_text(json.dumps(report, indent=2) + "\n")
    bundle = source.bundle
    if bundle is not None:
        bundle.record_file(ONNX_NAME)
        bundle.card["tuning"] = {
            **spec.to_dict(),
            "report": "reports/tune.json",
            "tuned_at": report.get("created_at") if report else now_iso(),
        }
        bundle.save_card()


def _boundary(
    path: Path,
    source: BenchSource,
    latency: SessionSettings,
    throughput: SessionSettings,
    low: int,
    high: int,
    *,
    repeat: int,
    min_time: float,
    progress: Any,
) -> tuple[int, list[dict[str, Any]]]:
    sizes = [s for s in _BOUNDARY_SIZES if low < s < high]
    if not sizes:
        return low, []
    predictor = Predictor(path)
    opened: dict[SessionSettings, Any] = {}
    rows: list[dict[str, Any]] = []
    for size in sizes:
        feeds = predictor.prepare(tile_rows(source.rows, size), allow_missing=True)
        # Each regime on the session a Predictor runs a call of this size on: trees in blocks
        # serve only calls of blocks_from_rows rows and more, smaller ones the graph as it is.
        sessions = {}
        for name, regime_settings in (("latency", latency), ("throughput", throughput)):
            settings = settings_for_rows(regime_settings, size)
            if settings not in opened:
                opened[settings] = _session(path, settings)
            sessions[name] = opened[settings]
        calls = {k: (lambda s=s, f=feeds: s.run(None, f)) for k, s in sessions.items()}
        timings = measure_many(
            calls,
            repeat=repeat * _BOUNDARY_REPEAT_FACTOR,
            min_time=min_time,
            progress=progress,
            cooldown=spin_cooldowns({"latency": latency, "throughput": throughput}),
        )
        lat, thr = timings["latency"].median, timings["throughput"].median
        rows.append({"rows": size, "latency": lat, "throughput": thr})
    return boundary_limit(low, rows), rows


def boundary_limit(low: int, rows: list[dict[str, Any]]) -> int:
    """``latency_max_rows`` from the boundary's timings (``[{"rows", "latency", "throughput"}]``
    by size): of the limits ``low`` and each measured size, the one whose split — latency
    settings up to it, throughput settings above — comes closest to the faster regime at every
    size: the smallest worst ratio, then the smallest sum of ratios, then the smallest limit.

    One noisy size no longer cuts the latency regime short: 10 rows 13.7 against 12.5 µs, 100
    rows 33.3 against 36.7, 1 000 rows 165 against 176 (the reference forest, one ``tune`` run)
    gives 1 000, where stopping at the first loss gave 1 (100-row calls 1.10× slower).
    """
    best: tuple[float, float] | None = None
    limit = low
    for candidate in [low, *(r["rows"] for r in rows)]:
        ratios = [
            (r["latency"] if r["rows"] <= candidate else r["throughput"])
            / min(r["latency"], r["throughput"])
            for r in rows
        ]
        key = (max(ratios, default=1.0), sum(ratios))
        if best is None or key < best:
            best, limit = key, candidate
    return limit


def tune_model(
    target: str | Path,
    *,
    regime: str = "both",
    engines: str = "onnxruntime",
    data: str | Path | None = None,
    latency_rows: int = 1,
    throughput_rows: int = 10_000,
    repeat: int = 7,
    min_time: float = 0.05,
    margin: float = 0.02,
    write: bool = True,
    progress: ProgressFn | None = None,
    trusted: Sequence[str] = (),
) -> TuneReport:
    """Tune a bundle's (or a ``.onnx`` file's) session settings and store them in the model.

    Args:
        target: a bundle folder or a ``.onnx`` file.
        regime: ``"latency"``, ``"throughput"`` or ``"both"``. Tuning one regime keeps the
            other's stored settings (or ``Predictor``'s defaults when there are none).
        engines: ``"onnxruntime"``, or ``"all"`` to also try installed accelerators (bundles
            with ``model.skops`` only).
        data: rows to use instead of the holdout.
        latency_rows: rows per call in the latency regime.
        throughput_rows: rows per call in the throughput regime.
        repeat: interleaved repeats per candidate.
        min_time: seconds one repeat lasts at least.
        margin: a candidate must be this much faster (relative) to beat a cheaper one.
        write: store the result (model metadata, card, ``reports/tune.json``).
        progress: called as ``progress(done, total, label)``.
        trusted: extra names to trust in the bundle's ``model.skops`` for this run (see
            :func:`onnxbridge.bundle.load_estimator`); never stored.

    Raises:
        DataError: bad regime, engines, row counts, repeat or margin.
        BundleError, OnnxModelError: a bad bundle or model.
    """
    if regime not in REGIMES:
        raise DataError(
            f"regime={regime!r} is not one of {', '.join(REGIMES)}", arguments=("regime",)
        )
    if engines not in ENGINE_CHOICES:
        raise DataError(
            f"engines={engines!r} is not one of {', '.join(ENGINE_CHOICES)}",
            arguments=("engines",),
        )
    for name, value in (("latency_rows", latency_rows), ("throughput_rows", throughput_rows)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise DataError(
                f"{name}={value!r} is not allowed: it must be a whole number >= 1",
                arguments=(name,),
            )
    if latency_rows >= throughput_rows:
        raise DataError(
            f"latency_rows={latency_rows} must be smaller than throughput_rows={throughput_rows}",
            arguments=("latency_rows", "throughput_rows"),
        )
    if repeat < 1:
        raise DataError(
            f"repeat={repeat} is not allowed: it must be at least 1", arguments=("repeat",)
        )
    if not (math.isfinite(margin) and 0 <= margin < 1):
        raise DataError(
            f"margin={margin} is not allowed: it must be between 0 and 1", arguments=("margin",)
        )
    if not (math.isfinite(min_time) and min_time > 0):
        raise DataError(
            f"min_time={min_time} is not allowed: it must be a number of seconds > 0",
            arguments=("min_time",),
        )
    source = open_source(target, data=data, trusted=trusted)
    if engines == "all" and not source.has_estimator:
        raise DataError(
            "engines='all' builds accelerators from the source model, so it needs a bundle "
            f"with model.skops; {str(target)!r} has none (use engines='onnxruntime')",
            arguments=("engines",),
        )
    # Loaded (and so trust-checked) before any timing: a refused model wastes no minutes.
    estimator = source.load_estimator() if engines == "all" else None
    cores = available_cores()
    previous = read_tuning(source.onnx_path)
    wanted = ("latency", "throughput") if regime == "both" else (regime,)
    model_bytes = source.onnx_path.read_bytes()
    blockable = blocked_model(model_bytes, ONE_THREAD_TREE_BLOCK_NODES) is not None
    # Linear operators the dot-product rewrite serves (runtime/linear.py): tried on batches.
    linear = linear_model(model_bytes) is not None
    mid = latency_rows < MID_ROWS < throughput_rows
    predictor = Predictor(source.onnx_path)
    feeds = {
        name: predictor.prepare(tile_rows(source.rows, rows), allow_missing=True)
        for name, rows in (("latency", latency_rows), ("throughput", throughput_rows))
        if name in wanted
    }
    large = 0
    if "throughput" in feeds:
        row_bytes = sum(a.nbytes for a in feeds["throughput"].values()) / throughput_rows
        large = large_rows_for(throughput_rows, row_bytes)
    steps = {
        w: _regime_steps(
            cores,
            repeat,
            blocks=blockable and w == "throughput",
            linear=linear and w == "throughput",
            split=w == "throughput",
            mid=mid and w == "throughput",
            large=bool(large) and w == "throughput",
        )
        for w in wanted
    }
    total = sum(steps.values())
    if regime == "both":
        total += len(_BOUNDARY_SIZES) * 2 * (repeat * _BOUNDARY_REPEAT_FACTOR + 1)
    if engines == "all":
        total += 2 * cores * 2 * (repeat + 1)
    done = 0

    def step_for(label: str) -> Any:
        def step() -> None:
            nonlocal done
            done += 1
            if progress is not None:
                progress(min(done, total), total, label)

        return step

    results: dict[str, RegimeResult] = {}
    for name in wanted:
        rows = latency_rows if name == "latency" else throughput_rows
        regime_end = done + steps[name]
        results[name] = _tune_regime(
            name,
            source.onnx_path,
            feeds[name],
            rows,
            cores=cores,
            repeat=repeat,
            min_time=min_time,
            margin=margin,
            progress=step_for(f"{name}: {rows} rows"),
            # One row gains nothing from blocks (docs/benchmarks.md): tried on batches only.
            blocks=blockable and name == "throughput",
            linear=linear and name == "throughput",
            mid_feeds=(
                predictor.prepare(tile_rows(source.rows, MID_ROWS), allow_missing=True)
                if mid and name == "throughput"
                else None
            ),
            large_feeds=(
                predictor.prepare(tile_rows(source.rows, large), allow_missing=True)
                if large and name == "throughput"
                else None
            ),
        )
        done = regime_end  # the steps counted for candidates step two did not time again
    fallback = SessionSettings.onnxbridge_default()
    latency = (
        results["latency"].winner
        if "latency" in results
        else (previous.latency if previous else fallback)
    )
    throughput = (
        results["throughput"].winner
        if "throughput" in results
        else (previous.throughput if previous else fallback)
    )
    boundary: list[dict[str, Any]] = []
    if regime == "both" and latency != throughput:
        latency_max_rows, boundary = _boundary(
            source.onnx_path,
            source,
            latency,
            throughput,
            latency_rows,
            throughput_rows,
            repeat=repeat,
            min_time=min_time,
            progress=step_for("boundary"),
        )
    elif regime == "both":
        latency_max_rows = throughput_rows  # the same settings: the boundary does not matter
    else:
        latency_max_rows = previous.latency_max_rows if previous else DEFAULT_LATENCY_MAX_ROWS
    checks: list[dict[str, Any]] = []
    skipped: list[str] = []
    accelerator: dict[str, Any] | None = previous.accelerator if previous else None
    tmpdir = Path(tempfile.mkdtemp(prefix="onnxbridge-tune-"))
    try:
        if engines == "all":
            accelerator, checks, skipped = _tune_accelerators(
                source,
                estimator,
                TuningSpec(latency, throughput, latency_max_rows),
                latency_rows,
                throughput_rows,
                tmpdir,
                repeat=repeat,
                min_time=min_time,
                progress=step_for("accelerators"),
                write=write,
            )
        spec = TuningSpec(
            latency=latency,
            throughput=throughput,
            latency_max_rows=latency_max_rows,
            accelerator=accelerator,
            measured={
                "cores": cores,
                "onnxruntime": _version("onnxruntime"),
                "regimes": list(results),
                "latency_rows": latency_rows,
                "throughput_rows": throughput_rows,
                "tuned_at": now_iso(),
            },
        )
        report = TuneReport(
            model=str(source.onnx_path),
            spec=spec,
            regimes=list(results.values()),
            boundary=boundary,
            accelerators=checks,
            accelerators_skipped=skipped,
            machine=machine_info(),
        )
        if write:
            store_tuning(source, spec, report.to_dict())
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
    return report


def _version(name: str) -> str | None:
    try:
        return importlib_metadata.version(name)
    except importlib_metadata.PackageNotFoundError:
        return None


def _tune_accelerators(
    source: BenchSource,
    estimator: Any,
    tuned: TuningSpec,
    latency_rows: int,
    throughput_rows: int,
    workdir: Path,
    *,
    repeat: int,
    min_time: float,
    progress: Any,
    write: bool,
) -> tuple[dict[str, Any] | None, list[dict[str, Any]], list[str]]:
    from onnxbridge.bench.accelerators import (
        AcceleratorCandidate,
        build_candidates,
        check_candidate,
        choose_accelerator,
        min_rows_of,
        probe_rows,
    )

    predictor = Predictor(source.onnx_path)
    classes = predictor.classes
    n_classes = len(classes) if classes is not None else None
    threads = sorted({1, available_cores()})
    double = any(i.type == "tensor(double)" for i in predictor.inputs)
    candidates, skipped = build_candidates(
        estimator,
        workdir,
        n_classes=n_classes,
        threads=threads,
        precision="double" if double else "float",
    )
    if not candidates:
        return None, [], skipped
    metadata = predictor.metadata
    probes = probe_rows(
        source.rows,
        schema=metadata.features if metadata is not None else None,
        estimator=estimator,
        accepts_missing=metadata is not None and metadata.accepts_missing_everywhere(),
    )
    checks = [check_candidate(c, predictor, probes) for c in candidates]
    # Both sides are timed as Predictor runs them (its bound path on small calls, labels from the
    # probabilities on the accelerator): at every size from one row, with the settings the tuned
    # Predictor has for that size. The accelerator then serves every call from the smallest size
    # from which it stays faster (min_rows_of) — one row, for compiled code that beats ONNX
    # Runtime even there.
    sizes = sorted(
        {min(n, throughput_rows) for n in (latency_rows, MID_ROWS, 1_000, throughput_rows)}
    )
    paths: dict[tuple[SessionSettings, str], Predictor] = {}

    def path_for(settings: SessionSettings, candidate: AcceleratorCandidate | None) -> Predictor:
        key = (settings, candidate.name if candidate is not None else "")
        if key not in paths:
            paths[key] = Predictor(
                source.onnx_path,
                settings=settings,
                accelerator=(
                    candidate.as_accelerator(n_classes) if candidate is not None else False
                ),
            )
        return paths[key]

    usable = list(zip(candidates, checks, strict=True))
    for size in sizes:
        settings = tuned.latency if size <= tuned.latency_max_rows else tuned.throughput
        frame = tile_rows(source.rows, size)
        X = next(iter(predictor.prepare(frame, allow_missing=True).values()))
        plain = path_for(settings, None)
        calls: dict[str, Any] = {
            "onnxruntime": lambda p=plain, X=X: p.predict(X, allow_missing=True)
        }
        for c, check in list(usable):
            try:
                accelerated = path_for(settings, c)
            except AcceleratorError as exc:  # a model Predictor cannot accelerate: not timed
                check.equivalent = False
                check.reason = f"Predictor cannot run it: {first_line(exc)}"
                usable.remove((c, check))
                continue
            calls[c.name] = lambda p=accelerated, X=X: p.predict(X, allow_missing=True)
        timings = measure_many(
            calls,
            repeat=repeat,
            min_time=min_time,
            progress=progress,
            # OpenMP's threads (tl2cgen's) spin on after a call too.
            cooldown={
                **spin_cooldowns({"onnxruntime": settings}),
                **{c.name: SPIN_COOLDOWN for c, _ in usable if c.engine == "tl2cgen"},
            },
        )
        for c, check in usable:
            check.speedups[size] = timings["onnxruntime"].median / timings[c.name].median
            check.timings[size] = {
                "candidate": timings[c.name].to_dict(),
                "onnxruntime": timings["onnxruntime"].to_dict(),
            }
    chosen = choose_accelerator(checks)
    record: dict[str, Any] | None = None
    if chosen is not None:
        candidate = next(c for c in candidates if c.name == chosen.name)
        record = {
            "engine": candidate.engine,
            "threads": candidate.threads,
            "min_rows": min_rows_of(chosen),
            "speedup": chosen.speedups[max(chosen.speedups)],
            "verdict": "EQUIVALENT",
            "max_abs_diff": chosen.max_abs_diff,
            "probe_rows": chosen.probe_rows,
            "use": "on request only (Predictor(accelerator=True, trust_native=True), "
            "score --accelerator --trust-native); ONNX Runtime stays the default engine",
        }
        if write and candidate.artifact is not None and source.bundle is not None:
            record["library"] = _keep_artifact(source, candidate.artifact)
            if candidate.model_text is not None:
                record["model_text"] = _keep_artifact(source, candidate.model_text)
    return record, [c.to_dict() for c in checks], skipped


def _keep_artifact(source: BenchSource, artifact: Path) -> str:
    """Copy an accelerator's file (its library, lleaves' model text) into
    ``BUNDLE/accelerators/`` and record its hash."""
    bundle = source.bundle
    if bundle is None:  # pragma: no cover - callers pass bundles only
        raise OnnxModelError("accelerators are kept in bundles only")
    name = f"accelerators/{artifact.name}"
    target = bundle.path / name
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        with atomic_write_path(target) as tmp:
            shutil.copyfile(artifact, tmp)
    except OSError as exc:
        raise OSError(
            exc.errno, f"cannot keep the accelerator: {first_line(exc)}", str(target)
        ) from exc
    bundle.record_file(name)
    return name
