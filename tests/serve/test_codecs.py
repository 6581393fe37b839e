"""Codecs: the datatype table and its inverse, JSON and binary tensors, both ways."""

from __future__ import annotations

import re
import struct

import numpy as np
import pytest

from onnxbridge.errors import InferenceRequestError, MalformedRequestError
from onnxbridge.serve._codecs import (
    DATATYPES,
    NUMPY_TO_DATATYPE,
    ORT_TO_DATATYPE,
    datatype_of,
    decode_binary_tensor,
    decode_json_tensor,
    encode_binary_tensor,
    encode_json_data,
    split_binary_body,
)


def test_table_and_inverse_agree() -> None:
    for name, dtype in DATATYPES.items():
        assert NUMPY_TO_DATATYPE[dtype.char] == name
        assert dtype.byteorder in ("=", "<", "|")  # little-endian on the wire
    assert set(ORT_TO_DATATYPE.values()) == set(DATATYPES)
    assert datatype_of(np.array(["a"])) == "BYTES"
    assert datatype_of(np.zeros(2, dtype=np.float32)) == "FP32"
    with pytest.raises(InferenceRequestError, match="no Open Inference Protocol datatype"):
        datatype_of(np.zeros(1, dtype=np.complex64))


JSON_PAIRS = [
    ("FP32", (2, 2), [1, 2.5, 3, 4], np.array([[1, 2.5], [3, 4]], dtype=np.float32)),
    ("FP32", (2, 2), [[1, 2.5], [3, 4]], np.array([[1, 2.5], [3, 4]], dtype=np.float32)),
    ("FP64", (1,), 0.1, np.array([0.1])),
    ("FP16", (2,), [0.5, 1], np.array([0.5, 1], dtype=np.float16)),
    ("INT64", (3,), [1, -2, 2**62], np.array([1, -2, 2**62], dtype=np.int64)),
    ("INT8", (2,), [-128, 127], np.array([-128, 127], dtype=np.int8)),
    ("UINT8", (2,), [0, 255], np.array([0, 255], dtype=np.uint8)),
    ("UINT64", (1,), [2**63], np.array([2**63], dtype=np.uint64)),
    ("BOOL", (1, 2), [True, False], np.array([[True, False]])),
    ("BYTES", (2, 1), ["a", "é"], np.array([["a"], ["é"]], dtype=object)),
]


@pytest.mark.parametrize(("datatype", "shape", "data", "expected"), JSON_PAIRS)
def test_json_decode(datatype, shape, data, expected) -> None:
    array = decode_json_tensor("x", datatype, shape, data)
    assert array.dtype == expected.dtype and array.shape == expected.shape
    np.testing.assert_array_equal(array, expected)
    # ... and back: flat data that decodes to the same array.
    again = decode_json_tensor("x", datatype, shape, _plain(encode_json_data(array)))
    np.testing.assert_array_equal(again, expected)


def _plain(data):
    return data.tolist() if isinstance(data, np.ndarray) else data


@pytest.mark.parametrize(("datatype", "shape", "data", "expected"), JSON_PAIRS)
def test_binary_round_trip(datatype, shape, data, expected) -> None:
    blob = encode_binary_tensor(expected, datatype)
    array = decode_binary_tensor("x", datatype, shape, memoryview(blob))
    assert array.shape == expected.shape
    np.testing.assert_array_equal(array, expected)


def test_bytes_wire_format() -> None:
    blob = encode_binary_tensor(np.array(["ab", ""], dtype=object), "BYTES")
    assert blob == struct.pack("<I", 2) + b"ab" + struct.pack("<I", 0)
    assert encode_binary_tensor(np.array([1.0], dtype=np.float32), "FP32") == struct.pack("<f", 1)


