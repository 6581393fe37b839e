"""Validate an ONNX model against its source: probe sets × runtime pairs × outputs → a verdict.

:func:`validate_model` works on any ``.onnx`` file and fitted estimator; :func:`validate_bundle`
runs it on a bundle and writes ``reports/validation.json`` and ``reports/validation.html``.
Every probe set (:mod:`onnxbridge.validate._probes`) is scored by every runtime
(:mod:`onnxbridge.validate._runtimes`) and compared pairwise; the verdict is EQUIVALENT only when
every pair agrees on every probe set. A DIVERGENT verdict comes with diagnoses
(:mod:`onnxbridge.validate._diagnosis`).
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from onnxbridge._meta import role_parts
from onnxbridge._values import misfits
from onnxbridge.bundle import ONNX_NAME, Bundle
from onnxbridge.data import FeatureSchema, blank_column, read_table
from onnxbridge.errors import BadRowError, DataError, InferenceError, OnnxbridgeError, first_line
from onnxbridge.runtime import Predictor
from onnxbridge.validate._budget import (
    DEFAULT_BUDGET_S,
    DEFAULT_MEMORY_BOUND,
    MIN_SAMPLE_ROWS,
    Budget,
    batch_rows,
    graph_width,
    next_batch,
    permutation,
)
from onnxbridge.validate._compare import (
    DEFAULT_ATOL,
    DEFAULT_RTOL,
    DEFAULT_TOLERANCES,
    DIVERGENT,
    EQUIVALENT,
    STATUS_BUCKETS,
    Tolerance,
    compare_output,
    role_tolerance,
)
from onnxbridge.validate._probes import PROBE_NAMES, ProbeSet, ProbeSpec, build_probe_sets
from onnxbridge.validate._report import PairComparison, ProbeSetResult, ValidationReport
from onnxbridge.validate._runtimes import (
    ONNXRUNTIME,
    REFERENCE,
    RUNTIME_NAMES,
    SKLEARN,
    OnnxRuntime,
    ReferenceRuntime,
    SklearnRuntime,
)

__all__ = [
    "ProbeRun",
    "compare_predictions",
    "resolve_tolerances",
    "validate_bundle",
    "validate_model",
]

WORST_ROWS = 5
MISSING_POLICIES = ("auto", "gate", "warn")


@dataclass
class ProbeRun:
    """A probe set as it was run: the result plus the row-level evidence diagnosis needs.

    Attributes:
        probe: the probe set.
        result: its report entry.
        frame: the rows compared (refused rows removed).
        meta: per-row detail aligned with ``frame``.
        bad: pair name → ``[N]`` bool, rows where that pair disagrees.
        outputs: runtime → role → array, on ``frame``.
    """

    probe: ProbeSet
    result: ProbeSetResult
    frame: pd.DataFrame
    meta: list[dict[str, Any]] = field(default_factory=list)
    bad: dict[str, np.ndarray] = field(default_factory=dict)
    outputs: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)
    diffs: np.ndarray = field(default_factory=lambda: np.zeros(0))


_MAX_DIFF_SAMPLE = 20000


def _numeric_diffs(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> np.ndarray:
    parts = []
    for role, values in a.items():
        if role_parts(role)[0] == "label" or role not in b:
            continue
        x = np.asarray(values, dtype=np.float64).reshape(-1)
        y = np.asarray(b[role], dtype=np.float64).reshape(-1)
        if x.shape != y.shape:
            continue
        with np.errstate(invalid="ignore", over="ignore"):
            d = np.abs(x - y)
        d[(np.isnan(x) & np.isnan(y)) | (x == y)] = 0.0
        parts.append(d)
    joined = np.concatenate(parts) if parts else np.zeros(0)
    return joined[:_MAX_DIFF_SAMPLE]


def resolve_tolerances(
    atol: float | None = None,
    rtol: float | None = None,
    per_role: Mapping[str, Tolerance] | None = None,
) -> dict[str, Tolerance]:
    """Role → tolerance: the defaults, then ``atol`` / ``rtol`` for every role, then per role.

    Raises:
        DataError: a bad tolerance or an unknown role.
    """
    resolved: dict[str, Tolerance] = {}
    for role, default in DEFAULT_TOLERANCES.items():
        resolved[role] = Tolerance(
            default.atol if atol is None else float(atol),
            default.rtol if rtol is None else float(rtol),
        )
    for role, tolerance in (per_role or {}).items():
        if role not in DEFAULT_TOLERANCES:
            raise DataError(
                f"no tolerance for output role {role!r}: labels are compared exactly and the "
                f"numeric roles are {', '.join(DEFAULT_TOLERANCES)}"
            )
        resolved[role] = tolerance
    return resolved


def _value(v: Any) -> Any:
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and not np.isfinite(v):
        return str(v)
    return v


def _row_values(array: np.ndarray, row: int) -> Any:
    value = np.asarray(array)[row]
    if np.ndim(value) == 0:
        return _value(value)
    return [_value(v) for v in np.asarray(value).reshape(-1)]


def _compare_pair(
    a: str,
    b: str,
    out_a: dict[str, np.ndarray],
    out_b: dict[str, np.ndarray],
    tolerances: Mapping[str, Tolerance],
    frame: pd.DataFrame,
    worst: int,
) -> tuple[PairComparison, np.ndarray]:
    pair = PairComparison(a=a, b=b)
    bad_rows = np.zeros(len(frame), dtype=bool)
    for role in out_a:
        if role not in out_b:
            continue
        comparison, row_score = compare_output(
            role, out_a[role], out_b[role], role_tolerance(tolerances, role)
        )
        mismatched = row_score > 0
        if mismatched.any():
            bad_rows |= mismatched
            order = np.argsort(-row_score, kind="stable")[: min(worst, int(mismatched.sum()))]
            comparison.worst_rows = [
                {
                    "row": int(i),
                    "inputs": {str(k): _value(v) for k, v in frame.iloc[int(i)].items()},
                    "a": _row_values(out_a[role], int(i)),
                    "b": _row_values(out_b[role], int(i)),
                    "abs_diff": None
                    if role_parts(role)[0] == "label"
                    else _value(float(row_score[i])),
                }
                for i in order
            ]
        pair.outputs.append(comparison)
    pair.ok = all(c.ok for c in pair.outputs)
    pair.status = max((c.status for c in pair.outputs), key=STATUS_BUCKETS.index, default="OK")
    return pair, bad_rows


def _take(outputs: dict[str, np.ndarray], keep: np.ndarray) -> dict[str, np.ndarray]:
    return {role: np.asarray(v)[keep] for role, v in outputs.items()}


def _one_row_at_a_time(runtime: Any, frame: pd.DataFrame) -> dict[str, np.ndarray]:
    parts = [runtime.run(frame.iloc[i : i + 1]) for i in range(len(frame))]
    return {role: np.concatenate([np.asarray(p[role]) for p in parts]) for role in parts[0]}


def _cause(result: ProbeSetResult) -> str | None:
    failed = {p.name for p in result.pairs if not p.ok}
    if not failed:
        return None
    sk_ort = f"{SKLEARN}~{ONNXRUNTIME}" in failed
    sk_ref = f"{SKLEARN}~{REFERENCE}" in failed
    ort_ref = f"{ONNXRUNTIME}~{REFERENCE}" in failed
    have_ref = any(p.b == REFERENCE for p in result.pairs)
    if any("[1-row]" in name for name in failed):
        return "batch"
    if ort_ref:
        if sk_ort and sk_ref:
            return "conversion+runtime"
        if sk_ort:
            return ONNXRUNTIME
        if sk_ref:
            return REFERENCE
        return "runtime"
    if sk_ort or sk_ref or not have_ref:
        return "conversion"
    return "runtime"


@dataclass
class _Scoring:
    """How a probe set is scored: batch size (memory bound), time budget and sample seed."""

    rows_per_batch: int | None = None
    budget: Budget | None = None
    index: int = 0
    seed: int = 0


def _seconds(call: Any) -> float:
    """Seconds ``call()`` takes (0 when it raises: its error shows when the set is scored)."""
    started = time.perf_counter()
    try:
        call()
    except Exception:
        return 0.0
    return time.perf_counter() - started


@dataclass
class _Scored:
    """A probe set's rows as the runtimes scored them (in the set's order)."""

    positions: np.ndarray | None  # the rows scored when the budget made it a sample
    outputs: dict[str, dict[str, np.ndarray]]  # scikit-learn's: of the rows it scored only
    errors: dict[str, str]
    refused: InferenceError | None  # scikit-learn raised on some rows
    kept: np.ndarray | None = None  # with ``refused``: the scored rows scikit-learn scored


def _bisect(
    sklearn: SklearnRuntime, chunk: pd.DataFrame, like: dict[str, np.ndarray] | None
) -> tuple[np.ndarray, list[dict[str, np.ndarray]], InferenceError | None]:
    """scikit-learn on ``chunk``; when it refuses, on each half, recursively (a half it scores
    is kept whole), so a batch with ``r`` refused rows of ``n`` takes ``O(r log n)`` calls.

    Returns:
        Which rows it scored, its outputs of those rows in order, and its first refusal.
    """
    try:
        return np.ones(len(chunk), dtype=bool), [sklearn.run(chunk, like=like)], None
    except InferenceError as exc:
        if len(chunk) <= 1:
            return np.zeros(len(chunk), dtype=bool), [], exc
        half = len(chunk) // 2
        kept, parts = [], []
        for part in (slice(0, half), slice(half, len(chunk))):
            sliced = None if like is None else {r: np.asarray(v)[part] for r, v in like.items()}
            keep, outs, _ = _bisect(sklearn, chunk.iloc[part], sliced)
            kept.append(keep)
            parts.extend(outs)
        return np.concatenate(kept), parts, exc


def _inputs_take(
    onnx_runtimes: Sequence[Any], frame: pd.DataFrame
) -> tuple[np.ndarray, str | None]:
    """Which rows the ONNX model's inputs take (the first ONNX runtime's input coercion), and
    what the first refused row holds (None when every row is taken).

    One call when every row is taken. Else the rows holding ``±inf`` or a number beyond the
    narrowest float input's range are left out at once; when the others still hold a value the
    inputs refuse, the rows are found by halving, as :func:`_bisect` does.
    """
    feeder = next((r for r in onnx_runtimes if hasattr(r, "feeds")), None)
    if feeder is None or not len(frame):
        return np.ones(len(frame), dtype=bool), None
    first: list[str] = []

    def taken(part: pd.DataFrame) -> bool:
        try:
            feeder.feeds(part)
            return True
        except BadRowError as exc:
            if not first:
                # "bad value in row R, column C: what; fix or drop ..." without the row.
                what = first_line(exc).split(": ", 1)[-1].split("; fix or drop", 1)[0]
                first.append(f"column {exc.column!r}: {what}")
            return False

    def halving(part: pd.DataFrame) -> np.ndarray:
        if taken(part):
            return np.ones(len(part), dtype=bool)
        if len(part) <= 1:
            return np.zeros(len(part), dtype=bool)
        half = len(part) // 2
        return np.concatenate([halving(part.iloc[:half]), halving(part.iloc[half:])])

    if taken(frame):
        return np.ones(len(frame), dtype=bool), None
    takes = ~_out_of_float_range(frame, feeder)
    if not takes.all() and (not takes.any() or taken(frame[takes])):
        return takes, first[0]
    return halving(frame), first[0]


def _out_of_float_range(frame: pd.DataFrame, feeder: Any) -> np.ndarray:
    """Rows holding ``±inf`` or a number the narrowest float input rounds to ``±inf``."""
    widths = {"tensor(float16)": np.float16, "tensor(float)": np.float32}
    types = [getattr(i, "type", "") for i in getattr(feeder.predictor, "inputs", [])]
    narrowest = next((widths[t] for t in widths if t in types), np.float64)
    bad = np.zeros(len(frame), dtype=bool)
    for name in frame.columns:
        column = frame[name]
        if column.dtype == object or pd.api.types.is_string_dtype(column):
            column = pd.to_numeric(column, errors="coerce")
        if not (pd.api.types.is_numeric_dtype(column) or pd.api.types.is_bool_dtype(column)):
            continue
        mask = misfits(column.to_numpy(dtype=np.float64, na_value=np.nan), narrowest)
        if mask is not None:
            bad |= mask
    return bad


def _score(
    frame: pd.DataFrame,
    sklearn: SklearnRuntime | None,
    onnx_runtimes: Sequence[Any],
    scoring: _Scoring,
    headline: bool,
) -> _Scored:
    """Every runtime on the same batches of rows; with a budget, as many rows as it affords.

    Without a budget the batches follow the set's order. With one (and more rows than the
    minimum sample) they follow a permutation seeded with the report's seed: the first
    batches make the minimum sample and time what a row costs on every runtime; the next ones
    are sized to fit what the budget leaves for this set, and scoring stops when it is spent.
    The rows scored are then the first rows of that permutation, put back in the set's order.
    """
    n = len(frame)
    batch = scoring.rows_per_batch or max(1, n)
    budget = scoring.budget
    timed = budget is not None and budget.seconds is not None and n > MIN_SAMPLE_ROWS
    order = permutation(n, scoring.seed) if timed else np.arange(n)
    left = budget.remaining if timed and budget is not None else 0.0
    parts: dict[str, list[dict[str, np.ndarray]]] = {}
    errors: dict[str, str] = {}
    refused: InferenceError | None = None
    kept: list[np.ndarray] = []  # per batch, the rows scikit-learn scored
    done, spent, allowed, last = 0, 0.0, None, 0.0
    if timed and budget is not None and budget.single_cost is None and any(budget.single_rows):
        # What a one-row call costs, for the time the batch set's one-row calls will take.
        one = frame.iloc[order[:1]]
        budget.single_cost = sum(_seconds(lambda r=r: r.run(one)) for r in onnx_runtimes)
    while done < n or n == 0:  # an empty set goes through once: the runtimes refuse it
        size = next_batch(n - done, batch)
        if timed and budget is not None:
            if done < MIN_SAMPLE_ROWS:
                size = min(size, MIN_SAMPLE_ROWS - done)
            else:
                # The dearer of the average and the last batch: a row's cost can grow with
                # the batch (a loop runs as long as its slowest row needs).
                cost = max(spent / done, last)
                if allowed is None:  # once, from the cost of the minimum sample
                    allowed = budget.seconds_for(scoring.index, cost, left, headline=headline)
                if math.isfinite(allowed):
                    size = min(size, int(max(allowed - spent, 0.0) // max(cost, 1e-9)))
                if size < 1:
                    break
        chunk = frame.iloc[order[done : done + size]]
        started = time.perf_counter()
        first: dict[str, np.ndarray] | None = None
        for runtime in onnx_runtimes:
            if runtime.name in errors:
                continue
            try:
                out = runtime.run(chunk)
            except OnnxbridgeError as exc:
                errors[runtime.name] = first_line(exc)
                parts.pop(runtime.name, None)
                continue
            parts.setdefault(runtime.name, []).append(out)
            first = first if first is not None else out
        if sklearn is not None:
            # Rows scikit-learn refuses are found by halving the batch, within the budget.
            keep, outs, refusal = _bisect(sklearn, chunk, first)
            refused = refused or refusal
            kept.append(keep)
            parts.setdefault(SKLEARN, []).extend(outs)
        took = time.perf_counter() - started
        spent, done, last = spent + took, done + size, took / max(size, 1)
        if size == 0:
            break
    scored = order[:done]
    # Back to the set's order: the outputs of the rows in order, as one call gives them.
    back = np.argsort(scored, kind="stable")
    kept_rows = np.concatenate(kept) if kept else np.zeros(0, dtype=bool)
    # scikit-learn's outputs are of the rows it scored: those, back in the set's order.
    back_kept = np.argsort(scored[kept_rows], kind="stable") if kept else back
    outputs = {
        name: {
            role: np.concatenate([np.asarray(p[role]) for p in runs])[
                back_kept if name == SKLEARN else back
            ]
            for role in runs[0]
        }
        for name, runs in parts.items()
        if runs
    }
    positions = np.sort(scored) if done < n else None
    kept_in_order = kept_rows[back] if refused is not None else None
    return _Scored(positions, outputs, errors, refused, kept_in_order)


def _run_probe(
    probe: ProbeSet,
    sklearn: SklearnRuntime | None,
    onnx_runtimes: Sequence[Any],
    tolerances: Mapping[str, Tolerance],
    worst: int,
    scoring: _Scoring | None = None,
) -> ProbeRun:
    scoring = scoring or _Scoring()
    result = ProbeSetResult(
        name=probe.name,
        description=probe.description,
        n_rows=len(probe.frame),
        skipped=probe.skipped,
    )
    run = ProbeRun(probe=probe, result=result, frame=probe.frame, meta=list(probe.meta))
    if probe.skipped is not None:
        return run
    frame = probe.frame
    takes, unscoreable = _inputs_take(onnx_runtimes, frame)
    if unscoreable is not None:
        # predict refuses these rows in one line (a value the input type cannot hold): no
        # answer of the ONNX model to compare, and no wrong one either.
        result.n_unscoreable, result.unscoreable = int((~takes).sum()), unscoreable
        if not takes.any():
            result.skipped = f"the ONNX model's inputs take no row ({unscoreable})"
            result.n_rows = 0
            return run
        frame = frame[takes].reset_index(drop=True)
        run.frame = frame
        run.meta = [m for m, k in zip(run.meta, takes, strict=False) if k] if run.meta else []
    scored = _score(frame, sklearn, onnx_runtimes, scoring, headline=probe.name == "holdout")
    positions = scored.positions
    if positions is not None:
        # Every runtime scores the same rows, so that every pair still compares.
        result.sample = {
            "rows": len(positions),
            "of": len(frame),
            "seed": scoring.seed,
            "budget_s": scoring.budget.seconds if scoring.budget is not None else None,
            "positions": positions.tolist(),
        }
        frame = frame.iloc[positions].reset_index(drop=True)
        run.meta = [run.meta[i] for i in positions] if run.meta else []
    outputs = scored.outputs
    errors = scored.errors
    if sklearn is not None and scored.refused is not None:
        exc = scored.refused
        # Keep the rows scikit-learn scores; the others are not a conversion's concern.
        keep = scored.kept if scored.kept is not None else np.zeros(len(frame), dtype=bool)
        result.n_refused = int((~keep).sum())
        result.refused = first_line(exc)
        if not keep.any():
            result.skipped = f"scikit-learn refused every row ({first_line(exc)})"
            result.n_rows = 0
            return run
        frame = frame[keep].reset_index(drop=True)
        run.meta = [m for m, k in zip(run.meta, keep, strict=False) if k] if run.meta else []
        outputs = {
            name: out if name == SKLEARN else _take(out, keep) for name, out in outputs.items()
        }
    run.frame = frame
    result.n_rows = len(frame)
    names = ([SKLEARN] if sklearn is not None else []) + [r.name for r in onnx_runtimes]
    if REFERENCE in errors and ONNXRUNTIME in names and len(names) > 2:
        # The specification's evaluator does not implement everything ONNX Runtime runs (e.g.
        # float64 tree ensembles): that is no divergence; compare without it and say so (the
        # report's warnings). With one runtime left there would be nothing to compare: the
        # failed pair stays.
        result.unavailable[REFERENCE] = errors.pop(REFERENCE)
        names = [n for n in names if n != REFERENCE]
        onnx_runtimes = [r for r in onnx_runtimes if r.name != REFERENCE]
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            if a in errors or b in errors:
                failed = a if a in errors else b
                result.pairs.append(
                    PairComparison(
                        a=a, b=b, ok=False, status="error", error=f"{failed}: {errors[failed]}"
                    )
                )
                continue
            pair, bad = _compare_pair(a, b, outputs[a], outputs[b], tolerances, frame, worst)
            result.pairs.append(pair)
            run.bad[pair.name] = bad
    if probe.name == "batch":
        for runtime in onnx_runtimes:
            if runtime.name in errors:
                continue
            single = f"{runtime.name}[1-row]"
            try:
                outputs[single] = _one_row_at_a_time(runtime, frame)
            except OnnxbridgeError as exc:
                result.pairs.append(
                    PairComparison(
                        runtime.name, single, ok=False, status="error", error=first_line(exc)
                    )
                )
                continue
            pair, bad = _compare_pair(
                runtime.name,
                single,
                outputs[runtime.name],
                outputs[single],
                tolerances,
                frame,
                worst,
            )
            result.pairs.append(pair)
            run.bad[pair.name] = bad
    if ONNXRUNTIME in names:
        for pair in result.pairs:
            pair.gating = REFERENCE not in (pair.a, pair.b) and not pair.b.startswith(REFERENCE)
    run.outputs = outputs
    if result.pairs and not result.pairs[0].error:
        first = result.pairs[0]
        run.diffs = _numeric_diffs(outputs[first.a], outputs[first.b])
    result.ok = all(p.ok for p in result.pairs)
    result.cause = _cause(result)
    return run


def _accepts_missing(predictor: Predictor, estimator: Any, frame: pd.DataFrame) -> bool | list[str]:
    """Where the source model takes a missing value: every column (True), none (False), or
    the columns recorded per column in the model's metadata."""
    metadata = predictor.metadata
    if metadata is not None and metadata.missing_by_column is not None:
        by_column = metadata.missing_by_column
        return [name for name in metadata.features.names if by_column.get(name) == "accepted"]
    if metadata is not None and metadata.missing_values is not None:
        return metadata.accepts_missing_everywhere()
    if estimator is None:
        return False
    probe = frame.head(1).copy()
    for name in probe.columns:
        blank_column(probe, name)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            estimator.predict(probe) if hasattr(estimator, "predict") else estimator.transform(
                probe
            )
    except Exception:
        return False
    return True


