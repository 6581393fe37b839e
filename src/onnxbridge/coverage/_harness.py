"""Run one estimator through train → convert → load/run → compare, and many of them in isolation.

One estimator (:func:`run_case`): fit it on its data, convert it with onnxbridge's defaults
(``convert_estimator(estimator, sample)`` and nothing else), load the bytes into a
:class:`~onnxbridge.runtime.Predictor`, predict the comparison rows, and compare every output role
with scikit-learn's (:func:`~onnxbridge.convert.expected_outputs`): labels must be identical,
values must agree within ``|onnx - sklearn| <= atol + rtol * |sklearn|`` (the tolerances of
``validate``, 1e-5 each by default). Warnings are recorded, never raised.

Many estimators (:func:`run_coverage`): each runs in a worker process, so a crash (a segfault in a
native library) or a hang cannot stop the run: a worker that does not answer within the time
limit is killed, the estimator is recorded as FAILED at the stage it was in, and a fresh worker
takes the next one.
"""

from __future__ import annotations

import multiprocessing
import time
import traceback
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from onnxbridge._meta import role_parts
from onnxbridge.convert._roles import same_labels
from onnxbridge.coverage._cases import CoverageCase, all_cases
from onnxbridge.coverage._datasets import make_data
from onnxbridge.coverage._report import (
    DIVERGENT,
    EQUIVALENT,
    FAILED,
    STAGES,
    CoverageReport,
    CoverageResult,
    RoleComparison,
)
from onnxbridge.errors import CoverageError, DataError
from onnxbridge.validate import DEFAULT_ATOL, DEFAULT_RTOL

__all__ = ["DEFAULT_TIMEOUT", "run_case", "run_coverage", "select_cases"]

# QuantileTransformer's conversion alone takes 30-90 s on the shared 2-core machine.
DEFAULT_TIMEOUT = 300.0
_REASON_CHARS = 240
_STARTUP_TIMEOUT = 300.0


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    if type(exc).__name__ == "MissingConverterError":
        text = text.split(";")[0]  # the rest lists the supported estimators
    text = f"{type(exc).__name__}: {text}"
    return text if len(text) <= _REASON_CHARS else text[: _REASON_CHARS - 1] + "…"


def _fit(estimator: Any, data: Any) -> Any:
    if data.X_fit is None:  # target transformers (LabelEncoder, ...) are fitted on y alone
        return estimator.fit(data.y_fit)
    if data.y_fit is None:
        return estimator.fit(data.X_fit)
    return estimator.fit(data.X_fit, data.y_fit)


def _onnx_outputs(predictor: Any, X: Any) -> dict[str, np.ndarray]:
    """ONNX Runtime's results by role, as ``Predictor.predict`` gives them.

    Roles ``PredictionResult`` has no field for (``indices`` and ``distances`` of
    NearestNeighbors, ``label_<t>`` and ``probabilities_<t>`` of a multi-output classifier) are
    read from the raw outputs, by the names the metadata records.
    """
    result = predictor.predict(X)
    by_role = {
        # A multi-output classifier's labels [N, T] are compared target by target (label_<t>).
        "label": result.labels if result.targets is None else None,
        "probabilities": result.probabilities,
        "scores": result.scores,
        "value": result.values,
        "transformed": result.transformed,
    }
    outputs = {role: np.asarray(v) for role, v in by_role.items() if v is not None}
    roles = dict(predictor.metadata.outputs) if predictor.metadata else {}
    others = {role: name for role, name in roles.items() if role not in by_role}
    if others:
        names = [o.name for o in predictor.outputs]
        raw = dict(zip(names, predictor.run(predictor.prepare(X)), strict=True))
        outputs.update({role: np.asarray(raw[name]) for role, name in others.items()})
    return outputs


