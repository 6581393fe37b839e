"""Run a converted model and its source side by side, and find the pipeline step that diverges.

:func:`onnx_outputs` runs a :class:`~onnxbridge.convert._core.ConversionResult` in ONNX Runtime
and returns its outputs by role; :func:`source_outputs` computes scikit-learn's for the same rows
(:func:`onnxbridge.convert._roles.expected_outputs`), laid out alike, so the two compare with
:func:`onnxbridge.convert._agreement.compare_output`.

:func:`locate_diverging_step`: when a Pipeline's ONNX graph and scikit-learn disagree on some
rows, every prefix ``Pipeline(steps[:k])`` is converted and its ``transformed`` output compared
with scikit-learn's ``transform`` on those rows; the first prefix that differs names the step
whose conversion is wrong (the final step when none does). ``convert`` uses it to say which step
diverges when it refuses a model, and ``validate``'s diagnosis reports it.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from onnxbridge._meta import input_block
from onnxbridge.convert._agreement import Tolerance, compare_output
from onnxbridge.convert._roles import expected_outputs
from onnxbridge.data import normalize_features
from onnxbridge.errors import ConversionError, first_line

__all__ = [
    "DivergingStep",
    "PrefixCheck",
    "accepted_rows",
    "locate_diverging_step",
    "onnx_outputs",
    "onnx_session",
    "release_session",
    "source_outputs",
]

# Rows a prefix is checked on at most: the diverging rows are what matter, not how many.
MAX_STEP_ROWS = 200
# scikit-learn calls :func:`accepted_rows` makes at most, past the first: at least
# MAX_SCORING_CALLS, more on narrow tables (a call's cost grows with the columns):
# SCORING_CELLS // columns.
MAX_SCORING_CALLS = 64
SCORING_CELLS = 10_000


def accepted_rows(
    scores: Callable[[pd.DataFrame], bool],
    frame: pd.DataFrame,
    max_calls: int | None = None,
) -> np.ndarray:
    """Which rows of ``frame`` scikit-learn scores, in few calls: a boolean mask ``[N]``.

    ``scores(rows)`` says whether the model answers those rows (it refuses a whole call when
    any row is refused). All rows are scored in one call; a refused group is split in halves,
    breadth first, so a few refused rows among many cost about ``2·log2(N)`` calls each, and
    every row refused about ``2·N``. After ``max_calls`` calls (default: the larger of
    :data:`MAX_SCORING_CALLS` and :data:`SCORING_CELLS` // columns, so exact up to 50
    columns) the groups still undecided count as refused: never accepted without proof, so
    what is called accepted is always true, and a very wide model that refuses every row costs
    ``max_calls`` calls, not one per row.
    """
    accepted = np.zeros(len(frame), dtype=bool)
    if len(frame) == 0:
        return accepted
    if max_calls is None:
        max_calls = max(MAX_SCORING_CALLS, SCORING_CELLS // max(frame.shape[1], 1))
    groups = [np.arange(len(frame))]
    calls = 0
    while groups:
        group = groups.pop(0)
        if calls > max_calls:
            break
        calls += 1
        if scores(frame.iloc[group]):
            accepted[group] = True
        elif len(group) > 1:
            half = len(group) // 2
            groups.extend([group[:half], group[half:]])
    return accepted


def onnx_session(model: Any) -> Any:
    """An ONNX Runtime CPU session for an ``onnx.ModelProto``, logging errors only."""
    import onnxruntime as ort

    from onnxbridge._onnxfile import loadable

    options = ort.SessionOptions()
    options.log_severity_level = 3  # errors only; shape warnings are not the user's concern
    with loadable(model) as source:  # over 2 GiB: a temporary copy with external data
        return ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])


def result_session(result: Any) -> Any:
    """The session of a conversion ``result``: the one its conversion opened, else a new one."""
    session = getattr(result, "_session", None)
    if session is None:
        session = onnx_session(result.model)
        result._session = session
    return session


def release_session(*results: Any) -> None:
    """Let go of the sessions ``results`` hold (None entries are skipped): a big forest's
    session is larger than its model, and a result that is kept or a traceback that holds it
    must not keep the runtime's copy too."""
    for result in results:
        if result is not None:
            result._session = None


def _as_matrix(raw: Any, classes: list[Any] | None) -> np.ndarray:
    if isinstance(raw, list):
        # ZipMap: one {class: probability} dict per row, in the classes' order.
        keys = classes if classes else (list(raw[0].keys()) if raw else [])
        return np.array([[row[k] for k in keys] for row in raw], dtype=np.float64)
    return np.asarray(raw)


