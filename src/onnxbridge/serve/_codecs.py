"""Tensors between the Open Inference Protocol (KServe v2) and numpy, both ways.

One table, :data:`DATATYPES`, maps a v2 datatype to its little-endian numpy dtype;
:data:`NUMPY_TO_DATATYPE` is its inverse and :data:`ORT_TO_DATATYPE` names the v2 datatype of an
ONNX Runtime tensor type. Every decoder checks what it is given against the declared datatype and
shape and raises :class:`~onnxbridge.errors.InferenceRequestError` (or
:class:`~onnxbridge.errors.MalformedRequestError`) with the input's name, the value seen and what
is expected; nothing is reshaped unchecked.

JSON: ``data`` is flat (row-major) or nested to the tensor's shape. BYTES elements are strings.

Binary tensor data extension: the body is a JSON header of ``Inference-Header-Content-Length``
bytes followed by the raw tensors in the order of the inputs whose ``parameters`` carry
``binary_data_size``. Numbers are little-endian, BOOL one byte per element, and each BYTES
element is a 4-byte little-endian length followed by its bytes.
"""

from __future__ import annotations

import math
import struct
from typing import Any

import numpy as np

from onnxbridge._values import cast_values, first_misfit
from onnxbridge.errors import InferenceRequestError, MalformedRequestError

__all__ = [
    "DATATYPES",
    "NUMPY_TO_DATATYPE",
    "ORT_TO_DATATYPE",
    "datatype_of",
    "decode_binary_tensor",
    "decode_json_tensor",
    "encode_binary_tensor",
    "encode_json_data",
    "parse_shape",
    "split_binary_body",
]

# The one table: v2 datatype -> numpy dtype (little-endian, as the binary extension sends them).
DATATYPES: dict[str, np.dtype] = {
    "BOOL": np.dtype("?"),
    "UINT8": np.dtype("u1"),
    "UINT16": np.dtype("<u2"),
    "UINT32": np.dtype("<u4"),
    "UINT64": np.dtype("<u8"),
    "INT8": np.dtype("i1"),
    "INT16": np.dtype("<i2"),
    "INT32": np.dtype("<i4"),
    "INT64": np.dtype("<i8"),
    "FP16": np.dtype("<f2"),
    "FP32": np.dtype("<f4"),
    "FP64": np.dtype("<f8"),
    "BYTES": np.dtype(object),
}
# Its inverse, keyed by numpy's type character so native and little-endian dtypes both match.
NUMPY_TO_DATATYPE: dict[str, str] = {dtype.char: name for name, dtype in DATATYPES.items()}
NUMPY_TO_DATATYPE["U"] = NUMPY_TO_DATATYPE["S"] = "BYTES"

ORT_TO_DATATYPE: dict[str, str] = {
    "tensor(bool)": "BOOL",
    "tensor(uint8)": "UINT8",
    "tensor(uint16)": "UINT16",
    "tensor(uint32)": "UINT32",
    "tensor(uint64)": "UINT64",
    "tensor(int8)": "INT8",
    "tensor(int16)": "INT16",
    "tensor(int32)": "INT32",
    "tensor(int64)": "INT64",
    "tensor(float16)": "FP16",
    "tensor(float)": "FP32",
    "tensor(double)": "FP64",
    "tensor(string)": "BYTES",
}

# The kinds of numpy array ``np.asarray(json_data)`` may give for each kind of datatype.
_JSON_KINDS = {"b": "b", "u": "iu", "i": "iu", "f": "iuf"}
_KIND_WORDS = {"b": "true/false", "i": "integers", "u": "integers", "f": "numbers", "U": "strings"}
_LENGTH = struct.Struct("<I")


def datatype_of(array: np.ndarray) -> str:
    """The v2 datatype of a numpy array (BYTES for strings and objects).

    Raises:
        InferenceRequestError: a dtype the protocol cannot carry.
    """
    name = NUMPY_TO_DATATYPE.get(array.dtype.char)
    if name is None:
        raise InferenceRequestError(
            f"numpy dtype {array.dtype} has no Open Inference Protocol datatype; "
            f"allowed: {', '.join(DATATYPES)}"
        )
    return name