@pytest.mark.parametrize(
    ("datatype", "shape", "data", "message"),
    [
        (
            "INT32",
            (1,),
            [2**31],
            "[0]: 2147483648 is out of range for INT32, which takes integers from -2147483648",
        ),
        ("UINT8", (1, 2), [0, -1], "[0, 1]: -1 is out of range for UINT8"),
        ("INT64", (1,), [1.5], "takes integers"),
        ("FP32", (1,), [True], "takes numbers"),
        ("FP32", (1,), ["1"], "takes numbers"),
        ("FP16", (1,), [1e6], "[0]: 1000000 is out of range for FP16"),
        ("FP32", (2, 2), [1, 2, 3, 1e300], "[1, 1]: 1e+300 is out of range for FP32"),
        ("FP32", (1, 2), [1, 4e38], "[0, 1]: 4e+38 is out of range for FP32"),
        ("BOOL", (1,), [0], "takes true/false"),
        ("BYTES", (1,), [1], "takes strings"),
        ("FP32", (3,), [1, 2], "needs 3 values"),
    ],
)
def test_json_decode_refuses(datatype, shape, data, message) -> None:
    with pytest.raises(InferenceRequestError, match=re.escape(message)):
        decode_json_tensor("x", datatype, shape, data)


def test_split_binary_body() -> None:
    header, rest = split_binary_body(b"{}abcd", "2")
    assert header == b"{}" and bytes(rest) == b"abcd"
    header, rest = split_binary_body(b"{}", None)
    assert header == b"{}" and len(rest) == 0
    for bad in ("-1", "x", "99"):
        with pytest.raises(MalformedRequestError, match="Inference-Header-Content-Length"):
            split_binary_body(b"{}", bad)


@pytest.mark.parametrize(
    ("datatype", "data", "want"),
    [
        ("FP32", [3.4e38, -3.4e38, 1], [3.4e38, -3.4e38, 1]),
        ("FP32", [1.0, float("nan")], [1.0, np.nan]),  # NaN: the missing-value rule decides
        ("FP64", [1e308, 1e308, -1e308], [1e308, 1e308, -1e308]),  # the sum overflows: slow path
        ("FP32", [1, 2.5, -3], [1, 2.5, -3]),
        ("FP16", [65504.0, -1.5], [65504.0, -1.5]),
    ],
)
def test_json_decode_one_row_floats(datatype, data, want) -> None:
    """The plain-Python path for short flat float lists gives what numpy gives."""
    got = decode_json_tensor("x", datatype, (len(data),), data)
    assert got.dtype == DATATYPES[datatype]
    np.testing.assert_array_equal(got, np.asarray(want, dtype=DATATYPES[datatype]))


@pytest.mark.parametrize("data", [[1.0, 1e39], [-1e39, 1.0], [1e39] * 100])
def test_json_decode_fp32_out_of_range_short_and_long(data) -> None:
    with pytest.raises(InferenceRequestError, match=r"1e\+39 is out of range for FP32"):
        decode_json_tensor("x", "FP32", (len(data),), data)


@pytest.mark.parametrize("value", [float("inf"), float("-inf"), 1e300])
def test_json_decode_refuses_values_fp32_cannot_take(value) -> None:
    shown = "1e+300 is out of range for FP32" if value == 1e300 else f"{value} is not a finite"
    with pytest.raises(InferenceRequestError, match=re.escape(f"'x' at index [1, 0]: {shown}")):
        decode_json_tensor("x", "FP32", (2, 2), [1, 2, value, 4])


@pytest.mark.parametrize(
    ("datatype", "blob", "message"),
    [
        ("BOOL", bytes([1, 0, 2, 1]), "[1, 0]: 2 is not a boolean: BOOL takes 0 or 1"),
        ("BOOL", bytes([0, 255, 1, 1]), "[0, 1]: 255 is not a boolean"),
        ("FP32", struct.pack("<4f", 1, 2, 3, float("inf")), "[1, 1]: inf is not a finite number"),
        ("FP64", struct.pack("<4d", 1, float("-inf"), 3, 4), "[0, 1]: -inf is not a finite"),
    ],
)
def test_binary_decode_refuses_values_the_datatype_cannot_take(datatype, blob, message) -> None:
    with pytest.raises(InferenceRequestError, match=re.escape(f"input 'x' at index {message}")):
        decode_binary_tensor("x", datatype, (2, 2), memoryview(blob))


def test_binary_decode_keeps_nan_and_valid_bools() -> None:
    flags = decode_binary_tensor("x", "BOOL", (3,), memoryview(bytes([0, 1, 1])))
    np.testing.assert_array_equal(flags, [False, True, True])
    nan = decode_binary_tensor("x", "FP32", (1,), memoryview(struct.pack("<f", float("nan"))))
    assert np.isnan(nan).all()
