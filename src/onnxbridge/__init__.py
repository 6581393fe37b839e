"""onnxbridge: take a scikit-learn model to ONNX Runtime and prove the copy is faithful and fast.

The Python API is the surface the CLI uses::

    from onnxbridge import train_bundle, convert_bundle, Predictor, validate_bundle

    bundle, result = train_bundle("iris", "RandomForestClassifier(n_estimators=10)", "runs/iris")
    convert_bundle(bundle)
    Predictor(bundle.onnx_path).predict(frame).to_frame()
    validate_bundle(bundle).verdict  # "EQUIVALENT"
"""

from importlib.metadata import PackageNotFoundError, version

from onnxbridge.bench import (
    BenchReport,
    SpeedComparison,
    Timing,
    TuneReport,
    bench_model,
    compare_speed,
    measure,
    tune_model,
)
from onnxbridge.bundle import Bundle, load_estimator, save_estimator, train_bundle
from onnxbridge.convert import (
    ConversionResult,
    ConverterSpec,
    ModelMetadata,
    OpsetChoice,
    choose_opsets,
    convert_bundle,
    convert_estimator,
    read_metadata,
    register_converter,
    registered_converters,
)
from onnxbridge.coverage import CoverageReport, CoverageResult, run_coverage
from onnxbridge.data import Dataset, FeatureSchema, FeatureSpec, load_dataset, read_table
from onnxbridge.errors import (
    AcceleratorError,
    BadRowError,
    BundleError,
    ClusterError,
    ConversionError,
    ConverterRegistryError,
    CoverageError,
    DataError,
    InferenceError,
    InferenceRequestError,
    MalformedRequestError,
    MissingConverterError,
    ModelLoadError,
    ModelNotFittedError,
    ModelNotFoundError,
    ModelNotReadyError,
    ModelSpecError,
    OnnxbridgeError,
    OnnxModelError,
    RepositoryError,
    RequestTooLargeError,
    SchemaMismatchError,
    ServeSettingsError,
    SessionSettingsError,
    UnsafeModelFileError,
)
from onnxbridge.inspection import ModelSummary, inspect_model
from onnxbridge.runtime import PredictionResult, Predictor, SessionSettings, TuningSpec
from onnxbridge.score import PartResult, ScoreResult, score
from onnxbridge.train import TrainResult, fit_model, parse_model_spec
from onnxbridge.validate import (
    GoldenReport,
    OutputComparison,
    ProbeSpec,
    Tolerance,
    ValidationReport,
    check_golden,
    compare_predictions,
    validate_bundle,
    validate_model,
    write_golden,
)

try:
    __version__ = version("onnxbridge")
except PackageNotFoundError:  # pragma: no cover - running from a source tree without install
    __version__ = "0.0.0"

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
    "ConverterSpec",
    "CoverageError",
    "CoverageReport",
    "CoverageResult",
    "DataError",
    "Dataset",
    "FeatureSchema",
    "FeatureSpec",
    "GoldenReport",
    "InferenceError",
    "InferenceRequestError",
    "MalformedRequestError",
    "MissingConverterError",
    "ModelLoadError",
    "ModelMetadata",
    "ModelNotFittedError",
    "ModelNotFoundError",
    "ModelNotReadyError",
    "ModelSpecError",
    "ModelSummary",
    "OnnxModelError",
    "OnnxbridgeError",
    "OpsetChoice",
    "OutputComparison",
    "PartResult",
    "PredictionResult",
    "Predictor",
    "ProbeSpec",
    "RepositoryError",
    "RequestTooLargeError",
    "SchemaMismatchError",
    "ScoreResult",
    "ServeSettingsError",
    "SessionSettings",
    "SessionSettingsError",
    "SpeedComparison",
    "Timing",
    "Tolerance",
    "TrainResult",
    "TuneReport",
    "TuningSpec",
    "UnsafeModelFileError",
    "ValidationReport",
    "__version__",
    "bench_model",
    "check_golden",
    "choose_opsets",
    "compare_predictions",
    "compare_speed",
    "convert_bundle",
    "convert_estimator",
    "fit_model",
    "inspect_model",
    "load_dataset",
    "load_estimator",
    "measure",
    "parse_model_spec",
    "read_metadata",
    "read_table",
    "register_converter",
    "registered_converters",
    "run_coverage",
    "save_estimator",
    "score",
    "train_bundle",
    "tune_model",
    "validate_bundle",
    "validate_model",
    "write_golden",
]