def _rows(data: Any, predictor: Predictor, estimator: Any) -> pd.DataFrame:
    if isinstance(data, (str, Path)):
        data = read_table(data)
    if not isinstance(data, pd.DataFrame):
        array = np.asarray(data)
        if array.ndim != 2:
            raise DataError(f"data must be 2-D [rows, features], got shape {array.shape}")
        columns = predictor.feature_names or [
            str(c) for c in getattr(estimator, "feature_names_in_", range(array.shape[1]))
        ]
        data = pd.DataFrame(array, columns=columns)
    frame = data.rename(columns=str)
    names = predictor.feature_names
    if names is None and getattr(estimator, "feature_names_in_", None) is not None:
        names = [str(c) for c in estimator.feature_names_in_]
    if names is not None:
        missing = [c for c in names if c not in frame.columns]
        if missing:
            raise DataError(
                f"the data lacks the model's columns {', '.join(map(repr, missing[:5]))}; "
                "pass rows "
                "with the columns the model was trained on"
            )
        frame = frame[names]
    if predictor.metadata is not None:
        # A text column read as numbers (a CSV of zip codes, say) is text to the model: give
        # scikit-learn the text ONNX Runtime gets ("10" for 10; _meta.input_block).
        for feature in predictor.metadata.features.features:
            column = frame.get(feature.name)
            if feature.kind != "numeric" and column is not None and column.dtype != object:
                frame[feature.name] = column.astype(object).map(
                    lambda v: v if pd.isna(v) else str(v)
                )
    frame = frame.reset_index(drop=True)
    try:  # columns the inputs cannot take at all (text in a number column): one line now
        predictor.prepare(frame, allow_missing=True)
    except BadRowError:
        pass  # a few rows the inputs cannot take are left out of the probe sets
    return frame


