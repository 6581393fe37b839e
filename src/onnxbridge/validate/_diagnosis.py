"""Diagnosis of a DIVERGENT verdict: what diverged, why, and the concrete next step.

- **pipeline**: every prefix ``Pipeline(steps[:k])`` is converted and its ``transformed`` output
  compared with scikit-learn's ``transform`` on the rows that diverged; the first prefix that
  differs names the step whose conversion is wrong (the final step when none does). The rule is
  :func:`onnxbridge.convert._steps.locate_diverging_step`, which convert uses too.
- **trees**: the rows whose decision flipped are matched with the split thresholds they sit
  on; a row is explained by float32 rounding when its value and the threshold fall on different
  sides once cast to float32. The model is then converted again with ``precision="double"`` and
  the flipped rows re-checked, to show whether that fixes it.
- **missing-values**: only the rows with NaN diverge: the converter lost the learned
  missing-value routing.
- **neighbours**: a k-neighbours model whose diverging rows have several training rows at the
  k-th neighbour's distance: which of the tied rows count decides the answer, and the ONNX graph
  kept other ones than scikit-learn (scikit-learn's own choice among them is asked with
  ``kneighbors(rows, k + 1)``).
- **runtime**: ONNX Runtime and ``onnx.reference`` disagree: a runtime problem, not a conversion.
- **batch**: a row's result depends on the rows scored with it.
- **golden**: the stored golden predictions changed (see :mod:`onnxbridge.validate._golden`).
"""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from onnxbridge.errors import OnnxbridgeError, first_line
from onnxbridge.runtime import Predictor
from onnxbridge.validate._compare import Tolerance, compare_output, role_tolerance
from onnxbridge.validate._probes import SplitThreshold, tree_thresholds
from onnxbridge.validate._report import Diagnosis
from onnxbridge.validate._runtimes import (
    ONNXRUNTIME,
    REFERENCE,
    SKLEARN,
    OnnxRuntime,
    SklearnRuntime,
)

__all__ = ["diagnose_runs", "double_precision_available", "golden_diagnosis"]

_SK_ORT = f"{SKLEARN}~{ONNXRUNTIME}"
_SK_REF = f"{SKLEARN}~{REFERENCE}"
_ORT_REF = f"{ONNXRUNTIME}~{REFERENCE}"


def _conversion_bad(run: Any) -> np.ndarray | None:
    """Rows where scikit-learn and ONNX Runtime (else the reference) disagree."""
    for name in (_SK_ORT, _SK_REF):
        if name in run.bad and run.bad[name].any():
            return run.bad[name]
    return None


def _final_step(estimator: Any) -> Any:
    while hasattr(estimator, "steps"):
        estimator = estimator.steps[-1][1]
    return estimator


def double_precision_available() -> bool:
    """Whether ``convert_estimator`` takes ``precision="double"`` at all (signature check)."""
    import inspect

    from onnxbridge.convert import convert_estimator

    return "precision" in inspect.signature(convert_estimator).parameters


def _session(model: Any) -> Predictor:
    return Predictor(model.SerializeToString())


# ----------------------------------------------------------------------------------- pipeline
def _pipeline_diagnosis(
    estimator: Any, runs: Sequence[Any], sample: pd.DataFrame, tolerances: Mapping[str, Tolerance]
) -> Diagnosis | None:
    from onnxbridge.convert._steps import locate_diverging_step

    steps = list(getattr(estimator, "steps", []))
    if len(steps) < 2:
        return None
    failing = [(run, bad) for run in runs if (bad := _conversion_bad(run)) is not None]
    if not failing:
        return None
    run, bad = failing[0]
    rows = run.frame[bad].reset_index(drop=True)
    located = locate_diverging_step(
        estimator, rows, sample, tolerances.get("transformed", Tolerance())
    )
    if located is None:
        return None
    details = [
        f"{int(bad.sum())} rows of probe set {run.result.name!r} diverge; checking each "
        f"prefix of the {len(steps)} steps on them"
    ]
    for prefix in located.prefixes:
        label = f"step {prefix.step} {prefix.name!r} ({prefix.cls})"
        if not prefix.checked:
            details.append(f"{label}: the prefix cannot be checked ({prefix.error})")
        else:
            details.append(
                f"{label}: {'agrees' if prefix.ok else 'DIVERGES'} "
                f"(max |Δ| {prefix.max_abs_diff:.3g} on {prefix.n_rows} rows)"
            )
    next_step = (
        f"fix or replace the ONNX converter of {located.cls} (see "
        "onnxbridge.convert.registered_converters() and docs/convert.md), or validate "
        f"Pipeline(steps[:{located.step}]) alone with validate_model to reproduce it"
    )
    return Diagnosis(
        kind="pipeline",
        summary=located.summary,
        details=details,
        next_step=next_step,
        data=located.as_dict(),
    )


