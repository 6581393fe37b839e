"""One exception tree for onnxbridge.

Every message says what failed, the value seen, what is allowed and what to do next. Third-party
errors (skl2onnx, onnxruntime, skops, pandas) are wrapped once, at their layer's boundary, with
``raise ... from exc``.

::

    OnnxbridgeError
    ├── DataError (ValueError)              datasets, files, columns, targets
    │   └── SchemaMismatchError             columns missing / extra / wrong type for a model
    │       └── BadRowError                 score: a row that cannot be scored (file, row, column)
    ├── ModelSpecError (ValueError)         model specs: unknown estimator, bad parameter
    ├── BundleError (ValueError)            missing or damaged bundle folder / card.json
    ├── UnsafeModelFileError (ValueError)   pickle without --allow-pickle, untrusted skops types,
    │                                       native code without --trust-native, damaged trees
    ├── ModelNotFittedError (ValueError)    an estimator that was never fitted
    ├── ConversionError (ValueError)        the converter failed or gave an unusable graph
    │   └── MissingConverterError           no converter for this estimator
    ├── ConverterRegistryError (TypeError)  a converter registered twice or with a bad signature
    ├── OnnxModelError (ValueError)         a file that is not a loadable ONNX model
    ├── SessionSettingsError (ValueError)   session settings ONNX Runtime cannot take, or a
    │                                       damaged onnxbridge.session entry in a model
    ├── AcceleratorError (ValueError)       --accelerator without a usable recorded accelerator
    ├── InferenceError (RuntimeError)       ONNX Runtime failed while running a valid model
    ├── ClusterError (RuntimeError)         score: the Dask cluster is unreachable or failed
    ├── CoverageError (RuntimeError)        the coverage run itself could not proceed
    ├── ServeSettingsError (ValueError)     a server flag / ONNXBRIDGE_SERVE_* value out of range
    ├── RepositoryError (ValueError)        a model repository path or model name that is unusable
    │   └── ModelLoadError                  a model of the repository failed to load
    ├── ModelNotFoundError (ValueError)     the server has no such model or version (HTTP 404)
    ├── ModelNotReadyError (RuntimeError)   the model is known but not loaded (HTTP 503)
    └── InferenceRequestError (ValueError)  a request that does not fit the protocol or model (422)
        ├── MalformedRequestError           a body that does not parse: bad JSON, framing (400)
        └── RequestTooLargeError            a body over the server's size limit (413)

The CLI prints ``error: <message>`` and exits 2 for any of these. A message names the Python
arguments at fault as ``name=value`` (``model='Foo()'``) and lists them in the error's
``arguments``, so that the CLI can name its flags instead (``--model 'Foo()'``).
:func:`first_line` gives the part of a third-party error worth quoting in a wrapped message.
"""

from __future__ import annotations

__all__ = [
    "AcceleratorError",
    "BadRowError",
    "BundleError",
    "ClusterError",
    "ConversionError",
    "ConverterRegistryError",
    "CoverageError",
    "DataError",
    "InferenceError",
    "InferenceRequestError",
    "MalformedRequestError",
    "MissingConverterError",
    "ModelLoadError",
    "ModelNotFittedError",
    "ModelNotFoundError",
    "ModelNotReadyError",
    "ModelSpecError",
    "OnnxModelError",
    "OnnxbridgeError",
    "RepositoryError",
    "RequestTooLargeError",
    "SchemaMismatchError",
    "ServeSettingsError",
    "SessionSettingsError",
    "UnsafeModelFileError",
]


class OnnxbridgeError(Exception):
    """Base class of every error onnxbridge raises on purpose.

    Attributes:
        arguments: the Python arguments the message names, each written ``name=`` in it (e.g.
            ``("model",)`` for a message holding ``model='Foo()'``); empty when it names none.
    """

    def __init__(self, *args: object, arguments: tuple[str, ...] = ()) -> None:
        super().__init__(*args)
        self.arguments = arguments


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
        self,
        message: str,
        *,
        file: str = "",
        row: int | None = None,
        column: str = "",
        arguments: tuple[str, ...] = (),
    ) -> None:
        super().__init__(message, arguments=arguments)
        self.file = file
        self.row = row
        self.column = column


class ModelSpecError(OnnxbridgeError, ValueError):
    """A model specification string that cannot be turned into an estimator."""


class BundleError(OnnxbridgeError, ValueError):
    """A bundle folder that is missing, incomplete or damaged."""


class UnsafeModelFileError(OnnxbridgeError, ValueError):
    """A model file that would need unsafe loading (pickle, untrusted skops types, a compiled
    library not trusted for native code), or whose trees would crash scikit-learn."""


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


class AcceleratorError(OnnxbridgeError, ValueError):
    """An accelerator was asked for, but none is recorded, installed or intact."""


class InferenceError(OnnxbridgeError, RuntimeError):
    """ONNX Runtime failed while running a model that loaded."""


class ClusterError(OnnxbridgeError, RuntimeError):
    """A Dask cluster that cannot be reached, or that failed while running a scoring job."""


class CoverageError(OnnxbridgeError, RuntimeError):
    """The coverage run could not go on (its worker process would not start)."""


class ServeSettingsError(OnnxbridgeError, ValueError):
    """A server setting (a flag or an ``ONNXBRIDGE_SERVE_*`` variable) that does not validate."""


class RepositoryError(OnnxbridgeError, ValueError):
    """A model repository path or model name that cannot be used (``onnxbridge serve``)."""


class ModelLoadError(RepositoryError):
    """A model of the repository that failed to load; the other models keep serving."""


class ModelNotFoundError(OnnxbridgeError, ValueError):
    """The server has no model (or no version) of that name."""


class ModelNotReadyError(OnnxbridgeError, RuntimeError):
    """A model the repository knows but that is not loaded (it failed to load)."""


class InferenceRequestError(OnnxbridgeError, ValueError):
    """An inference request that does not fit the protocol or the model: an input missing, a wrong
    name, datatype or shape, values the model cannot take."""


class MalformedRequestError(InferenceRequestError):
    """A request body that cannot be parsed at all: bad JSON, bad binary framing."""


class RequestTooLargeError(InferenceRequestError):
    """A request body over the server's size limit."""


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message, or its type name when the message is empty."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