def validate_model(
    model: str | Path,
    estimator: Any,
    data: Any,
    *,
    atol: float | None = None,
    rtol: float | None = None,
    tolerances: Mapping[str, Tolerance] | None = None,
    probes: ProbeSpec | Sequence[str] | None = None,
    seed: int = 0,
    runtimes: Sequence[str] = RUNTIME_NAMES,
    diagnose: bool = True,
    worst_rows: int = WORST_ROWS,
    missing_values: str = "auto",
    budget: float | str | None = DEFAULT_BUDGET_S,
    memory_bound: int = DEFAULT_MEMORY_BOUND,
) -> ValidationReport:
    """Validate an ONNX file against its fitted source model on every probe set.

    Args:
        model: the ``.onnx`` file.
        estimator: the fitted source model; None compares the two ONNX runtimes only.
        data: ``[N, F]`` rows the model was not trained on (DataFrame, 2-D array or a data
            file); a target column named in the model's metadata is dropped. The probe sets
            start from these rows.
        atol, rtol: tolerance for every numeric output (default 1e-5 each).
        tolerances: per-role tolerances, overriding ``atol`` / ``rtol``.
        probes: a :class:`ProbeSpec` or probe-set names (default: all, with ``seed``).
        seed: seed of the random probe rows (when ``probes`` is not a ProbeSpec).
        runtimes: which of ``sklearn``, ``onnxruntime``, ``reference`` to compare.
        diagnose: explain a DIVERGENT verdict (converts pipeline prefixes, re-checks trees).
        worst_rows: mismatched rows kept per output, with their inputs.
        missing_values: whether a divergence on the ``missing`` probe set makes the verdict
            DIVERGENT: ``gate``, ``warn`` (reported, verdict unchanged), or ``auto`` — gate when
            the rows given hold NaN (the model was trained on data with missing values), warn
            when they do not (the model never learned where NaN goes).
        budget: seconds for scoring the probe sets (default 60; None, 0 or ``"none"``: no
            budget). A set
            that would not fit is scored on a random sample of its rows (seeded with ``seed``,
            at least 200 rows), the same rows on every runtime; the report says which.
        memory_bound: bytes one batch of rows may take in a runtime (default 512 MiB); every
            runtime scores in batches sized from the model's cost per row (see
            :mod:`onnxbridge.validate._budget`).

    Raises:
        DataError, OnnxModelError, SchemaMismatchError: the inputs cannot be validated.
    """
    started = time.perf_counter()
    budget = _check_budget(budget)
    if not isinstance(memory_bound, int) or isinstance(memory_bound, bool) or memory_bound < 1:
        raise DataError(
            f"memory_bound must be a number of bytes >= 1, got {memory_bound!r}; e.g. "
            f"{DEFAULT_MEMORY_BOUND} (512 MiB)"
        )
    unknown = [r for r in runtimes if r not in RUNTIME_NAMES]
    if unknown or len(set(runtimes)) < 2:
        raise DataError(
            f"runtimes={','.join(runtimes)!r} is not valid: pass two or more of "
            f"{', '.join(RUNTIME_NAMES)}",
            arguments=("runtimes",),
        )
    resolved = resolve_tolerances(atol, rtol, tolerances)
    if missing_values not in MISSING_POLICIES:
        raise DataError(
            f"missing_values {missing_values!r} is not valid; use one of "
            f"{', '.join(MISSING_POLICIES)}"
        )
    spec = (
        probes
        if isinstance(probes, ProbeSpec)
        else ProbeSpec(probes=tuple(probes) if probes is not None else PROBE_NAMES, seed=seed)
    )
    if estimator is None and SKLEARN in runtimes:
        runtimes = [r for r in runtimes if r != SKLEARN]
    predictor = Predictor(model)
    frame = _rows(data, predictor, estimator)
    schema = (
        predictor.metadata.features
        if predictor.metadata is not None
        else FeatureSchema.from_frame(frame)
    )
    # Before the other runtimes load: the threshold probes read a big forest's arrays once more,
    # and those are let go before onnx.reference holds its own copy of the model.
    sets = build_probe_sets(
        frame,
        schema,
        estimator=estimator,
        accepts_missing=_accepts_missing(predictor, estimator, frame),
        spec=spec,
    )
    ort = OnnxRuntime(predictor)
    runtime_info: dict[str, dict[str, Any]] = {}
    onnx_runtimes: list[Any] = []
    from importlib.metadata import version

    if ONNXRUNTIME in runtimes:
        onnx_runtimes.append(ort)
        runtime_info[ONNXRUNTIME] = {"available": True, "version": version("onnxruntime")}
    if REFERENCE in runtimes:
        try:
            onnx_runtimes.append(ReferenceRuntime(model, ort))
            runtime_info[REFERENCE] = {"available": True, "version": "onnx " + version("onnx")}
        except InferenceError as exc:
            runtime_info[REFERENCE] = {"available": False, "error": str(exc)}
    sklearn = SklearnRuntime(estimator, ort.roles) if SKLEARN in runtimes else None
    if sklearn is not None:
        runtime_info[SKLEARN] = {"available": True, "version": version("scikit-learn")}
    if len(onnx_runtimes) + (sklearn is not None) < 2:
        lost = [i["error"] for i in runtime_info.values() if not i["available"]]
        why = "; ".join(lost) if lost else "no source model was given"
        raise DataError(
            f"only one runtime can run the model, so there is nothing to compare it with "
            f"({why}); pass the source model (estimator=) and compare with scikit-learn",
            arguments=("estimator",),
        )
    rows_per_batch = batch_rows(graph_width(model, len(frame.columns)), memory_bound)
    compared = [p for p in sets if p.skipped is None]
    plan = Budget(
        budget,
        started,
        [len(p.frame) for p in compared],
        [len(p.frame) if p.name == "batch" else 0 for p in compared],
    )
    runs: list[ProbeRun] = []
    for probe in sets:
        index = sum(1 for r in runs if r.probe.skipped is None)
        scoring = _Scoring(rows_per_batch, plan, index, spec.seed)
        runs.append(_run_probe(probe, sklearn, onnx_runtimes, resolved, worst_rows, scoring))
    scoring_s = time.perf_counter() - started
    failed_on = [r.result.name for r in runs if REFERENCE in r.result.unavailable]
    if failed_on and REFERENCE in runtime_info:
        first = next(
            r.result.unavailable[REFERENCE] for r in runs if REFERENCE in r.result.unavailable
        )
        runtime_info[REFERENCE]["error"] = first
        runtime_info[REFERENCE]["failed_on"] = failed_on
    gate_missing = missing_values == "gate" or (
        missing_values == "auto" and bool(frame.isna().to_numpy().any())
    )
    for run in runs:
        if run.result.name == "missing":
            run.result.gating = gate_missing
    headline = next(
        (r.result for r in runs if r.result.name == "holdout"), runs[0].result if runs else None
    )
    outputs = []
    if headline is not None and headline.pairs:
        outputs = headline.pairs[0].outputs
    verdict = DIVERGENT if any(r.result.fails_verdict for r in runs) else EQUIVALENT
    report = ValidationReport(
        verdict=verdict,
        outputs=outputs,
        atol=DEFAULT_ATOL if atol is None else float(atol),
        rtol=DEFAULT_RTOL if rtol is None else float(rtol),
        n_rows=headline.n_rows if headline is not None else len(frame),
        rows=headline.name if headline is not None else "holdout",
        model=str(model),
        reference=type(estimator).__name__ if estimator is not None else None,
        runtimes=runtime_info,
        tolerances={role: {"atol": t.atol, "rtol": t.rtol} for role, t in resolved.items()},
        probe_sets=[r.result for r in runs],
        seed=spec.seed,
        budget_s=budget,
        memory_bound=memory_bound,
        batch_rows=rows_per_batch,
        scoring_s=round(scoring_s, 3),
        diff_samples={r.result.name: r.diffs.tolist() for r in runs if r.diffs.size},
    )
    if diagnose and not all(r.result.ok for r in runs):
        from onnxbridge.validate._diagnosis import diagnose_runs

        report.diagnoses = diagnose_runs(
            runs, estimator=estimator, predictor=predictor, sample=frame, tolerances=resolved
        )
    report.duration_s = round(time.perf_counter() - started, 3)
    return report