# -------------------------------------------------------------------------------------- trees
def _rounding_flips(value: float, split: SplitThreshold) -> bool:
    """Whether casting to float32 moves ``value`` to the other side of the split."""
    if not np.isfinite(value):
        return False
    v32 = float(np.float32(value))
    t32 = float(np.float32(split.threshold))
    if split.left_is_le:
        sides = {value <= split.threshold, v32 <= split.threshold, v32 <= t32}
    else:
        sides = {value < split.threshold, v32 < split.threshold, v32 < t32}
    return len(sides) > 1


def _near(value: float, split: SplitThreshold, steps: int = 4) -> bool:
    if not np.isfinite(value):
        return False
    t32 = np.float32(split.threshold)
    spacing = float(np.spacing(np.abs(t32))) or float(np.finfo(np.float32).tiny)
    return abs(value - split.threshold) <= steps * spacing


def _tree_diagnosis(
    estimator: Any,
    runs: Sequence[Any],
    sample: pd.DataFrame,
    tolerances: Mapping[str, Tolerance],
    predictor: Predictor,
) -> Diagnosis | None:
    splits = tree_thresholds(estimator) if estimator is not None else None
    if not splits:
        return None
    names = list(sample.columns)
    by_feature: dict[int, list[SplitThreshold]] = {}
    for split in splits:
        by_feature.setdefault(split.feature, []).append(split)
    flipped_frames = []
    explained = total = 0
    counts: Counter[tuple[str, float]] = Counter()
    caught_by = []
    for run in runs:
        if run.result.name == "missing":
            continue
        bad = _conversion_bad(run)
        if bad is None:
            continue
        caught_by.append(run.result.name)
        rows = run.frame[bad]
        flipped_frames.append(rows)
        for _, row in rows.iterrows():
            total += 1
            hit = False
            for feature, feature_splits in by_feature.items():
                if feature >= len(names):
                    continue
                value = float(row.iloc[feature]) if pd.notna(row.iloc[feature]) else np.nan
                for split in feature_splits:
                    if _rounding_flips(value, split) or _near(value, split):
                        counts[(names[feature], split.threshold)] += 1
                        hit = hit or _rounding_flips(value, split)
            explained += int(hit)
    if total == 0:
        return None
    flipped = pd.concat(flipped_frames, ignore_index=True)
    top = counts.most_common(5)
    details = [
        f"{total} rows diverge (probe sets: {', '.join(caught_by)}); {explained} of them have a "
        "feature that float32 rounding moves across a split threshold"
    ]
    for (column, threshold), n in top:
        t32 = float(np.float32(threshold))
        details.append(
            f"feature {column!r}, threshold {threshold!r} (float32 {t32!r}, spacing "
            f"{float(np.spacing(np.float32(abs(threshold)))):.3g}): {n} rows"
        )
    explained_all = explained == total
    recheck = _recheck_double(estimator, sample, flipped, tolerances)
    details.append(recheck["detail"])
    if recheck.get("fixed"):
        next_step = (
            "convert with --precision double (Python: convert_estimator(..., precision='double')); "
            "the float64 graph keeps every decision"
        )
    elif explained_all:
        next_step = (
            "the features are too large for float32's 7 digits near the thresholds: centre or "
            "rescale them before training (e.g. subtract their typical value), or convert with "
            "--precision double (Python: precision='double') once it is available for this model"
        )
    else:
        next_step = (
            "not every flip is float32 rounding: inspect the worst rows in the report against "
            "the trees (onnxbridge inspect MODEL.onnx), and check the converter of "
            f"{type(_final_step(estimator)).__name__}"
        )
    summary = f"{total} tree decisions flip between scikit-learn and ONNX; " + (
        "float32 rounding explains all of them"
        if explained_all
        else f"float32 rounding explains {explained}"
    )
    return Diagnosis(
        kind="trees",
        summary=summary,
        details=details,
        next_step=next_step,
        data={
            "flipped_rows": total,
            "explained_by_float32": explained,
            "thresholds": [{"feature": f, "threshold": t, "rows": n} for (f, t), n in top],
            "double_precision": {k: v for k, v in recheck.items() if k != "detail"},
            "probe_sets": caught_by,
        },
    )