def parse_shape(name: str, shape: Any) -> tuple[int, ...]:
    """Check an input's ``shape`` field: a list of non-negative integers.

    Raises:
        InferenceRequestError: anything else.
    """
    if not isinstance(shape, list) or not all(
        type(d) is int and d >= 0  # bool is an int: refuse it too
        for d in shape
    ):
        raise InferenceRequestError(
            f"input {name!r}: 'shape' must be a list of non-negative integers, got {shape!r}"
        )
    return tuple(shape)


def decode_json_tensor(
    name: str, datatype: str, shape: tuple[int, ...], data: Any, *, null_is_nan: bool = False
) -> np.ndarray:
    """The array of shape ``shape`` that a JSON ``data`` field holds.

    Args:
        name: the input's name, for messages.
        datatype: its v2 datatype (already checked against the model).
        shape: its declared shape.
        data: flat (row-major) or nested to ``shape``; strings for BYTES.
        null_is_nan: read ``null`` in floating-point data (FP16, FP32, FP64) as NaN, a missing
            value (onnxbridge's extension of the protocol, which has no missing value);
            otherwise ``null`` is refused as the protocol says.

    Raises:
        InferenceRequestError: values of the wrong kind, ragged nesting, a count that does not
            match the shape, or a value the datatype cannot take (out of its range, ±inf:
            :mod:`onnxbridge._values`, the rule every path applies).
    """
    dtype = DATATYPES[datatype]
    count = math.prod(shape)
    if not isinstance(data, list):
        data = [data]  # a single value for a one-element tensor
    try:
        raw = np.array(data, dtype=object) if dtype.kind == "O" else np.asarray(data)
    except ValueError as exc:  # ragged nesting
        raise InferenceRequestError(
            f"input {name!r}: 'data' is nested unevenly; give a flat list of {count} values or "
            f"lists nested to shape {list(shape)}"
        ) from exc
    if raw.size != count or (raw.ndim > 1 and raw.shape != shape):
        raise InferenceRequestError(
            f"input {name!r}: shape {list(shape)} needs {count} values, but 'data' has "
            f"{raw.size}" + (f" nested as {list(raw.shape)}" if raw.ndim > 1 else "")
        )
    if dtype.kind == "O":
        if not all(isinstance(v, str) for v in raw.ravel().tolist()):
            raise InferenceRequestError(
                f"input {name!r} is BYTES and takes strings, but 'data' holds {_describe(raw)}"
            )
        return raw.reshape(shape)
    allowed = _JSON_KINDS[dtype.kind]
    if null_is_nan and dtype.kind == "f" and raw.dtype.kind == "O":
        raw = _nulls_as_nan(raw, allowed)
    if raw.size and raw.dtype.kind not in allowed:
        raise InferenceRequestError(
            f"input {name!r} is {datatype} and takes {_KIND_WORDS[allowed[-1]]}, but 'data' "
            f"holds {_describe(raw, null_ok=null_is_nan and dtype.kind == 'f')}"
        )
    out = cast_values(raw, dtype).reshape(shape)
    _refuse_misfit(name, datatype, raw.reshape(shape), out)
    return out


def _nulls_as_nan(raw: np.ndarray, allowed: str) -> np.ndarray:
    """``raw`` (objects) as float64 with NaN for each ``None``; unchanged when it holds no
    ``None`` or other values than numbers (the caller's kind check then names them)."""
    flat = raw.ravel()
    nulls = np.fromiter((v is None for v in flat), dtype=bool, count=flat.size)
    if not nulls.any():
        return raw
    present = np.asarray(flat[~nulls].tolist())
    if present.size and present.dtype.kind not in allowed:
        return raw
    values = np.full(flat.size, np.nan)
    values[~nulls] = present.astype(np.float64)
    return values.reshape(raw.shape)


def _refuse_misfit(name: str, datatype: str, given: np.ndarray, array: np.ndarray) -> None:
    """Refuse the first value of ``given`` (cast: ``array``) that the datatype cannot take —
    out of range, ±inf, a BOOL byte other than 0/1 (:mod:`onnxbridge._values`)."""
    misfit = first_misfit(given, array.dtype, array, type_name=datatype)
    if misfit is not None:
        raise InferenceRequestError(
            f"input {name!r} at index {list(misfit.index)}: {misfit}; send values the "
            "input's datatype can hold"
        )


