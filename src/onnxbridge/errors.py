"""One exception tree for onnxbridge.

Every message says what failed, the value seen, what is allowed and what to do next. Third-party
errors (skl2onnx, onnxruntime, skops, pandas) are wrapped once, at their layer's boundary, with
``raise ... from exc``.

::

    OnnxbridgeError
    ├── DataError (ValueError)              datasets, files, columns, targets
    │   └── SchemaMismatchError             columns missing / extra / wrong type for a model
    ├── ModelSpecError (ValueError)         --model strings: unknown estimator, bad parameter
    ├── BundleError (ValueError)            missing or damaged bundle folder / card.json
    ├── UnsafeModelFileError (ValueError)   pickle without --allow-pickle, untrusted skops types
    ├── ModelNotFittedError (ValueError)    an estimator that was never fitted
    ├── ConversionError (ValueError)        the converter failed or gave an unusable graph
    │   └── MissingConverterError           no converter for this estimator
    ├── ConverterRegistryError (TypeError)  a converter registered twice or with a bad signature
    ├── OnnxModelError (ValueError)         a file that is not a loadable ONNX model
    ├── InferenceError (RuntimeError)       ONNX Runtime failed while running a valid model
    └── CoverageError (RuntimeError)        the coverage run itself could not proceed

The CLI prints ``error: <message>`` and exits 2 for any of these. :func:`first_line` gives the
part of a third-party error worth quoting in a wrapped message.
"""

from __future__ import annotations

__all__ = [
    "BundleError",
    "ConversionError",
    "ConverterRegistryError",
    "CoverageError",
    "DataError",
    "InferenceError",
    "MissingConverterError",
    "ModelNotFittedError",
    "ModelSpecError",
    "OnnxModelError",
    "OnnxbridgeError",
    "SchemaMismatchError",
    "UnsafeModelFileError",
]


class OnnxbridgeError(Exception):
    """Base class of every error onnxbridge raises on purpose."""


class DataError(OnnxbridgeError, ValueError):
    """A dataset name, data file, column or target that cannot be used."""


class SchemaMismatchError(DataError):
    """Input data whose columns do not match what the model expects."""


class ModelSpecError(OnnxbridgeError, ValueError):
    """A model specification string that cannot be turned into an estimator."""


class BundleError(OnnxbridgeError, ValueError):
    """A bundle folder that is missing, incomplete or damaged."""


class UnsafeModelFileError(OnnxbridgeError, ValueError):
    """A model file that would need unsafe loading (pickle, untrusted skops types)."""


class ModelNotFittedError(OnnxbridgeError, ValueError):
    """An estimator that has not been fitted yet."""


class ConversionError(OnnxbridgeError, ValueError):
    """Conversion to ONNX failed or produced a graph that does not check or load."""


class MissingConverterError(ConversionError):
    """No registered converter handles this estimator."""


class ConverterRegistryError(OnnxbridgeError, TypeError):
    """A converter that cannot be registered (duplicate, wrong signature, silent replacement)."""


class OnnxModelError(OnnxbridgeError, ValueError):
    """A file that is not a valid, loadable ONNX model."""


class InferenceError(OnnxbridgeError, RuntimeError):
    """ONNX Runtime failed while running a model that loaded."""


class CoverageError(OnnxbridgeError, RuntimeError):
    """The coverage run could not go on (its worker process would not start)."""


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message, or its type name when the message is empty."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
