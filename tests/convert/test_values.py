"""The one rule for values a graph input can take (onnxbridge._values), on its own."""

from __future__ import annotations

import numpy as np
import pytest

from onnxbridge._values import (
    VALUE_LIMITS,
    all_finite,
    cast_values,
    first_misfit,
    misfits,
    refuse_table_misfits,
    within_range,
)
from onnxbridge.errors import SchemaMismatchError

F32_MAX = float(np.finfo(np.float32).max)


@pytest.mark.parametrize(
    ("given", "dtype", "index", "text"),
    [
        ([1.0, 1e300], np.float32, (1,), "1e+300 is out of range for float32, which takes"),
        ([1.0, -4e38], np.float32, (1,), "-4e+38 is out of range for float32"),
        ([np.inf], np.float64, (0,), "inf is not a finite number the model can score"),
        ([1.0, -np.inf], np.float32, (1,), "-inf is not a finite number the model can score"),
        ([70000.0], np.float16, (0,), "70000 is out of range for float16"),
        ([1.0, 2.5], np.int64, (1,), "2.5 is not an integer: int64 takes integers from"),
        ([2.0**63], np.int64, (0,), "9.223372036854776e+18 is out of range for int64"),
        ([-(2.0**63) - 4096], np.int64, (0,), "-9.22337203685478e+18 is out of range for int64"),
        ([np.nan], np.int64, (0,), "nan is a missing value (NaN), which an integer input"),
        ([2**31], np.int32, (0,), "2147483648 is out of range for int32"),
        ([-1], np.uint8, (0,), "-1 is out of range for uint8, which takes integers from 0 to 255"),
        ([0.0, 1.0, 2.0], np.bool_, (2,), "2 is not a boolean: bool takes 0 or 1"),
        ([0.5], np.bool_, (0,), "0.5 is not a boolean"),
    ],
)
def test_first_misfit_names_the_value_and_what_is_allowed(given, dtype, index, text) -> None:
    misfit = first_misfit(np.array(given), dtype)
    assert misfit is not None and misfit.index == index
    assert str(misfit).startswith(text), str(misfit)


@pytest.mark.parametrize(
    ("given", "dtype"),
    [
        ([1.0, np.nan, -2.5], np.float32),  # NaN is a missing value, not a misfit
        ([F32_MAX, -F32_MAX, 1e-45], np.float32),
        ([2.0**63 - 1024, -(2.0**63)], np.int64),
        ([0, 1, 1], np.bool_),
        ([True, False], np.int64),
        (np.arange(10, dtype=np.int64), np.float32),
    ],
)
def test_values_that_fit_pass(given, dtype) -> None:
    assert misfits(np.asarray(given), dtype) is None


def test_bool_bytes_other_than_0_and_1_are_misfits() -> None:
    raw = np.frombuffer(bytes([0, 1, 2, 255]), dtype=np.bool_)
    mask = misfits(raw, np.bool_)
    assert mask is not None and mask.tolist() == [False, False, True, True]
    assert str(first_misfit(raw, np.bool_, type_name="BOOL")).startswith("2 is not a boolean: BOOL")


def test_the_table_covers_every_numeric_element_type() -> None:
    assert {d.name for d in VALUE_LIMITS} == {
        "float16", "float32", "float64", "int8", "int16", "int32", "int64",
        "uint8", "uint16", "uint32", "uint64", "bool",
    }  # fmt: skip
    assert VALUE_LIMITS[np.dtype(np.float32)].high == F32_MAX
    assert VALUE_LIMITS[np.dtype(np.uint8)].allowed() == "integers from 0 to 255"


@pytest.mark.parametrize("size", [1, 4, 64, 65, 300 * 28, 9000, 100_000])
def test_all_finite_is_exact_on_every_size(size: int) -> None:
    rng = np.random.RandomState(size)
    for dtype in (np.float32, np.float64):
        values = rng.randn(size).astype(dtype)
        assert all_finite(values)
        for bad in (np.nan, np.inf, -np.inf):
            spoiled = values.copy()
            spoiled[rng.randint(size)] = bad
            assert not all_finite(spoiled)
            assert not all_finite(spoiled.reshape(1, -1)[:, ::-1])  # not contiguous


def test_huge_finite_values_are_a_false_alarm_only() -> None:
    # Their squares overflow: all_finite says no, misfits tells they fit.
    huge = np.full(100, 1e30, dtype=np.float32)
    assert not all_finite(huge)
    assert misfits(huge, np.float32) is None


def test_cast_values_does_not_warn_and_keeps_what_it_cannot_fit_visible() -> None:
    # pytest turns warnings into errors here: a cast that warned would raise.
    for size in (2, 200):
        given = np.ones(size)
        given[-1] = 1e300
        cast = cast_values(given, np.float32)
        assert cast.dtype == np.float32 and np.isinf(cast[-1])
        assert cast_values(np.array([2.0**70, np.nan]), np.int64).dtype == np.int64
    same = np.ones(3, dtype=np.float32)
    assert cast_values(same, np.float32) is same


def test_a_table_misfit_names_row_and_column() -> None:
    table = np.array([[1.0, 2.0], [3.0, np.inf]])
    with pytest.raises(SchemaMismatchError, match=r"bad value in row 2, column 'b': inf is not"):
        refuse_table_misfits(table, np.float32, columns=["a", "b"])
    with pytest.raises(SchemaMismatchError, match=r"row 1, column '1': 1e\+300 is out of range"):
        refuse_table_misfits(np.array([0.0, 1e300]), np.float32)
    refuse_table_misfits(np.array([[1.0, np.nan]]), np.float32, columns=["a", "b"])


def test_within_range_is_exact_with_nan() -> None:
    for size in (3, 300):
        values = np.ones(size)
        values[0] = np.nan
        assert within_range(values, np.float32)
        values[-1] = -1e39
        assert not within_range(values, np.float32)
