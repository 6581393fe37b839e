"""onnxbridge: take a scikit-learn model to ONNX Runtime and prove the copy is faithful and fast.

The Python API is the surface the CLI uses::

    from onnxbridge import train_bundle, convert_bundle, Predictor, validate_bundle

    bundle, result = train_bundle("iris", "RandomForestClassifier(n_estimators=10)", "runs/iris")
    convert_bundle(bundle)
    Predictor(bundle.onnx_path).predict(frame).to_frame()
    validate_bundle(bundle).verdict  # "EQUIVALENT"
"""

from importlib.metadata import PackageNotFoundError, version

from onnxbridge.bench import SpeedComparison, Timing, compare_speed, measure
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
from onnxbridge.data import Dataset, FeatureSchema, FeatureSpec, load_dataset, read_table
from onnxbridge.errors import (
    BundleError,
    ConversionError,
    ConverterRegistryError,
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
    UnsafeModelFileError,
)
from onnxbridge.inspection import ModelSummary, inspect_model
from onnxbridge.runtime import PredictionResult, Predictor
from onnxbridge.train import TrainResult, fit_model, parse_model_spec
from onnxbridge.validate import (
    OutputComparison,
    ValidationReport,
    compare_predictions,
    validate_bundle,
)

try:
    __version__ = version("onnxbridge")
except PackageNotFoundError:  # pragma: no cover - running from a source tree without install
    __version__ = "0.0.0"

__all__ = [
    "Bundle",
    "BundleError",
    "ConversionError",
    "ConversionResult",
    "ConverterRegistryError",
    "ConverterSpec",
    "DataError",
    "Dataset",
    "FeatureSchema",
    "FeatureSpec",
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
    "PredictionResult",
    "Predictor",
    "RepositoryError",
    "RequestTooLargeError",
    "SchemaMismatchError",
    "ServeSettingsError",
    "SpeedComparison",
    "Timing",
    "TrainResult",
    "UnsafeModelFileError",
    "ValidationReport",
    "__version__",
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
    "save_estimator",
    "train_bundle",
    "validate_bundle",
]
