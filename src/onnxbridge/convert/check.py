"""What convert proves before it writes: the ONNX graph answers as the source model does.

After a model is converted, and before it is written, :func:`check_conversion` runs the sample
rows and a few *probe rows* through scikit-learn and ONNX Runtime and compares the outputs by
role with validate's default tolerances (:mod:`onnxbridge.convert.agreement`; labels exactly).
Probe rows, built from the sample rows, one column changed at a time:

- ``missing``: each column missing (NaN; for text, a missing value), where the source model
  accepts it (a column whose missing value scikit-learn refuses is left out, and said so);
- ``unseen``: each text column holding a category never seen in training, where the source
  model accepts it;
- ``extremes``: each numeric column at the lowest and the highest value in the sample.

At most :data:`MAX_PROBE_ROWS` probe rows are built (a column at a time, in column order). When
the outputs differ, the pipeline step that diverges is found
(:func:`onnxbridge.convert.steps.locate_diverging_step`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from onnxbridge.convert.agreement import DEFAULT_TOLERANCES, compare_output, role_tolerance
from onnxbridge.convert.steps import (
    locate_diverging_step,
    onnx_outputs,
    onnx_session,
    source_outputs,
)
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
        ok: scikit-learn and ONNX Runtime agree on every row compared.
        sample_rows: sample rows compared.
        probe_rows: probe rows compared, by kind (``missing``, ``unseen``, ``extremes``).
        differing_rows: rows where any output differs.
        outputs: per output role that differs, ``{"rows": n, "max_abs_diff": x or None}``.
        diverging_step: where a pipeline diverges (``{"first_diverging_step", "step_name",
            "step_class", "summary", ...}``), when it does and could be found.
        skipped: probe rows that could not be built or run, and why.
        failures: probe kinds on which ONNX Runtime failed where scikit-learn answered.
    """

    ok: bool
    sample_rows: int
    probe_rows: dict[str, int] = field(default_factory=dict)
    differing_rows: int = 0
    outputs: dict[str, dict[str, Any]] = field(default_factory=dict)
    diverging_step: dict[str, Any] | None = None
    skipped: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    @property
    def rows(self) -> int:
        """Rows compared in all."""
        return self.sample_rows + sum(self.probe_rows.values())

    def summary(self) -> str:
        """One line, e.g. ``0 of 130 rows differ from scikit-learn (100 sample + 30 probe)``."""
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


def _one_column_blocks(sample: pd.DataFrame, kind: str) -> list[tuple[str, pd.DataFrame]]:
    """Per column, the probe rows of ``kind`` that change only that column."""
    blocks: list[tuple[str, pd.DataFrame]] = []
    for position, name in enumerate(sample.columns):
        column = sample[name]
        if kind == "missing":
            block = _base(sample.iloc[position % len(sample) :], 1)
            if not _text(column):
                block[name] = block[name].astype(np.float64)
            block[name] = np.nan
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
        blocks.append((name, block))
    return blocks


def _probe_blocks(
    estimator: Any, sample: pd.DataFrame, roles: dict[str, str]
) -> tuple[dict[str, pd.DataFrame], list[str]]:
    """Probe rows by kind that scikit-learn answers, and what was left out."""
    frames: dict[str, pd.DataFrame] = {}
    skipped: list[str] = []
    budget = MAX_PROBE_ROWS
    for kind in PROBE_KINDS:
        blocks = _one_column_blocks(sample, kind)
        kept: list[tuple[str, pd.DataFrame]] = []
        for name, block in blocks:
            if budget < len(block):
                skipped.append(f"{kind} probes stop at {MAX_PROBE_ROWS} rows (from {name!r} on)")
                break
            kept.append((name, block))
            budget -= len(block)
        if not kept:
            continue
        combined = pd.concat([b for _, b in kept], ignore_index=True)
        try:
            # One call for all columns; on refusal, column by column to keep what is accepted.
            source_outputs(estimator, combined, roles)
        except Exception:
            accepted, refused = [], []
            for name, block in kept:
                try:
                    source_outputs(estimator, block, roles)
                    accepted.append(block)
                except Exception:
                    refused.append(name)
            shown = ", ".join(repr(n) for n in refused[:5]) + (" …" if len(refused) > 5 else "")
            what = {
                "missing": "missing values",
                "unseen": "unseen categories",
                "extremes": "the ends of the sample's range",
            }[kind]
            skipped.append(f"{kind}: scikit-learn refuses {what} in {shown}")
            if not accepted:
                continue
            combined = pd.concat(accepted, ignore_index=True)
        frames[kind] = combined
    return frames, skipped


def _failed_run(kind: str, exc: Exception) -> str:
    return (
        f"onnxruntime failed on the {kind} probe rows where scikit-learn answered: "
        f"{first_line(exc)}"
    )


def check_conversion(estimator: Any, result: Any, sample: pd.DataFrame) -> ConversionCheck:
    """Compare scikit-learn and ONNX Runtime on the sample rows and probe rows.

    Args:
        estimator: the fitted source model.
        result: its :class:`~onnxbridge.convert.core.ConversionResult`.
        sample: the sample rows, in the model's input columns.

    Returns:
        What was compared and found; ``ok`` is False when any output differs.
    """
    roles = dict(result.metadata.outputs)
    sample = sample.head(MAX_SAMPLE_ROWS).reset_index(drop=True)
    blocks: dict[str, pd.DataFrame] = {}
    skipped: list[str] = []
    try:
        source_outputs(estimator, sample, roles)
        blocks["sample"] = sample
    except Exception as exc:  # a source model that refuses its own sample rows
        skipped.append(f"sample: scikit-learn refuses the sample rows ({first_line(exc)})")
    probes, probe_skipped = _probe_blocks(estimator, sample, roles)
    blocks.update(probes)
    skipped.extend(probe_skipped)
    check = ConversionCheck(
        ok=True,
        sample_rows=len(blocks.get("sample", [])),
        probe_rows={kind: len(frame) for kind, frame in probes.items()},
        skipped=skipped,
    )
    session = onnx_session(result.model)
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
