"""What convert proves before it writes: the ONNX graph answers as the source model does.

After a model is converted, and before it is written, :func:`check_conversion` runs the sample
rows and a few *probe rows* through scikit-learn and ONNX Runtime and compares the outputs by
role with validate's default tolerances (:mod:`onnxbridge.convert._agreement`; labels exactly).
Probe rows, built from the sample rows, one column changed at a time:

- ``missing``: each column missing (NaN; for text, a missing value), where the source model
  accepts it, as recorded in the metadata's ``missing_by_column`` (a column whose missing value
  scikit-learn refuses is left out, and said so);
- ``unseen``: each text column holding a category never seen in training, where the source
  model accepts it;
- ``extremes``: each numeric column at the lowest and the highest value in the sample.

The sample rows compared are those scikit-learn scores: rows with a missing value in a column
where the source model refuses one are left out (and said so), and the probe rows are built
from the rows kept. At most :data:`MAX_PROBE_ROWS` probe rows are built, each kind its own share
(what one kind leaves unused goes to the next), a column at a time in column order. When no
sample row can be compared, nothing is: the check is *unchecked* (``ok`` None) with the reason,
not passed. When the outputs differ, the pipeline step that diverges is found
(:func:`onnxbridge.convert._steps.locate_diverging_step`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from onnxbridge.convert._agreement import DEFAULT_TOLERANCES, compare_output, role_tolerance
from onnxbridge.convert._steps import (
    accepted_rows,
    locate_diverging_step,
    onnx_outputs,
    result_session,
    source_outputs,
)
from onnxbridge.data import blank_column, preview_names
from onnxbridge.errors import ConversionError, first_line

__all__ = ["MAX_PROBE_ROWS", "MAX_SAMPLE_ROWS", "ConversionCheck", "check_conversion"]

MAX_SAMPLE_ROWS = 200
MAX_PROBE_ROWS = 200
UNSEEN_CATEGORY = "__onnxbridge_unseen__"
PROBE_KINDS = ("missing", "unseen", "extremes")


@dataclass
class ConversionCheck:
    """What the check before writing found.

    Attributes:
        ok: scikit-learn and ONNX Runtime agree on every row compared (True), differ on some
            (False), or nothing could be compared (None, with ``unchecked`` saying why).
        sample_rows: sample rows compared.
        probe_rows: probe rows compared, by kind (``missing``, ``unseen``, ``extremes``).
        differing_rows: rows where any output differs.
        outputs: per output role that differs, ``{"rows": n, "max_abs_diff": x or None}``.
        diverging_step: where a pipeline diverges (``{"first_diverging_step", "step_name",
            "step_class", "summary", ...}``), when it does and could be found.
        skipped: probe rows that could not be built or run, and why.
        failures: probe kinds on which ONNX Runtime failed where scikit-learn answered.
        unchecked: why nothing could be compared, when ``ok`` is None.
    """

    ok: bool | None
    sample_rows: int
    probe_rows: dict[str, int] = field(default_factory=dict)
    differing_rows: int = 0
    outputs: dict[str, dict[str, Any]] = field(default_factory=dict)
    diverging_step: dict[str, Any] | None = None
    skipped: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    unchecked: str | None = None

    @property
    def checked(self) -> bool:
        """Whether rows were compared and all agreed."""
        return self.ok is True

    @property
    def rows(self) -> int:
        """Rows compared in all."""
        return self.sample_rows + sum(self.probe_rows.values())

    def summary(self) -> str:
        """One line, e.g. ``0 of 130 rows differ from scikit-learn (100 sample + 30 probe)``."""
        if self.unchecked is not None:
            return f"not checked: {self.unchecked}"
        probes = sum(self.probe_rows.values())
        text = (
            f"{self.differing_rows} of {self.rows} rows differ from scikit-learn "
            f"({self.sample_rows} sample + {probes} probe)"
        )
        if self.outputs:
            parts = []
            for role, found in self.outputs.items():
                diff = found.get("max_abs_diff")
                parts.append(
                    f"{role} on {found['rows']} rows"
                    + (f" (max |Δ| {diff:.3g})" if diff is not None else "")
                )
            text += "; differing: " + ", ".join(parts)
        if self.failures:
            text += "; " + "; ".join(self.failures)
        if self.diverging_step is not None:
            text += "; " + self.diverging_step["summary"]
        return text

    def as_dict(self) -> dict[str, Any]:
        """JSON form, for card.json's ``conversion.check`` and ``--json``."""
        return {
            "ok": self.ok,
            "unchecked": self.unchecked,
            "rows": self.rows,
            "sample_rows": self.sample_rows,
            "probe_rows": dict(self.probe_rows),
            "differing_rows": self.differing_rows,
            "differing_outputs": dict(self.outputs),
            "diverging_step": self.diverging_step,
            "skipped": list(self.skipped),
            "failures": list(self.failures),
        }