def _describe(raw: np.ndarray, *, null_ok: bool = False) -> str:
    if raw.dtype.kind == "O":
        values = raw.ravel().tolist()
        kinds = sorted({type(v).__name__ for v in values})
        refused_null = not null_ok and any(v is None for v in values)
        return f"values of types {', '.join(kinds)}" + (
            " (null is not a value here)" if refused_null else ""
        )
    first = raw.ravel()[0].item()
    return f"{_KIND_WORDS.get(raw.dtype.kind, raw.dtype.name)} (first: {first!r})"


def split_binary_body(body: bytes, header_length: str | None) -> tuple[bytes, memoryview]:
    """Split a body into its JSON header and the binary tensors after it.

    Args:
        body: the request body.
        header_length: the ``Inference-Header-Content-Length`` header, if sent.

    Raises:
        MalformedRequestError: a header length that is not a number or exceeds the body.
    """
    if header_length is None:
        return body, memoryview(b"")
    try:
        length = int(header_length)
    except ValueError:
        length = -1
    if not 0 <= length <= len(body):
        raise MalformedRequestError(
            f"Inference-Header-Content-Length is {header_length!r}; it must be the byte length "
            f"of the JSON header, between 0 and the body's {len(body)} bytes"
        )
    view = memoryview(body)
    return body[:length], view[length:]


def decode_binary_tensor(
    name: str, datatype: str, shape: tuple[int, ...], raw: memoryview | bytes
) -> np.ndarray:
    """The array of shape ``shape`` in the raw bytes ``raw`` (binary tensor data extension).

    Raises:
        InferenceRequestError: a byte count that does not match the shape and datatype, a
            value the datatype cannot take (±inf, a BOOL byte other than 0 or 1), or a BYTES
            element that is not UTF-8.
    """
    dtype = DATATYPES[datatype]
    count = math.prod(shape)
    if dtype.kind != "O":
        if len(raw) != count * dtype.itemsize:
            raise InferenceRequestError(
                f"input {name!r}: shape {list(shape)} of {datatype} needs "
                f"{count * dtype.itemsize} bytes ({count} × {dtype.itemsize}), but "
                f"binary_data_size is {len(raw)}"
            )
        array = np.frombuffer(raw, dtype=dtype).reshape(shape)
        _refuse_misfit(name, datatype, array, array)
        return array
    values: list[str] = []
    offset, end = 0, len(raw)
    try:
        while offset < end:
            (size,) = _LENGTH.unpack_from(raw, offset)
            offset += 4
            if offset + size > end:
                raise struct.error("element runs past the end")
            values.append(str(raw[offset : offset + size], "utf-8"))
            offset += size
    except struct.error as exc:
        raise InferenceRequestError(
            f"input {name!r}: BYTES data must be elements of a 4-byte little-endian length and "
            f"that many bytes; the {len(raw)} bytes given do not parse ({exc})"
        ) from exc
    except UnicodeDecodeError as exc:
        raise InferenceRequestError(
            f"input {name!r}: BYTES element {len(values)} is not UTF-8 text ({exc.reason}); "
            "the model's string input takes text"
        ) from exc
    if len(values) != count:
        raise InferenceRequestError(
            f"input {name!r}: shape {list(shape)} needs {count} BYTES elements, the binary "
            f"data holds {len(values)}"
        )
    out = np.empty(count, dtype=object)
    out[:] = values
    return out.reshape(shape)


def encode_json_data(array: np.ndarray) -> Any:
    """The flat ``data`` field for an output (numpy arrays go to orjson as they are)."""
    if array.dtype.kind in "OUS":
        return [
            v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)
            for v in array.ravel().tolist()
        ]
    if array.dtype.kind == "f" and array.dtype.itemsize == 2:
        return array.astype(np.float32).ravel()
    return np.ascontiguousarray(array).ravel()


def encode_binary_tensor(array: np.ndarray, datatype: str) -> bytes:
    """The raw bytes of an output (binary tensor data extension)."""
    if datatype == "BYTES":
        parts: list[bytes] = []
        for value in array.ravel().tolist():
            encoded = value if isinstance(value, bytes) else str(value).encode("utf-8")
            parts.append(_LENGTH.pack(len(encoded)))
            parts.append(encoded)
        return b"".join(parts)
    return np.ascontiguousarray(array, dtype=DATATYPES[datatype]).tobytes()
