"""Time a regime's candidates and pick its winner, step by step.

Every candidate runs through :class:`~onnxbridge.runtime._router.Router` with the spec it would
be stored as, so what is timed at N rows is what ``predict`` runs at N rows (trees in blocks or
dot products only on calls large enough, rows split only when there are enough of them). Calls
of the same size are timed with interleaved repeats (:func:`onnxbridge.bench.measure_many`),
with a pause after a candidate whose threads spin on, so that its spinning does not slow the
candidate timed next.

**Choosing**: the first candidate (the cheapest, see :mod:`onnxbridge.tune._candidates`) whose
score is within ``margin`` of the best wins. The score is the ratio to the step's fastest, and,
for the throughput regime, the worse of that and the ratio on 100-row calls (its
settings serve every call above the boundary, not only the large ones); step two's close
candidates are judged on larger calls too (:func:`large_rows_for`), by the worst of their
ratios.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from onnxbridge.bench._timing import Timing, measure_many, spin_cooldowns
from onnxbridge.runtime._router import Router
from onnxbridge.runtime._settings import SessionSettings, TuningSpec
from onnxbridge.tune._candidates import (
    LARGE_CONTENDERS,
    Feeds,
    RegimePlan,
    stage_one_candidates,
    stage_two_candidates,
)
from onnxbridge.tune._report import CandidateTiming, RegimeResult

__all__ = ["Measure", "pick_score", "tune_regime"]


@dataclass(frozen=True)
class Measure:
    """How candidates are timed and judged.

    Attributes:
        model: the model's bytes (read once for every router), or its path when it keeps over
            2 GiB in external data.
        latency_rows: the latency regime's rows per call: calls of more rows run on the
            throughput settings while the search runs.
        repeat: interleaved repeats per candidate.
        min_time: seconds one repeat lasts at least.
        margin: a candidate must be this much faster (relative) to beat a cheaper one.
        progress: called after each calibration and repeat.
    """

    model: bytes | str
    latency_rows: int
    repeat: int
    min_time: float
    margin: float
    progress: Callable[[], None]

    def router(self, settings: SessionSettings) -> Router:
        """The router a model tuned to ``settings`` runs its calls through. Both regimes hold
        the candidate: the regime it is timed for is the one the call's rows pick."""
        spec = TuningSpec(latency=settings, throughput=settings, latency_max_rows=self.latency_rows)
        return Router(self.model, spec, settings=settings)

    def time(self, routers: list[Router], feeds: Feeds, *, repeat_factor: int = 1) -> list[Timing]:
        """Each router's call on ``feeds`` as ``predict`` makes it (:meth:`Router.call`), timed
        with their repeats interleaved."""
        rows = len(next(iter(feeds.values())))
        calls = {str(i): _call(r, feeds) for i, r in enumerate(routers)}
        timings = measure_many(
            calls,
            repeat=self.repeat * repeat_factor,
            min_time=self.min_time,
            progress=self.progress,
            cooldown=spin_cooldowns({str(i): r.settings_for(rows) for i, r in enumerate(routers)}),
        )
        return [timings[str(i)] for i in range(len(routers))]


def tune_regime(plan: RegimePlan, measure: Measure, cores: int) -> RegimeResult:
    """Steps one and two of ``plan``'s regime: the winner and every candidate's timings."""
    stage1, chosen = _time_step(plan, measure, stage_one_candidates(cores), 1)
    winner = stage1[chosen].settings
    # Step two also re-times both defaults, so that every ratio reported compares timings of
    # one interleaved run (timings of separate runs on a shared machine differ widely).
    ort_default, ours = SessionSettings(), SessionSettings.onnxbridge_default()
    candidates = stage_two_candidates(winner, cores, plan.variants)
    candidates += [s for s in (ours, ort_default) if s not in candidates]
    stage2, chosen = _time_step(plan, measure, candidates, 2)
    timing_of = {c.settings: c.timing for c in stage2}
    return RegimeResult(
        regime=plan.regime,
        rows=plan.rows,
        candidates=stage1 + stage2,
        winner=stage2[chosen].settings,
        winner_timing=stage2[chosen].timing,
        ort_default=timing_of[ort_default],
        onnxbridge_default=timing_of[ours],
    )


def _time_step(
    plan: RegimePlan, measure: Measure, candidates: list[SessionSettings], step: int
) -> tuple[list[CandidateTiming], int]:
    """One step: every candidate's timings, and the index of the one it keeps."""
    routers = [measure.router(c) for c in candidates]
    main = measure.time(routers, plan.feeds)
    scores = _ratios(main)
    mid: list[Timing] | None = None
    if plan.mid_feeds is not None:
        mid = _time_shared(routers, measure, plan.mid_feeds)
        scores = [max(a, b) for a, b in zip(scores, _ratios(mid), strict=True)]
    large: dict[int, Timing] = {}
    if step == 2 and plan.large_feeds is not None:
        close = [i for i, x in enumerate(scores) if x <= min(scores) * LARGE_CONTENDERS]
        if len(close) > 1:
            timed = measure.time([routers[i] for i in close], plan.large_feeds)
            large = dict(zip(close, timed, strict=True))
            for i, ratio in zip(close, _ratios(timed), strict=True):
                scores[i] = max(scores[i], ratio)
    timings = [
        CandidateTiming(
            c,
            main[i],
            step,
            mid[i] if mid else None,
            large.get(i),
            plan.large_rows if i in large else 0,
        )
        for i, c in enumerate(candidates)
    ]
    return timings, pick_score(scores, measure.margin)


def _time_shared(routers: list[Router], measure: Measure, feeds: Feeds) -> list[Timing]:
    """Each router's timing on ``feeds``, one timing for routers that run such a call with the
    same settings: their differences there would be noise alone, enough to turn a pick."""
    rows = len(next(iter(feeds.values())))
    keys = [r.settings_for(rows) for r in routers]
    first = {key: i for i, key in reversed(list(enumerate(keys)))}
    distinct = list(dict.fromkeys(keys))
    timings = measure.time([routers[first[k]] for k in distinct], feeds)
    timed = dict(zip(distinct, timings, strict=True))
    return [timed[key] for key in keys]


def _call(router: Router, feeds: Feeds) -> Callable[[], object]:
    """The call ``predict`` makes on these feeds: one input's array as it is (the bound path
    takes small ones), several inputs as prepared feeds."""
    data = next(iter(feeds.values())) if len(feeds) == 1 else feeds
    return lambda: router.call(data, lambda _: feeds)


def _ratios(timings: list[Timing]) -> list[float]:
    best = min(t.median for t in timings)
    return [t.median / best for t in timings]


def pick_score(scores: list[float], margin: float) -> int:
    """Index of the first (cheapest) candidate whose score is within ``margin`` of the best."""
    best = min(scores)
    return next(i for i, score in enumerate(scores) if score <= best * (1.0 + margin))