def _base(sample: pd.DataFrame, n: int) -> pd.DataFrame:
    """``n`` sample rows, cycling through them."""
    return sample.iloc[np.arange(n) % len(sample)].reset_index(drop=True).copy()


def _numeric(column: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(column) and not pd.api.types.is_bool_dtype(column)


def _text(column: pd.Series) -> bool:
    return not pd.api.types.is_numeric_dtype(column) and not pd.api.types.is_bool_dtype(column)


def _one_column_blocks(
    sample: pd.DataFrame, kind: str, columns: list[str]
) -> Iterator[tuple[str, pd.DataFrame]]:
    """Per column of ``columns``, the probe rows of ``kind`` that change only that column."""
    wanted = set(columns)
    for position, name in enumerate(sample.columns):
        if name not in wanted:
            continue
        column = sample[name]
        if kind == "missing":
            block = _base(sample.iloc[position % len(sample) :], 1)
            blank_column(block, name)
        elif kind == "unseen":
            if not _text(column):
                continue
            block = _base(sample.iloc[position % len(sample) :], 1)
            block[name] = UNSEEN_CATEGORY
        else:
            if not _numeric(column):
                continue
            values = column.to_numpy(dtype=np.float64, na_value=np.nan)
            if not np.isfinite(values).any():
                continue
            # The ends of the sample's range, each on rows whose other columns are elsewhere:
            # far beyond them float32 rounding alone exceeds validate's tolerances.
            block = _base(sample.iloc[position % len(sample) :], 2)
            extremes = np.array([np.nanmin(values), np.nanmax(values)])
            if pd.api.types.is_integer_dtype(column):
                block[name] = extremes.round().astype(column.dtype)
            else:
                block[name] = extremes
        yield name, block


def _names(columns: list[str]) -> str:
    return preview_names([repr(c) for c in columns], limit=5)


def _scorer(estimator: Any, roles: dict[str, str]) -> Any:
    def scores(rows: pd.DataFrame) -> bool:
        try:
            source_outputs(estimator, rows.reset_index(drop=True), roles)
        except Exception:  # scikit-learn refuses these rows (NaN, an unseen category, ...)
            return False
        return True

    return scores


_WHAT = {
    "missing": "missing values",
    "unseen": "unseen categories",
    "extremes": "the ends of the sample's range",
}


def _probe_blocks(
    estimator: Any, sample: pd.DataFrame, roles: dict[str, str], missing_ok: list[str]
) -> tuple[dict[str, pd.DataFrame], list[str]]:
    """Probe rows by kind that scikit-learn answers, and what was left out.

    ``missing_ok``: the columns where the source model takes a missing value.
    """
    frames: dict[str, pd.DataFrame] = {}
    skipped: list[str] = []
    scores = _scorer(estimator, roles)
    budget = MAX_PROBE_ROWS
    columns = {
        "missing": missing_ok,
        "unseen": list(sample.columns),
        "extremes": list(sample.columns),
    }
    for position, kind in enumerate(PROBE_KINDS):
        share = budget // (len(PROBE_KINDS) - position)  # unused shares go to later kinds
        kept: list[tuple[str, pd.DataFrame]] = []
        used = 0
        for name, block in _one_column_blocks(sample, kind, columns[kind]):
            if used + len(block) > share:
                skipped.append(f"{kind} probes stop at {share} rows (from {name!r} on)")
                break
            kept.append((name, block))
            used += len(block)
        if not kept:
            continue
        combined = pd.concat([b for _, b in kept], ignore_index=True)
        names = np.array([name for name, b in kept for _ in range(len(b))], dtype=object)
        accepted = accepted_rows(scores, combined)
        if not accepted.all():
            refused = list(dict.fromkeys(names[~accepted]))
            skipped.append(f"{kind}: scikit-learn refuses {_WHAT[kind]} in {_names(refused)}")
            combined = combined[accepted].reset_index(drop=True)
        if len(combined):
            frames[kind] = combined
            budget -= len(combined)
    return frames, skipped


def _comparable_sample(
    estimator: Any, sample: pd.DataFrame, roles: dict[str, str], refused: list[str]
) -> tuple[pd.DataFrame, list[str]]:
    """The sample rows scikit-learn scores, and what was left out.

    Rows with a missing value in a column where the source model refuses one (``refused``)
    are left out; when the rest still raise, row by row (in halves) to keep those that score.
    """
    skipped: list[str] = []
    n = len(sample)
    keep = np.ones(n, dtype=bool)
    if refused:
        keep = ~sample[refused].isna().any(axis=1).to_numpy()
        if not keep.all():
            blank = [c for c in refused if sample[c].isna().any()]
            skipped.append(
                f"sample: {int((~keep).sum())} of {n} rows left out: scikit-learn refuses "
                f"missing values in {_names(blank)}"
            )
    kept = sample[keep].reset_index(drop=True)
    scores = _scorer(estimator, roles)
    if len(kept) and not scores(kept):
        error = ""
        try:
            source_outputs(estimator, kept, roles)
        except Exception as exc:  # what scikit-learn says, for the record
            error = f" ({first_line(exc)})"
        accepted = accepted_rows(scores, kept)
        skipped.append(
            f"sample: {int((~accepted).sum())} of {n} rows left out: scikit-learn refuses "
            f"them{error}"
        )
        kept = kept[accepted].reset_index(drop=True)
    return kept, skipped


def _failed_run(kind: str, exc: Exception) -> str:
    return (
        f"onnxruntime failed on the {kind} probe rows where scikit-learn answered: "
        f"{first_line(exc)}"
    )


def check_conversion(estimator: Any, result: Any, sample: pd.DataFrame) -> ConversionCheck:
    """Compare scikit-learn and ONNX Runtime on the sample rows and probe rows.

    Args:
        estimator: the fitted source model.
        result: its :class:`~onnxbridge.convert._core.ConversionResult`.
        sample: the sample rows, in the model's input columns.

    Returns:
        What was compared and found; ``ok`` is False when any output differs, None when no
        sample row could be compared (``unchecked`` says why).
    """
    metadata = result.metadata
    roles = dict(metadata.outputs)
    sample = sample.head(MAX_SAMPLE_ROWS).reset_index(drop=True)
    refused = [c for c in metadata.missing_refused_columns() if c in sample.columns]
    kept, skipped = _comparable_sample(estimator, sample, roles, refused)
    if len(kept) == 0:
        reason = "; ".join(s.removeprefix("sample: ") for s in skipped) or "no sample rows"
        return ConversionCheck(
            ok=None,
            sample_rows=0,
            skipped=skipped,
            unchecked=f"no sample row could be compared: {reason}",
        )
    if refused:
        shown = _names(refused)
        skipped.append(f"missing: scikit-learn refuses missing values in {shown}")
    missing_ok = [c for c in kept.columns if c not in set(refused)]
    blocks: dict[str, pd.DataFrame] = {"sample": kept}
    probes, probe_skipped = _probe_blocks(estimator, kept, roles, missing_ok)
    blocks.update(probes)
    skipped.extend(probe_skipped)
    check = ConversionCheck(
        ok=True,
        sample_rows=len(kept),
        probe_rows={kind: len(frame) for kind, frame in probes.items()},
        skipped=skipped,
    )
    session = result_session(result)
    differing: list[pd.DataFrame] = []
    for kind, frame in blocks.items():
        try:
            onnx_out = onnx_outputs(result, frame, session)
        except ConversionError as exc:
            check.failures.append(_failed_run(kind, exc))
            differing.append(frame)
            check.differing_rows += len(frame)
            continue
        sk_out = source_outputs(estimator, frame, roles, like=onnx_out)
        bad = np.zeros(len(frame), dtype=bool)
        for role in roles:
            comparison, row_score = compare_output(
                role, sk_out[role], onnx_out[role], role_tolerance(DEFAULT_TOLERANCES, role)
            )
            rows = row_score > 0
            if rows.any():
                found = check.outputs.setdefault(role, {"rows": 0, "max_abs_diff": None})
                found["rows"] += int(rows.sum())
                if comparison.max_abs_diff is not None:
                    found["max_abs_diff"] = max(
                        found["max_abs_diff"] or 0.0, comparison.max_abs_diff
                    )
                bad |= rows
        if bad.any():
            check.differing_rows += int(bad.sum())
            differing.append(frame[bad])
    check.ok = check.differing_rows == 0
    if not check.ok:
        rows = pd.concat(differing, ignore_index=True)
        located = locate_diverging_step(estimator, rows, sample, precision=result.precision)
        if located is not None:
            check.diverging_step = {"summary": located.summary, **located.as_dict()}
    return check