def _recheck_double(
    estimator: Any, sample: pd.DataFrame, rows: pd.DataFrame, tolerances: Mapping[str, Tolerance]
) -> dict[str, Any]:
    """Convert with ``precision="double"`` and compare the flipped rows again."""
    from onnxbridge.convert import convert_estimator

    if not double_precision_available():
        return {"available": False, "detail": "double precision not available in this version"}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            converted = convert_estimator(
                estimator, sample.head(100), precision="double", allow_divergent=True
            )
    except OnnxbridgeError as exc:
        return {
            "available": False,
            "error": first_line(exc),
            "detail": f"double precision not available for this model: {first_line(exc)}",
        }
    if getattr(converted, "precision", "double") != "double":
        return {
            "available": False,
            "detail": "double precision not available: the converter kept float",
        }
    ort = OnnxRuntime(_session(converted.model))
    try:
        onnx_out = ort.run(rows)
        sk_out = SklearnRuntime(estimator, ort.roles).run(rows, like=onnx_out)
    except OnnxbridgeError as exc:
        # The rows read from a file can give the re-converted graph another schema than the
        # model's (a category column of numbers read as numbers): say so, do not stop validate.
        return {
            "available": False,
            "error": first_line(exc),
            "detail": f"the re-check in double precision could not run: {first_line(exc)}",
        }
    still = 0
    for role in onnx_out:
        if role in sk_out:
            _, score = compare_output(
                role, sk_out[role], onnx_out[role], role_tolerance(tolerances, role)
            )
            still = max(still, int((score > 0).sum()))
    fixed = still == 0
    return {
        "available": True,
        "fixed": fixed,
        "still_diverging": still,
        "detail": (
            f"re-checked with precision double: {len(rows) - still} of {len(rows)} diverging rows "
            f"now agree{' (fixed)' if fixed else ''}"
        ),
    }


# --------------------------------------------------------------------------------- neighbours
def _k_neighbours(estimator: Any) -> Any | None:
    """The final k-neighbours model of ``estimator`` (a pipeline's last step), or None."""
    from sklearn.neighbors import (
        KNeighborsClassifier,
        KNeighborsRegressor,
        KNeighborsTransformer,
        NearestNeighbors,
    )

    final = _final_step(estimator)
    kinds = KNeighborsClassifier | KNeighborsRegressor | KNeighborsTransformer | NearestNeighbors
    return final if isinstance(final, kinds) else None


def _tied_rows(estimator: Any, final: Any, rows: pd.DataFrame) -> np.ndarray | None:
    """Per row, whether the k-th and (k+1)-th nearest training rows are equally far (scikit-
    learn's own distances); None when scikit-learn cannot say (too few training rows)."""
    from sklearn.pipeline import Pipeline

    k = int(final.n_neighbors)
    if k + 1 > int(final.n_samples_fit_):
        return None
    steps = list(getattr(estimator, "steps", []))
    features = Pipeline(steps[:-1]).transform(rows) if len(steps) > 1 else rows
    distances, _ = final.kneighbors(features, n_neighbors=k + 1)
    return distances[:, k - 1] == distances[:, k]


def _neighbours_diagnosis(estimator: Any, runs: Sequence[Any]) -> Diagnosis | None:
    final = _k_neighbours(estimator)
    if final is None:
        return None
    diverging = tied = 0
    names = []
    for run in runs:
        if run.result.ok or not run.bad:
            continue
        bad = np.logical_or.reduce([np.asarray(mask, dtype=bool) for mask in run.bad.values()])
        rows = run.frame[bad]
        rows = rows[~rows.isna().any(axis=1)]  # scikit-learn refuses NaN in neighbour models
        if rows.empty:
            continue
        flags = _tied_rows(estimator, final, rows)
        if flags is None:
            return None
        names.append(run.result.name)
        diverging += len(rows)
        tied += int(flags.sum())
    if tied == 0:
        return None
    k = int(final.n_neighbors)
    method = getattr(final, "_fit_method", final.algorithm)
    details = [
        f"{tied} of {diverging} diverging rows (probe sets: {', '.join(names)}) have ties in "
        f"neighbour distances: neighbours {k} and {k + 1} are equally far, "
        "so which of the tied rows count changes the answer",
        f"{type(final).__name__}(n_neighbors={k}, weights={getattr(final, 'weights', None)!r}) "
        f"searches with {method!r}",
    ]
    next_step = (
        "convert the model again with this version of onnxbridge (its k-neighbours converters "
        "keep the tied rows scikit-learn keeps; see 'the neighbours' tie rule' in docs/convert.md)"
    )
    if method == "brute":
        next_step += (
            "; with algorithm='brute' scikit-learn itself picks among tied rows by thread count "
            "and batch size when it has more than 256 training rows: compare with scikit-learn "
            "on one thread (threadpoolctl.threadpool_limits(1)) or refit with "
            "algorithm='kd_tree'"
        )
    return Diagnosis(
        kind="neighbours",
        summary=f"ties in neighbour distances: {tied} of {diverging} diverging rows have several "
        f"training rows at the distance of neighbour {k}, and the ONNX graph kept other ones "
        "than scikit-learn",
        details=details,
        next_step=next_step,
        data={"tied_rows": tied, "diverging_rows": diverging, "probe_sets": names, "k": k},
    )