def _compare_labels(role: str, expected: np.ndarray, actual: np.ndarray) -> RoleComparison:
    expected = np.asarray(expected).reshape(-1)
    actual = np.asarray(actual).reshape(-1)
    if expected.shape != actual.shape:
        return RoleComparison(
            role, "labels", ok=False, note=f"shape {actual.shape} != sklearn {expected.shape}"
        )
    same = same_labels(expected, actual)
    bad = int((~same).sum())
    return RoleComparison(
        role,
        "labels",
        ok=bad == 0,
        n_rows=len(same),
        n_mismatched=bad,
        agreement=float(same.mean()) if len(same) else 1.0,
    )


def _compare_values(
    role: str, expected: np.ndarray, actual: np.ndarray, atol: float, rtol: float
) -> RoleComparison:
    try:
        expected = np.asarray(expected, dtype=np.float64)
        actual = np.asarray(actual, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        return RoleComparison(role, "values", ok=False, note=f"not numeric: {_one_line(exc)}")
    if expected.ndim == 1:
        expected = expected.reshape(-1, 1)
    if actual.ndim == 1:
        actual = actual.reshape(-1, 1)
    if expected.shape != actual.shape:
        return RoleComparison(
            role, "values", ok=False, note=f"shape {actual.shape} != sklearn {expected.shape}"
        )
    expected = expected.reshape(len(expected), -1)
    actual = actual.reshape(len(actual), -1)
    diff = np.abs(actual - expected)
    both_nan = np.isnan(actual) & np.isnan(expected)
    diff = np.where(both_nan, 0.0, diff)
    diff = np.where(np.isnan(diff), np.inf, diff)
    magnitude = np.abs(np.nan_to_num(expected))
    row_ok = (diff <= atol + rtol * magnitude).all(axis=1)
    rel = np.divide(diff, magnitude, out=np.zeros_like(diff), where=magnitude > 0)
    bad = int((~row_ok).sum())
    return RoleComparison(
        role,
        "values",
        ok=bad == 0,
        n_rows=len(row_ok),
        n_mismatched=bad,
        agreement=float(row_ok.mean()) if len(row_ok) else 1.0,
        max_abs_diff=float(diff.max()) if diff.size else 0.0,
        max_rel_diff=float(rel.max()) if rel.size else 0.0,
    )


def _divergence(comparisons: list[RoleComparison]) -> str:
    parts = []
    for c in comparisons:
        if c.ok:
            continue
        if c.note:
            parts.append(f"{c.role}: {c.note}")
        elif c.kind == "labels":
            parts.append(f"{c.role}: {c.n_mismatched}/{c.n_rows} differ")
        else:
            parts.append(
                f"{c.role}: {c.n_mismatched}/{c.n_rows} rows out of tolerance "
                f"(max |Δ| {c.max_abs_diff:.2g})"
            )
    return "; ".join(parts)


class _Progress:
    """Where a case is, shared with the parent so a killed worker's stage is known."""

    def __init__(self, report: Callable[[str], None] | None = None) -> None:
        self.stage = STAGES[0]
        self._report = report

    def enter(self, stage: str) -> None:
        self.stage = stage
        if self._report is not None:
            self._report(stage)


def run_case(
    case: CoverageCase,
    *,
    atol: float = DEFAULT_ATOL,
    rtol: float = DEFAULT_RTOL,
    on_stage: Callable[[str], None] | None = None,
) -> CoverageResult:
    """Train, convert, run and compare one estimator; never raises for the estimator's failures.

    Args:
        case: the estimator and its data kind.
        atol: absolute tolerance for values.
        rtol: relative tolerance for values.
        on_stage: called with each stage's name as it starts.
    """
    from onnxbridge.convert import convert_estimator, expected_outputs
    from onnxbridge.runtime import Predictor

    progress = _Progress(on_stage)
    result = CoverageResult(name=case.name, group=case.group, data=case.data, params=case.params)
    started = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            progress.enter("train")
            data = make_data(case.data)
            estimator = case.build()
            _fit(estimator, data)
            result.stages["train"] = "ok"

            progress.enter("convert")
            # The table measures divergence itself, on more rows than convert's check.
            converted = convert_estimator(estimator, data.sample, allow_divergent=True)
            result.opsets = dict(converted.metadata.opsets)
            result.precision = converted.precision
            result.stages["convert"] = "ok"

            progress.enter("run")
            predictor = Predictor(converted.model.SerializeToString())
            onnx = _onnx_outputs(predictor, data.X_onnx)
            result.stages["run"] = "ok"

            progress.enter("compare")
            roles = list(onnx)
            expected = expected_outputs(estimator, data.X_sklearn, roles, like=onnx)
            comparisons = [
                _compare_labels(role, expected[role], onnx[role])
                if role_parts(role)[0] in ("label", "indices")  # label_<t>: multi-output
                else _compare_values(role, expected[role], onnx[role], atol, rtol)
                for role in roles
            ]
            result.stages["compare"] = "ok"
            result.comparisons = comparisons
            result.verdict = EQUIVALENT if all(c.ok for c in comparisons) else DIVERGENT
            result.reason = _divergence(comparisons)
        except Exception as exc:  # the estimator's failure is the result, not an error
            result.stages[progress.stage] = "failed"
            result.verdict = FAILED
            result.failed_stage = progress.stage
            result.reason = _one_line(exc)
            result.detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    result.seconds = time.perf_counter() - started
    result.warnings = sorted({f"{w.category.__name__}: {str(w.message)[:120]}" for w in caught})
    return result


# ---------------------------------------------------------------------------- isolation
def _worker(connection: Any, atol: float, rtol: float) -> None:  # pragma: no cover - subprocess
    """Run cases sent over ``connection`` until it sends None; report stages and results."""
    import os

    # One thread per library: the machine is shared, and isolation must not multiply threads.
    for variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(variable, "1")
    # Failures are recorded in the results; ONNX Runtime's own log lines (written by its C++
    # code to file descriptor 2, whatever the session's log level) would only repeat them.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    cases = {c.name: c for c in all_cases()}
    # Import the converters and ONNX Runtime now, so that the first estimator's time is its own.
    import onnxruntime  # noqa: F401

    from onnxbridge.convert._registry import load_converters

    load_converters()
    connection.send(("ready", None))
    while True:
        name = connection.recv()
        if name is None:
            return
        result = run_case(
            cases[name],
            atol=atol,
            rtol=rtol,
            on_stage=lambda stage: connection.send(("stage", stage)),
        )
        connection.send(("result", result.to_dict()))


class _WorkerProcess:
    def __init__(self, atol: float, rtol: float) -> None:
        context = multiprocessing.get_context("spawn")
        self.connection, child = context.Pipe()
        self.process = context.Process(target=_worker, args=(child, atol, rtol), daemon=True)
        self.process.start()
        child.close()
        # Importing scikit-learn, skl2onnx and onnxruntime takes seconds on a busy machine: wait
        # here, so that the first estimator's time limit is its own.
        if not self.connection.poll(_STARTUP_TIMEOUT):
            self.stop()
            raise CoverageError(
                f"the coverage worker process did not start within {_STARTUP_TIMEOUT:g} s; "
                "the machine may be overloaded: retry later"
            )
        self.connection.recv()

    def stop(self) -> None:
        if self.process.is_alive():
            try:
                self.connection.send(None)
            except OSError:
                pass
            self.process.join(timeout=5)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        self.connection.close()


def _failed_in_worker(case: CoverageCase, stage: str, seconds: float, why: str) -> CoverageResult:
    """The result of an estimator whose worker timed out or died during ``stage``."""
    result = CoverageResult(name=case.name, group=case.group, data=case.data, params=case.params)
    for earlier in STAGES[: STAGES.index(stage)]:
        result.stages[earlier] = "ok"
    result.stages[stage] = "failed"
    result.verdict = FAILED
    result.failed_stage = stage
    result.reason = why
    result.seconds = seconds
    return result


def _run_isolated(
    case: CoverageCase, worker: _WorkerProcess, timeout: float
) -> tuple[CoverageResult, bool]:
    """One case in the worker; returns the result and whether the worker is still usable."""
    started = time.monotonic()
    stage = STAGES[0]
    try:
        worker.connection.send(case.name)
    except OSError as exc:  # the worker died since its last answer
        why = f"WorkerCrash: the worker process could not take the estimator ({exc})"
        return _failed_in_worker(case, stage, 0.0, why), False
    while True:
        left = timeout - (time.monotonic() - started)
        if left <= 0 or not worker.connection.poll(left):
            why = f"TimeoutError: no result within the {timeout:g} s limit (killed during {stage})"
            return _failed_in_worker(case, stage, timeout, why), False
        try:
            kind, payload = worker.connection.recv()
        except (EOFError, OSError):
            code = worker.process.exitcode
            why = f"WorkerCrash: the worker process died during {stage} (exit code {code})"
            return _failed_in_worker(case, stage, time.monotonic() - started, why), False
        if kind == "stage":
            stage = payload
        else:
            return CoverageResult.from_dict(payload), True


def select_cases(only: Sequence[str] | None = None) -> list[CoverageCase]:
    """All cases, or those named in ``only`` (class names, any case), in run order.

    Raises:
        DataError: a name that is not in the run.
    """
    cases = all_cases()
    if not only:
        return cases
    by_lower = {c.name.lower(): c for c in cases}
    unknown = [n for n in only if n.lower() not in by_lower]
    if unknown:
        import difflib

        hints = difflib.get_close_matches(unknown[0], [c.name for c in cases], n=3)
        hint = f"; did you mean {', '.join(hints)}?" if hints else ""
        raise DataError(
            f"only={unknown[0]!r} is not an estimator of the coverage run{hint} "
            "(`onnxbridge coverage --list` prints every name)",
            arguments=("only",),
        )
    wanted = {n.lower() for n in only}
    return [c for c in cases if c.name.lower() in wanted]


def run_coverage(
    only: Sequence[str] | None = None,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    atol: float = DEFAULT_ATOL,
    rtol: float = DEFAULT_RTOL,
    on_result: Callable[[CoverageResult, int, int], None] | None = None,
) -> CoverageReport:
    """Run every case (or those in ``only``), each in a worker process with a time limit.

    Args:
        only: class names to run (all when None or empty).
        timeout: seconds one estimator may take, all stages together.
        atol: absolute tolerance for values.
        rtol: relative tolerance for values.
        on_result: called after each estimator with (result, position, total).

    Raises:
        DataError: an unknown name in ``only``, or a time limit that is not > 0.
    """
    if not timeout > 0:
        raise DataError(
            f"timeout={timeout} is not allowed: it must be > 0 seconds; e.g. timeout=120",
            arguments=("timeout",),
        )
    cases = select_cases(only)
    results: list[CoverageResult] = []
    started = time.perf_counter()
    worker: _WorkerProcess | None = None
    try:
        for position, case in enumerate(cases, start=1):
            if worker is None or not worker.process.is_alive():
                # A worker that died between two estimators is replaced, not reused.
                if worker is not None:
                    worker.stop()
                worker = _WorkerProcess(atol, rtol)
            result, usable = _run_isolated(case, worker, timeout)
            if not usable:
                worker.stop()
                worker = None
            results.append(result)
            if on_result is not None:
                on_result(result, position, len(cases))
    finally:
        if worker is not None:
            worker.stop()
    return CoverageReport(
        results=results,
        atol=atol,
        rtol=rtol,
        timeout=timeout,
        seconds=time.perf_counter() - started,
        complete=not only,
    )
