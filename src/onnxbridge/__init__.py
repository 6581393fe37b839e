"""onnxbridge: take a scikit-learn model to ONNX Runtime and prove the copy is faithful and fast.

The Python API is the surface the CLI uses: one entry point per step of the workflow (train,
convert, inspect, predict, validate, bench, tune, serve, score), its result type, and the
exception tree::

    from onnxbridge import Predictor, convert_bundle, train_bundle, validate_bundle

    bundle, result = train_bundle("iris", "RandomForestClassifier(n_estimators=10)", "runs/iris")
    convert_bundle(bundle)
    Predictor(bundle.onnx_path).predict(frame).to_frame()
    validate_bundle(bundle).verdict  # "EQUIVALENT"

Everything else is importable from its own module (``onnxbridge.data``, ``onnxbridge.validate``,
``onnxbridge.bench``, ...). ``import onnxbridge`` is cheap: a name's module (and ONNX Runtime,
scikit-learn, ...) is imported the first time the name is used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from onnxbridge.errors import (
    AcceleratorError,
    BadRowError,
    BundleError,
    ClusterError,
    ConversionError,
    ConverterRegistryError,
    DataError,
    InferenceError,
    MissingConverterError,
    ModelNotFittedError,
    ModelSpecError,
    OnnxbridgeError,
    OnnxModelError,
    SchemaMismatchError,
    SessionSettingsError,
    UnsafeModelFileError,
)

if TYPE_CHECKING:
    from onnxbridge._inspection import ModelSummary, inspect_model
    from onnxbridge._score import PartResult, ScoreResult, score
    from onnxbridge.bench import BenchReport, bench_model
    from onnxbridge.bundle import Bundle, load_estimator, save_estimator, train_bundle
    from onnxbridge.convert import ConversionResult, convert_bundle, convert_estimator
    from onnxbridge.runtime import PredictionResult, Predictor, SessionSettings
    from onnxbridge.serve import create_app
    from onnxbridge.train import TrainResult
    from onnxbridge.tune import TuneReport, tune_model
    from onnxbridge.validate import ValidationReport, validate_bundle, validate_model

    __version__: str

__all__ = [
    "AcceleratorError",
    "BadRowError",
    "BenchReport",
    "Bundle",
    "BundleError",
    "ClusterError",
    "ConversionError",
    "ConversionResult",
    "ConverterRegistryError",
    "DataError",
    "InferenceError",
    "MissingConverterError",
    "ModelNotFittedError",
    "ModelSpecError",
    "ModelSummary",
    "OnnxModelError",
    "OnnxbridgeError",
    "PartResult",
    "PredictionResult",
    "Predictor",
    "SchemaMismatchError",
    "ScoreResult",
    "SessionSettings",
    "SessionSettingsError",
    "TrainResult",
    "TuneReport",
    "UnsafeModelFileError",
    "ValidationReport",
    "bench_model",
    "convert_bundle",
    "convert_estimator",
    "create_app",
    "inspect_model",
    "load_estimator",
    "save_estimator",
    "score",
    "train_bundle",
    "tune_model",
    "validate_bundle",
    "validate_model",
]

# Where each workflow name lives, imported on first use (the errors above are imported now: they
# need nothing).
_LAZY: dict[str, str] = {
    "BenchReport": "onnxbridge.bench",
    "Bundle": "onnxbridge.bundle",
    "ConversionResult": "onnxbridge.convert",
    "ModelSummary": "onnxbridge._inspection",
    "PartResult": "onnxbridge._score",
    "PredictionResult": "onnxbridge.runtime",
    "Predictor": "onnxbridge.runtime",
    "ScoreResult": "onnxbridge._score",
    "SessionSettings": "onnxbridge.runtime",
    "TrainResult": "onnxbridge.train",
    "TuneReport": "onnxbridge.tune",
    "ValidationReport": "onnxbridge.validate",
    "bench_model": "onnxbridge.bench",
    "convert_bundle": "onnxbridge.convert",
    "convert_estimator": "onnxbridge.convert",
    "create_app": "onnxbridge.serve",
    "inspect_model": "onnxbridge._inspection",
    "load_estimator": "onnxbridge.bundle",
    "save_estimator": "onnxbridge.bundle",
    "score": "onnxbridge._score",
    "train_bundle": "onnxbridge.bundle",
    "tune_model": "onnxbridge.tune",
    "validate_bundle": "onnxbridge.validate",
    "validate_model": "onnxbridge.validate",
}

# Names that were once importable from ``onnxbridge`` and now live only in their module, so that
# old code gets told where to import them from.
_MOVED: dict[str, tuple[str, ...]] = {
    "onnxbridge.bench": ("SpeedComparison", "Timing", "compare_speed", "measure"),
    "onnxbridge.convert": (
        "ConverterSpec",
        "ModelMetadata",
        "OpsetChoice",
        "choose_opsets",
        "read_metadata",
        "register_converter",
        "registered_converters",
    ),
    "onnxbridge.coverage": ("CoverageReport", "CoverageResult", "run_coverage"),
    "onnxbridge.data": ("Dataset", "FeatureSchema", "FeatureSpec", "load_dataset", "read_table"),
    "onnxbridge.errors": (
        "CoverageError",
        "InferenceRequestError",
        "MalformedRequestError",
        "ModelLoadError",
        "ModelNotFoundError",
        "ModelNotReadyError",
        "RepositoryError",
        "RequestTooLargeError",
        "ServeSettingsError",
    ),
    "onnxbridge.runtime": ("TuningSpec",),
    "onnxbridge.train": ("fit_model", "parse_model_spec"),
    "onnxbridge.validate": (
        "GoldenReport",
        "OutputComparison",
        "ProbeSpec",
        "Tolerance",
        "check_golden",
        "compare_predictions",
        "write_golden",
    ),
}


def __getattr__(name: str) -> Any:
    """Import a public name's module the first time the name is used."""
    if name == "__version__":
        return _version()
    module = _LAZY.get(name)
    if module is None:
        for home, names in _MOVED.items():
            if name in names:
                raise AttributeError(
                    f"onnxbridge.{name} is not part of the top-level API; "
                    f"use `from {home} import {name}`"
                )
        raise AttributeError(f"module 'onnxbridge' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next use is a plain attribute read
    return value


def __dir__() -> list[str]:
    return sorted({*__all__, "__version__"})


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("onnxbridge")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree without install
        return "0.0.0"
