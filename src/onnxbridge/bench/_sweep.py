"""``bench --sweep PARAM=V1,V2,...``: retrain the bundle's model once per value, convert, time.

Each variant is the bundle's model spec with one parameter changed, fitted on the same data and
split as the bundle's card records (same source, checked by its hash; same test size, seed and
stratification), converted the way ``convert`` does (the bundle's opset when it recorded one) and
timed against scikit-learn like the bundle's own model. This answers "how does the speed-up change
with the model's size": the variants' file sizes, conversion and load times come with them.

Values are Python literals (``10``, ``0.1``, ``None``, ``'sqrt'``); anything else is taken as a
string (``max_features=sqrt,log2``). For a pipeline, a plain parameter name applies to its last
step (``n_estimators`` means ``randomforestclassifier__n_estimators``).
"""

from __future__ import annotations

import ast
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from onnxbridge.bundle import Bundle
from onnxbridge.errors import BundleError, DataError, ModelSpecError

__all__ = ["SweepSpec", "fit_variant", "parse_sweep", "run_sweep", "sweep_steps"]

_SWEEP_ENGINES = 3  # sklearn, ort-default, onnxbridge


@dataclass(frozen=True)
class SweepSpec:
    """One parameter and the values to try."""

    parameter: str
    values: tuple[Any, ...]


def _literal(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def parse_sweep(text: str) -> SweepSpec:
    """``"n_estimators=10,50,100"`` → :class:`SweepSpec`.

    Raises:
        DataError: not of the form ``PARAM=V1,V2,...``.
    """
    name, sep, values = text.partition("=")
    name = name.strip()
    items = [v.strip() for v in values.split(",") if v.strip()]
    if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) or not items:
        raise DataError(
            f"sweep={text!r} is not PARAM=V1,V2,...; write e.g. sweep=n_estimators=10,50,100",
            arguments=("sweep",),
        )
    return SweepSpec(parameter=name, values=tuple(_literal(v) for v in items))


def sweep_steps(spec: SweepSpec, batch_sizes: list[int], repeat: int) -> int:
    """How many progress steps :func:`run_sweep` takes."""
    return len(spec.values) * _SWEEP_ENGINES * len(batch_sizes) * (repeat + 1)


def _training_data(bundle: Bundle) -> tuple[pd.DataFrame, pd.DataFrame, pd.Series]:
    """The bundle's training rows (re-split as its card says), its holdout rows and targets."""
    from onnxbridge.data import load_dataset, split_dataset

    data = bundle.card.get("data", {})
    split = bundle.card.get("split", {})
    if data.get("kind") == "builtin":
        dataset = load_dataset(data["name"])
    elif data.get("kind") == "file":
        if not Path(str(data.get("path", ""))).is_file():
            raise BundleError(
                f"the bundle was trained on {data.get('path')!r}, which is gone; sweep= "
                "retrains on the same data, so put the file back",
                arguments=("sweep",),
            )
        dataset = load_dataset(data["path"], target=bundle.target)
    else:
        raise BundleError(
            "the bundle's card does not say what data it was trained on, so sweep= cannot "
            "retrain it; train the bundle with `onnxbridge train`",
            arguments=("sweep",),
        )
    if data.get("sha256") and dataset.source.get("sha256") != data["sha256"]:
        raise BundleError(
            f"the data {data.get('name') or data.get('path')!r} changed since the bundle was "
            "trained (sha256 differs), so a retrained variant would not be comparable"
        )
    X_train, X_test, y_train, _ = split_dataset(
        dataset,
        test_size=float(split.get("test_size", 0.3)),
        seed=int(split.get("seed", 42)),
        stratify=bool(split.get("stratify", False)),
    )
    return X_train, X_test, y_train


def _set_param(estimator: Any, name: str, value: Any) -> str:
    params = estimator.get_params()
    key = name
    if key not in params and hasattr(estimator, "steps"):
        key = f"{estimator.steps[-1][0]}__{name}"
    if key not in params:
        final = estimator.steps[-1][1] if hasattr(estimator, "steps") else estimator
        known = sorted(p for p in final.get_params(deep=False))
        raise ModelSpecError(
            f"{type(final).__name__} has no parameter {name!r}; sweep= takes one of: "
            f"{', '.join(known)}",
            arguments=("sweep",),
        )
    try:
        estimator.set_params(**{key: value})
    except (ValueError, TypeError) as exc:
        raise ModelSpecError(f"cannot set {name}={value!r}: {exc}") from exc
    return key


def fit_variant(bundle: Bundle, parameter: str, value: Any) -> tuple[Any, pd.DataFrame, float]:
    """The bundle's model refitted with ``parameter=value``; with its holdout rows and fit time.

    Raises:
        ModelSpecError: unknown parameter or a value the estimator refuses.
        BundleError: the training data cannot be found as it was.
    """
    import time

    from onnxbridge.errors import first_line
    from onnxbridge.train import parse_model_spec

    spec = bundle.card.get("model", {}).get("spec")
    if not spec:
        raise BundleError(
            "the bundle's card has no model spec, so sweep= cannot retrain it; train the "
            "bundle with `onnxbridge train`",
            arguments=("sweep",),
        )
    estimator = parse_model_spec(spec)
    _set_param(estimator, parameter, value)
    X_train, X_test, y_train = _training_data(bundle)
    start = time.perf_counter()
    try:
        estimator.fit(X_train, y_train)
    except (ValueError, TypeError) as exc:
        raise ModelSpecError(
            f"fitting with {parameter}={value!r} failed: {first_line(exc)}"
        ) from exc
    return estimator, X_test, time.perf_counter() - start


def run_sweep(
    bundle: Bundle,
    spec: SweepSpec,
    rows: pd.DataFrame,
    batch_sizes: list[int],
    *,
    repeat: int = 7,
    min_time: float = 0.05,
    progress: Any = None,
    done_before: int = 0,
    total: int | None = None,
) -> dict[str, Any]:
    """Fit, convert and time one variant per value; returns the report's ``sweep`` entry.

    Each variant is timed with three engines: ``sklearn``, ``ort-default`` and ``onnxbridge``
    (the variant is not tuned, so ``onnxbridge`` runs its default settings).
    """
    from onnxbridge.bench._run import bench_engines, model_facts
    from onnxbridge.convert import convert_estimator

    opset = bundle.card.get("conversion", {}).get("target_opsets", {}).get("")
    total = total or sweep_steps(spec, batch_sizes, repeat)
    done = done_before
    variants: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="onnxbridge-sweep-") as tmp:
        for value in spec.values:
            estimator, _, fit_seconds = fit_variant(bundle, spec.parameter, value)
            path = Path(tmp) / f"variant-{len(variants)}.onnx"
            result = convert_estimator(estimator, rows.head(100), opset=opset, target=bundle.target)
            result.save(path)
            engines, results = bench_engines(
                path,
                rows,
                batch_sizes,
                estimator=estimator,
                repeat=repeat,
                min_time=min_time,
                progress=progress,
                label=f"{spec.parameter}={value!r}: ",
                done_before=done,
                total=total,
                with_threads=False,
            )
            done += _SWEEP_ENGINES * len(batch_sizes) * (repeat + 1)
            facts = model_facts(path, estimator=estimator, sample=rows)
            variants.append(
                {
                    "value": value,
                    "fit_seconds": fit_seconds,
                    "facts": facts.to_dict(),
                    "engines": engines,
                    "results": [r.to_dict() for r in results],
                }
            )
    return {"parameter": spec.parameter, "values": list(spec.values), "variants": variants}
