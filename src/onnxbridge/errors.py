"""One exception tree for onnxbridge.

Every message says what failed, the value seen, what is allowed and what to do next. Third-party
errors (skl2onnx, onnxruntime, skops, pandas) are wrapped once, at their layer's boundary, with
``raise ... from exc``.

::

    OnnxbridgeError
    ├── DataError (ValueError)              datasets, files, columns, targets
    │   └── SchemaMismatchError             columns missing / extra / wrong type for a model
    │       └── BadRowError                 score: a row that cannot be scored (file, row, column)
    ├── ModelSpecError (ValueError)         --model strings: unknown estimator, bad parameter
    ├── BundleError (ValueError)            missing or damaged bundle folder / card.json
    ├── UnsafeModelFileError (ValueError)   pickle without --allow-pickle, untrusted skops types
    ├── ModelNotFittedError (ValueError)    an estimator that was never fitted
    ├── ConversionError (ValueError)        the converter failed or gave an unusable graph
    │   └── MissingConverterError           no converter for this estimator
    ├── ConverterRegistryError (TypeError)  a converter registered twice or with a bad signature
    ├── OnnxModelError (ValueError)         a file that is not a loadable ONNX model
    ├── SessionSettingsError (ValueError)   session settings ONNX Runtime cannot take, or a
    │                                       damaged onnxbridge.session entry in a model
    ├── InferenceError (RuntimeError)       ONNX Runtime failed while running a valid model
    ├── ClusterError (RuntimeError)         score: the Dask cluster is unreachable or failed
    └── CoverageError (RuntimeError)        the coverage run itself could not proceed

The CLI prints ``error: <message>`` and exits 2 for any of these. :func:`first_line` gives the
part of a third-party error worth quoting in a wrapped message.
"""

from __future__ import annotations

__all__ = [
    "BadRowError",
    "BundleError",
    "ClusterError",
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
    "SessionSettingsError",
    "UnsafeModelFileError",
]


class OnnxbridgeError(Exception):
    """Base class of every error onnxbridge raises on purpose."""


class DataError(OnnxbridgeError, ValueError):
    """A dataset name, data file, column or target that cannot be used."""


class SchemaMismatchError(DataError):
    """Input data whose columns do not match what the model expects."""


class BadRowError(SchemaMismatchError):
    """A row of a scored file that cannot be scored: a value that cannot be cast, a missing
    required column, a missing value the model refuses.

    Attributes:
        file: the input file.
        row: the 1-based data row in that file (the CSV header is not counted), or None when
            the whole file is affected (a missing column).
        column: the column at fault.
    """

    def __init__(
        self, message: str, *, file: str = "", row: int | None = None, column: str = ""
    ) -> None:
        super().__init__(message)
        self.file = file
        self.row = row
        self.column = column


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


class SessionSettingsError(OnnxbridgeError, ValueError):
    """Session settings that ONNX Runtime cannot take (threads, mode, level), or tuned settings
    stored in a model that cannot be read."""


class InferenceError(OnnxbridgeError, RuntimeError):
    """ONNX Runtime failed while running a model that loaded."""


class ClusterError(OnnxbridgeError, RuntimeError):
    """A Dask cluster that cannot be reached, or that failed while running a scoring job."""


class CoverageError(OnnxbridgeError, RuntimeError):
    """The coverage run could not go on (its worker process would not start)."""


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message, or its type name when the message is empty."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