def onnx_outputs(result: Any, frame: pd.DataFrame, session: Any = None) -> dict[str, np.ndarray]:
    """ONNX Runtime's outputs of a converted model by role, for ``frame`` ``[N, F]``.

    Labels are ``[N]``, a single-target value ``[N]``, the rest as the graph gives them.

    Raises:
        ConversionError: ONNX Runtime failed on these rows.
    """
    metadata = result.metadata
    try:
        session = session or result_session(result)
        feeds = {i["name"]: input_block(frame, i["columns"], i["dtype"]) for i in metadata.inputs}
        values = session.run(None, feeds)
    except Exception as exc:  # onnxruntime's Fail / InvalidArgument, a value that cannot cast
        raise ConversionError(f"onnxruntime failed on these rows: {first_line(exc)}") from exc
    names = [o.name for o in session.get_outputs()]
    by_name = dict(zip(names, values, strict=True))
    classes = metadata.classes if isinstance(metadata.classes, list) else None
    flat = None if classes and isinstance(classes[0], list) else classes
    out: dict[str, np.ndarray] = {}
    for role, name in metadata.outputs.items():
        array = _as_matrix(by_name[name], flat)
        if role == "label" or (role == "value" and array.ndim == 2 and array.shape[1] == 1):
            array = array.reshape(-1)
        out[role] = array
    return out


def source_outputs(
    estimator: Any,
    frame: pd.DataFrame,
    roles: Mapping[str, str] | list[str],
    like: dict[str, np.ndarray] | None = None,
) -> dict[str, np.ndarray]:
    """scikit-learn's outputs by role for ``frame``, laid out like ``like`` (ONNX's).

    One thread (OpenMP models spin-wait on a busy machine for a few rows), warnings off (probe
    rows are extreme on purpose).

    Raises:
        Exception: whatever the estimator raises for these rows (e.g. it refuses NaN).
    """
    from threadpoolctl import threadpool_limits

    frame = normalize_features(frame)
    with warnings.catch_warnings(), threadpool_limits(1), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return expected_outputs(
            estimator, frame, dict(roles) if isinstance(roles, Mapping) else roles, like=like
        )