def _check_budget(budget: Any) -> float | None:
    """Seconds, or None for no budget (``None``, ``0`` or ``"none"``).

    Raises:
        DataError: not a number >= 0.
    """
    if budget is None or (isinstance(budget, str) and budget.strip().lower() == "none"):
        return None
    try:
        seconds = float(budget)
    except (TypeError, ValueError):
        seconds = float("nan")
    if isinstance(budget, bool) or not np.isfinite(seconds) or seconds < 0:
        raise DataError(
            f"budget={budget!r} is not valid: pass seconds >= 0 (e.g. budget=60), or 0 or "
            "none for no budget",
            arguments=("budget",),
        )
    return seconds or None


def compare_predictions(
    estimator: Any,
    predictor: Predictor,
    X: pd.DataFrame,
    *,
    atol: float = DEFAULT_ATOL,
    rtol: float = DEFAULT_RTOL,
    rows: str = "holdout",
) -> ValidationReport:
    """scikit-learn against ONNX Runtime on ``X`` only (no probe sets, no second runtime).

    Args:
        estimator: the fitted source model.
        predictor: the ONNX model.
        X: ``[N, F]`` rows to compare on, as the source model takes them.
        atol: absolute tolerance for every numeric output.
        rtol: relative tolerance for every numeric output.
        rows: a name for the rows compared (shown in the report).
    """
    resolved = resolve_tolerances(atol, rtol)
    ort = OnnxRuntime(predictor)
    probe = ProbeSet(rows, "the rows given", X.reset_index(drop=True))
    run = _run_probe(probe, SklearnRuntime(estimator, ort.roles), [ort], resolved, WORST_ROWS)
    result = run.result
    return ValidationReport(
        verdict=DIVERGENT if result.fails_verdict else EQUIVALENT,
        outputs=result.pairs[0].outputs if result.pairs else [],
        atol=atol,
        rtol=rtol,
        n_rows=result.n_rows,
        rows=rows,
        model=str(predictor.path) if predictor.path else None,
        reference=type(estimator).__name__,
        tolerances={role: {"atol": t.atol, "rtol": t.rtol} for role, t in resolved.items()},
        probe_sets=[result],
    )