# ----------------------------------------------------------------------------- other patterns
def _missing_diagnosis(runs: Sequence[Any]) -> Diagnosis | None:
    """Missing-value routing lost: every row that diverges holds a NaN, and some do."""
    failing = [r for r in runs if r.result.cause in ("conversion", "conversion+runtime")]
    if not failing:
        return None
    columns: Counter[str] = Counter()
    n_bad = 0
    for run in failing:
        bad = _conversion_bad(run)
        if bad is None:
            continue
        rows = run.frame[bad]
        if not rows.isna().any(axis=1).all():
            return None  # a row without NaN diverges too: not (only) missing values
        n_bad += len(rows)
        for name in run.frame.columns:
            count = int(rows[name].isna().sum())
            if count:
                columns[str(name)] += count
    if n_bad == 0:
        return None
    names = [r.result.name for r in failing]
    details = [
        f"{n_bad} rows diverge (probe sets: {', '.join(names)}), every one of them with a NaN; "
        "no row without NaN diverges"
    ]
    details += [f"NaN in {name!r}: {n} diverging rows" for name, n in columns.most_common(5)]
    if all(not r.result.gating for r in failing):
        details.append(
            "a warning, not part of the verdict: the rows given hold no NaN, so the model never "
            "learned where NaN goes (scikit-learn sends it to the child with more training "
            "samples; the ONNX graph does not); pass --missing-values gate (Python: "
            "missing_values='gate') to make it count"
        )
    return Diagnosis(
        kind="missing-values",
        summary=(
            "missing-value routing was lost: the ONNX model sends rows with NaN down other "
            "branches than scikit-learn"
        ),
        details=details,
        next_step=(
            "impute missing values before the model (e.g. SimpleImputer first in the pipeline) or "
            "use a converter that keeps the missing-value direction of every split; until then "
            "refuse rows with NaN wherever the ONNX model is served"
        ),
        data={"columns": dict(columns), "rows": n_bad, "probe_sets": names},
    )


def _runtime_diagnosis(runs: Sequence[Any]) -> Diagnosis | None:
    failing = [
        r
        for r in runs
        if r.result.cause in (ONNXRUNTIME, REFERENCE, "runtime", "conversion+runtime")
    ]
    if not failing:
        return None
    details = []
    agrees = {}
    for run in failing:
        pairs = {p.name: p for p in run.result.pairs}
        n = int(run.bad[_ORT_REF].sum()) if _ORT_REF in run.bad else 0
        line = f"probe set {run.result.name!r}: onnxruntime and onnx.reference disagree on {n} rows"
        if _SK_ORT in pairs and _SK_REF in pairs:
            agrees[run.result.name] = (
                "onnxruntime"
                if pairs[_SK_ORT].ok
                else "reference"
                if pairs[_SK_REF].ok
                else "neither"
            )
            line += f"; scikit-learn agrees with {agrees[run.result.name]}"
        between = pairs.get(_ORT_REF)
        if between is not None and between.outputs:
            by_role = {c.name: c for c in between.outputs}
            label = by_role.get("label")
            others = [c for c in between.outputs if c.name != "label"]
            if label is not None and not label.ok and others and all(c.ok for c in others):
                line += (
                    " (only the labels differ; the scores agree within tolerance, so the "
                    "runtimes derive labels from the same scores differently: a tie, or the "
                    "operator's label rule)"
                )
        details.append(line)
    odd = {ONNXRUNTIME: "onnxruntime", REFERENCE: "onnx.reference"}
    cause = failing[0].result.cause
    if cause in odd:
        summary = (
            f"a runtime problem, not a conversion error: {odd[cause]} departs from the other "
            "runtime and from scikit-learn"
        )
    else:
        summary = (
            "a runtime problem: the two ONNX runtimes compute different results for the same graph"
        )
    return Diagnosis(
        kind="runtime",
        summary=summary,
        details=details,
        next_step=(
            "find the operator whose attributes or inputs the runtimes treat differently "
            "(onnxbridge inspect MODEL.onnx lists them), try another --opset, and report the "
            "runtime that departs from the ONNX specification; deploy only on a runtime that "
            "agrees with scikit-learn"
        ),
        data={"probe_sets": [r.result.name for r in failing], "agrees_with_sklearn": agrees},
    )