@dataclass
class PrefixCheck:
    """How one pipeline prefix ``steps[:step]`` compared (``checked`` False: it could not be)."""

    step: int
    name: str
    cls: str
    checked: bool
    ok: bool | None = None
    max_abs_diff: float | None = None
    n_mismatched: int | None = None
    n_rows: int | None = None
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON form."""
        if not self.checked:
            return {"step": self.step, "name": self.name, "checked": False, "error": self.error}
        return {
            "step": self.step,
            "name": self.name,
            "class": self.cls,
            "checked": True,
            "ok": self.ok,
            "max_abs_diff": self.max_abs_diff,
            "n_mismatched": self.n_mismatched,
        }


@dataclass
class DivergingStep:
    """Where a pipeline diverges.

    Attributes:
        step: 1-based position of the step blamed (the first of the unchecked ones when the
            prefixes from there could not be converted).
        name: its name in the pipeline.
        cls: its class name.
        how: ``"diverges"`` (its prefix differs), ``"final"`` (every prefix agrees, so the
            final step) or ``"unchecked"`` (the prefixes from ``step`` on could not be checked).
        n_steps: steps in the pipeline.
        prefixes: what each prefix gave, in order.
        parts: when the step is a ColumnTransformer whose output differs, its transformers
            whose output columns differ, as ``(name, class)``.
    """

    step: int
    name: str
    cls: str
    how: str
    n_steps: int
    prefixes: list[PrefixCheck] = field(default_factory=list)
    parts: list[tuple[str, str]] = field(default_factory=list)

    @property
    def summary(self) -> str:
        """One sentence: which step diverges."""
        label = f"step {self.step} {self.name!r} ({self.cls})"
        if self.how == "unchecked":
            return (
                f"steps before {label} convert faithfully; from step {self.step} on the prefixes "
                f"could not be checked, so the divergence is in steps {self.step}..{self.n_steps}"
            )
        if self.how == "final":
            return (
                f"every prefix converts faithfully; the final step {self.name!r} ({self.cls}) "
                "is where the pipeline diverges"
            )
        text = f"the first diverging step is {label}"
        if self.parts:
            inner = ", ".join(f"{name!r} ({cls})" for name, cls in self.parts)
            text += f", in its transformer{'s' if len(self.parts) > 1 else ''} {inner}"
        return text

    def as_dict(self) -> dict[str, Any]:
        """JSON form (the diagnosis's and the card's)."""
        return {
            "first_diverging_step": self.step,
            "step_name": self.name,
            "step_class": self.cls,
            "prefixes": [p.as_dict() for p in self.prefixes],
            **({"parts": [list(p) for p in self.parts]} if self.parts else {}),
        }


def _describe(transformer: Any) -> str:
    """A transformer's class; a Pipeline's as ``Pipeline(A, B)``."""
    steps = getattr(transformer, "steps", None)
    if steps:
        return f"Pipeline({', '.join(type(s).__name__ for _, s in steps)})"
    return type(transformer).__name__


def _diverging_parts(
    step: Any, expected: np.ndarray, actual: np.ndarray, tolerance: Tolerance | None
) -> list[tuple[str, str]]:
    """The transformers of a fitted ColumnTransformer whose output columns differ.

    ``output_indices_`` maps each transformer to its slice of the output columns, which the
    ONNX graph concatenates in the same order.
    """
    slices = getattr(step, "output_indices_", None)
    named = getattr(step, "named_transformers_", None)
    expected, actual = np.asarray(expected), np.asarray(actual)
    if not slices or named is None or expected.ndim != 2 or expected.shape != actual.shape:
        return []
    found = []
    for name, where in slices.items():
        if where.stop <= where.start:
            continue
        comparison, _ = compare_output(
            "transformed", expected[:, where], actual[:, where], tolerance
        )
        if not comparison.ok:
            found.append((name, _describe(named[name]) if name in named else "?"))
    return found


def locate_diverging_step(
    estimator: Any,
    rows: pd.DataFrame,
    sample: pd.DataFrame,
    tolerance: Tolerance | None = None,
    precision: str = "float",
) -> DivergingStep | None:
    """The first step of a Pipeline whose conversion differs from scikit-learn on ``rows``.

    Args:
        estimator: the fitted model; None is returned unless it is a Pipeline of 2+ steps.
        rows: rows on which the whole model diverges (at most :data:`MAX_STEP_ROWS` are used).
        sample: a few training rows, to convert each prefix from.
        tolerance: for the prefixes' ``transformed`` outputs (validate's default if None).
        precision: the prefixes' precision: the model's own (``"float"`` or ``"double"``).
    """
    from sklearn.pipeline import Pipeline

    from onnxbridge.convert._core import convert_unchecked

    steps = list(getattr(estimator, "steps", []))
    if len(steps) < 2 or len(rows) == 0:
        return None
    rows = rows.head(MAX_STEP_ROWS).reset_index(drop=True)
    prefixes: list[PrefixCheck] = []
    for k in range(1, len(steps)):
        prefix = Pipeline(steps[:k])
        name, step = steps[k - 1]
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                converted = convert_unchecked(
                    prefix, sample.head(100), precision=precision, missing_policy=False
                )
            onnx_out = onnx_outputs(converted, rows)
            sk_out = source_outputs(prefix, rows, converted.metadata.outputs, like=onnx_out)
        except Exception as exc:
            # skl2onnx and ONNX Runtime raise many kinds (KeyError, RuntimeError,
            # NotImplementedError, ...) on a prefix they cannot convert or run: that prefix
            # is unchecked, whatever the kind.
            prefixes.append(PrefixCheck(k, name, type(step).__name__, False, error=first_line(exc)))
            continue
        role = "transformed" if "transformed" in onnx_out else next(iter(onnx_out))
        comparison, _ = compare_output(role, sk_out[role], onnx_out[role], tolerance)
        prefixes.append(
            PrefixCheck(
                k,
                name,
                type(step).__name__,
                True,
                ok=comparison.ok,
                max_abs_diff=comparison.max_abs_diff,
                n_mismatched=comparison.n_mismatched,
                n_rows=comparison.n_rows,
            )
        )
        if not comparison.ok:
            parts = _diverging_parts(step, sk_out[role], onnx_out[role], tolerance)
            return DivergingStep(
                k, name, type(step).__name__, "diverges", len(steps), prefixes, parts
            )
    unchecked = [p for p in prefixes if not p.checked]
    if unchecked:
        k = unchecked[0].step
        name, step = steps[k - 1]
        return DivergingStep(k, name, type(step).__name__, "unchecked", len(steps), prefixes)
    name, step = steps[-1]
    return DivergingStep(len(steps), name, type(step).__name__, "final", len(steps), prefixes)