def validate_bundle(
    bundle: str | Path | Bundle,
    *,
    atol: float | None = None,
    rtol: float | None = None,
    tolerances: Mapping[str, Tolerance] | None = None,
    probes: ProbeSpec | Sequence[str] | None = None,
    seed: int = 0,
    runtimes: Sequence[str] = RUNTIME_NAMES,
    golden: bool = False,
    diagnose: bool = True,
    missing_values: str = "auto",
    budget: float | str | None = DEFAULT_BUDGET_S,
    memory_bound: int = DEFAULT_MEMORY_BOUND,
    write_report: bool = True,
    html: bool = True,
    trusted: Sequence[str] = (),
) -> ValidationReport:
    """Validate a bundle's ``model.onnx`` against its ``model.skops`` on every probe set.

    The probe sets start from ``holdout.parquet``. Writes ``reports/validation.json`` (and
    ``reports/validation.html`` unless ``html=False``) and records the verdict in ``card.json``.

    Args:
        bundle: the bundle folder.
        golden: also re-run the golden predictions stored at convert and report any change.
        trusted: extra names to trust in ``model.skops`` for this call (see
            :func:`onnxbridge.bundle.load_estimator`); never stored.
        (others): as :func:`validate_model`.

    Raises:
        BundleError: missing ``model.onnx`` (run convert first), changed or damaged files, or
            ``golden`` without stored golden predictions.
        DataError: bad tolerances or probe options.
    """
    resolve_tolerances(atol, rtol, tolerances)  # fail on bad tolerances before any work
    _check_budget(budget)
    if not isinstance(bundle, Bundle):
        bundle = Bundle.open(bundle)
    bundle.check_file(ONNX_NAME)
    estimator = bundle.load_estimator(trusted=trusted)
    X, _ = bundle.load_holdout()
    if golden:
        from onnxbridge.validate._golden import check_golden

        golden_result = check_golden(bundle, tolerances=resolve_tolerances(atol, rtol, tolerances))
    report = validate_model(
        bundle.onnx_path,
        estimator,
        X,
        atol=atol,
        rtol=rtol,
        tolerances=tolerances,
        probes=probes,
        seed=seed,
        runtimes=runtimes,
        diagnose=diagnose,
        missing_values=missing_values,
        budget=budget,
        memory_bound=memory_bound,
    )
    if golden:
        report.golden = golden_result.to_dict()
        if not golden_result.ok:
            from onnxbridge.validate._diagnosis import golden_diagnosis

            report.verdict = DIVERGENT
            report.diagnoses.append(golden_diagnosis(golden_result))
    if write_report:
        write_reports(report, bundle.reports_dir, html=html)
        bundle.card["validation"] = {
            "verdict": report.verdict,
            "atol": report.atol,
            "rtol": report.rtol,
            "rows": report.n_rows,
            "probe_sets": [p.name for p in report.probe_sets if p.skipped is None],
            "failing_probe_sets": report.failing_probe_sets,
            "warning_probe_sets": report.warning_probe_sets,
            "report": "reports/validation.json",
            "validated_at": report.created_at,
        }
        bundle.save_card()
    return report


def write_reports(report: ValidationReport, folder: str | Path, *, html: bool = True) -> list[Path]:
    """Write ``validation.json`` and ``validation.html`` into ``folder``, atomically.

    With ``html=False`` an older ``validation.html`` there is removed.
    """
    import json

    from onnxbridge._files import check_not_folders
    from onnxbridge.bundle import atomic_write_path

    folder = Path(folder)
    written = []
    target = folder / "validation.json"
    page = folder / "validation.html"
    check_not_folders(target, *([page] if html else []))
    with atomic_write_path(target) as tmp:
        tmp.write_text(json.dumps(report.to_dict(), indent=2, default=str) + "\n")
    written.append(target)
    if not html and page.is_file():
        page.unlink()  # it would describe an older run than validation.json
    if html:
        from onnxbridge.validate._html import render_html

        bench = folder / "bench.png"
        with atomic_write_path(page) as tmp:
            tmp.write_text(render_html(report, bench_png=bench if bench.is_file() else None))
        written.append(page)
    return written