def _batch_diagnosis(runs: Sequence[Any]) -> Diagnosis | None:
    failing = [r for r in runs if r.result.cause == "batch"]
    if not failing:
        return None
    pairs = [p.name for r in failing for p in r.result.pairs if not p.ok and "[1-row]" in p.b]
    return Diagnosis(
        kind="batch",
        summary="a row's result depends on the batch it is scored in",
        details=[f"{name} differ" for name in pairs],
        next_step=(
            "look for operators that mix rows (normalisation over the batch axis, a reshape that "
            "folds N) in onnxbridge inspect MODEL.onnx; score one row at a time until fixed"
        ),
        data={"pairs": pairs},
    )


def golden_diagnosis(golden: Any) -> Diagnosis:
    """The diagnosis for changed golden predictions."""
    changed = [o for o in golden.outputs if not o["ok"]]
    details = [
        f"{o['probe']} / {o['role']}: {o['n_mismatched']} of {o['n_rows']} rows changed, max |Δ| "
        f"{o['max_abs_diff']}"
        for o in changed
    ]
    was = golden.versions_then
    now = golden.versions_now
    moved = [
        f"{k} {was.get(k)} → {now.get(k)}"
        for k in sorted(set(was) | set(now))
        if was.get(k) != now.get(k)
    ]
    details.append("versions changed: " + (", ".join(moved) if moved else "none"))
    return Diagnosis(
        kind="golden",
        summary="the ONNX model's outputs changed since convert stored its golden predictions",
        details=details,
        next_step=(
            "pin the previous versions of the libraries listed, or, if the new outputs are right, "
            "re-run `onnxbridge convert BUNDLE` to store new golden predictions"
        ),
        data={"versions_changed": moved},
    )


def diagnose_runs(
    runs: Sequence[Any],
    *,
    estimator: Any,
    predictor: Predictor,
    sample: pd.DataFrame,
    tolerances: Mapping[str, Tolerance],
) -> list[Diagnosis]:
    """Diagnoses for the failing probe sets of a validation (see the module docstring).

    Args:
        runs: the probe runs (:class:`onnxbridge.validate._core.ProbeRun`).
        estimator: the source model (None: only runtime and batch diagnoses).
        predictor: the ONNX model.
        sample: rows with the model's columns (the holdout), for re-conversions.
        tolerances: role → tolerance used.
    """
    found: list[Diagnosis] = []
    neighbours = _neighbours_diagnosis(estimator, runs) if estimator is not None else None
    if neighbours is not None:
        found.append(neighbours)
    for diagnosis in (_runtime_diagnosis(runs), _batch_diagnosis(runs)):
        if diagnosis is not None:
            found.append(diagnosis)
    conversion = [r for r in runs if r.result.cause in ("conversion", "conversion+runtime")]
    if conversion and estimator is not None:
        missing = _missing_diagnosis(runs)
        if missing is not None:
            found.append(missing)
        else:
            for diagnosis in (
                _pipeline_diagnosis(estimator, runs, sample, tolerances),
                _tree_diagnosis(estimator, runs, sample, tolerances, predictor),
            ):
                if diagnosis is not None:
                    found.append(diagnosis)
    if not found:
        names = [r.result.name for r in runs if not r.result.ok]
        found.append(
            Diagnosis(
                kind="unexplained",
                summary=(
                    f"scikit-learn and ONNX differ on probe sets {', '.join(names)}; no known "
                    "pattern matches"
                ),
                details=[
                    f"{r.result.name}: cause {r.result.cause}" for r in runs if not r.result.ok
                ],
                next_step=(
                    "look at the worst rows in reports/validation.html: if only extreme rows "
                    "differ, it may be float32 overflow (try --precision double; Python: "
                    "precision='double'); otherwise "
                    "check the converter of the model"
                ),
            )
        )
    return found
