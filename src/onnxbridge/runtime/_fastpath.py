"""The bound path for small calls: IOBinding with pre-allocated input and output buffers.

``session.run(None, feeds)`` builds a feed dictionary, wraps the array, allocates every output and
converts it back to numpy on each call; on one row of a tree model that is a large share of the
call. :class:`BoundRunner` does that work once per batch size: it keeps an input buffer and
output buffers bound to the session through ONNX Runtime's public ``IOBinding`` API, so a call is
a copy into the input buffer, ``session.run_with_iobinding`` and a copy of each output (the
caller's own arrays, which no later call changes).

It only serves what it can serve exactly like the plain path: a single tensor input, numeric
arrays of the right width, tensor outputs whose shape depends on the row count alone, at most
``max_rows`` rows. Buffers are per thread (a server's worker threads each get their own bound set,
with no lock on the way), so concurrent callers never share one. Whenever
``try_run`` returns ``None`` the caller runs the plain path, which also raises the proper error
for bad input — a value the input's element type cannot take
(:mod:`onnxbridge._values`) or a missing value the model refuses. This module imports
neither scikit-learn nor ``onnx``.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from onnxbridge._values import all_finite, misfits, within_range

__all__ = ["DEFAULT_MAX_ROWS", "BoundRunner", "has_nan", "run_options", "small_has_nan"]

# Beyond a few hundred rows the saved fixed cost is lost in the run itself, and the extra copies
# into and out of the buffers start to cost; larger calls take the plain path.
DEFAULT_MAX_ROWS = 256
# Bound buffers are kept for this many distinct batch sizes (a server sees few sizes).
_MAX_SIZES = 16
# Up to this many values (a bound call's input buffer), small_has_nan's dot product finds NaN
# faster than a reduction. Above it BLAS may start threads of its own (OpenBLAS's dot product
# does from 10 000 values), which then spin on the cores ONNX Runtime needs next: has_nan keeps
# to the minimum there.
_SMALL_NAN_CHECK = 8192
_DOT_TYPES = (np.dtype(np.float32), np.dtype(np.float64))


@dataclass(slots=True)
class _Binding:
    """The bound buffers of one batch size (per thread)."""

    input: np.ndarray
    io: Any  # the IOBinding: it owns the OrtValues bound to ``input`` and ``outputs``
    outputs: list[np.ndarray]


class BoundRunner:
    """Run one ONNX Runtime session on pre-bound buffers for calls of up to ``max_rows`` rows.

    Args:
        session: an ``onnxruntime.InferenceSession`` with one tensor input ``[N, width]``.
        input_name: the graph input's name.
        dtype: the input's numpy element type.
        width: the number of columns the input takes.
        check_missing: reject (return None for) inputs holding NaN, so that the plain path can
            raise the model's missing-values error.
        max_rows: the largest call served here.
    """

    def __init__(
        self,
        session: Any,
        input_name: str,
        dtype: Any,
        width: int,
        *,
        check_missing: bool = False,
        max_rows: int = DEFAULT_MAX_ROWS,
    ) -> None:
        self._session = session
        self._input_name = input_name
        self._dtype = np.dtype(dtype)
        self._width = width
        self._float = self._dtype.kind == "f"
        self._check_missing = check_missing and self._float
        self.max_rows = max_rows
        # Per thread: {rows: binding}. ONNX Runtime runs one session from many threads at once;
        # only the buffers must not be shared.
        self._local = threading.local()
        # One RunOptions for every call: without one, ONNX Runtime builds a default per call.
        self._options = run_options()
        # Set once a call shows the model cannot be served here (e.g. string or ZipMap outputs).
        self.disabled = self._dtype.kind not in "fiub"

    def try_run(self, data: Any) -> list[np.ndarray] | None:
        """Outputs in graph order for ``data`` (``[N, width]`` or one row ``[width]``), or None.

        None means "take the plain path": the input is not a numeric array of the right shape,
        it has missing values to report, or it has more than ``max_rows`` rows. The returned
        arrays are the caller's: no later call changes them while anything still holds them.
        """
        # Every check here is paid on every small call: cheapest tests first.
        if self.disabled or type(data) is not np.ndarray:
            return None
        if data.dtype is not self._dtype and data.dtype.kind not in "fiub":
            return None
        shape = data.shape
        if len(shape) == 1:
            data = data.reshape(1, -1)
            shape = data.shape
        if len(shape) != 2 or shape[1] != self._width or not 0 < shape[0] <= self.max_rows:
            return None
        bindings = getattr(self._local, "bindings", None)
        if bindings is None:
            bindings = self._local.bindings = {}
        binding = bindings.get(shape[0])
        if binding is None:
            binding = self._bind(shape[0], bindings)
            if binding is None:
                return None
        buffer = binding.input
        dtype = self._dtype
        if data.dtype is not dtype and data.dtype != dtype:
            if self._float:
                # Wider floats (float64 rows of a float32 model) are range-checked before the
                # cast, which would warn on overflow; the plain path names what is out of range.
                if data.dtype.kind == "f" and data.dtype.itemsize > dtype.itemsize:
                    if not within_range(data, dtype):
                        return None
                elif data.dtype.kind != "f" and dtype.itemsize < 4:
                    return None  # integers into float16 may overflow: the plain path casts
            elif misfits(data, dtype) is not None:
                return None  # integers / bools that do not fit: the plain path says which
        buffer[...] = data  # the same (unsafe) cast as ndarray.astype, without allocating
        # One check in the common case: every value finite. Otherwise NaN (a missing value the
        # model may refuse) or ±inf (never a value): the plain path tells which, and refuses.
        if self._float and not all_finite(buffer):
            if self._check_missing and has_nan(buffer):
                return None
            if misfits(buffer, dtype, buffer) is not None:
                return None
        elif not self._float and data.dtype.kind == "b" and misfits(buffer, dtype) is not None:
            return None  # a bool array built from raw bytes holding 2 or 255
        try:
            self._session.run_with_iobinding(binding.io, self._options)
        except Exception:
            # Let the plain path run it and raise its wrapped error; never retry here.
            self.disabled = True
            return None
        return [out.copy() for out in binding.outputs]

    def _bind(self, rows: int, bindings: dict[int, _Binding]) -> _Binding | None:
        import onnxruntime as ort

        buffer = np.zeros((rows, self._width), dtype=self._dtype)
        try:
            # One plain run tells the outputs' shapes and types for this batch size.
            probe = self._session.run(None, {self._input_name: buffer})
        except Exception:
            self.disabled = True
            return None
        if not all(isinstance(o, np.ndarray) and o.dtype.kind in "fiub" for o in probe):
            self.disabled = True  # ZipMap (list of dicts) or string outputs: plain path only
            return None
        outputs = [np.empty_like(o) for o in probe]
        io = self._session.io_binding()
        io.bind_ortvalue_input(self._input_name, ort.OrtValue.ortvalue_from_numpy(buffer))
        for meta, out in zip(self._session.get_outputs(), outputs, strict=True):
            io.bind_ortvalue_output(meta.name, ort.OrtValue.ortvalue_from_numpy(out))
        if len(bindings) >= _MAX_SIZES:
            bindings.clear()
        binding = bindings[rows] = _Binding(input=buffer, io=io, outputs=outputs)
        return binding


def small_has_nan(array: np.ndarray) -> bool:
    """Whether a small contiguous float array holds NaN, exactly: the dot product of its values
    with themselves is NaN exactly when one of them is — squares are >= 0 or +inf (an overflow,
    or an infinity), and sums of those are never NaN."""
    values = array.reshape(-1)
    return bool(math.isnan(np.vdot(values, values))) if values.dtype.kind == "f" else False


def has_nan(array: np.ndarray) -> bool:
    """Whether a float array holds NaN.

    A single value is read as a Python float. Contiguous float32 / float64 arrays of up to
    :data:`_SMALL_NAN_CHECK` values take :func:`small_has_nan`'s dot product (faster there, and
    below BLAS's own threads). Others: the minimum is NaN exactly then — a reduction that reads
    the values once and allocates no ``[N, F]`` mask, where ``np.isnan(array).any()`` writes one
    as large as the input and reads it again.
    """
    size = array.size
    if size == 1:
        return math.isnan(array.flat[0])  # one value: a Python float is quicker than numpy
    if 0 < size <= _SMALL_NAN_CHECK and array.dtype in _DOT_TYPES and array.flags.c_contiguous:
        return small_has_nan(array)
    return size > 0 and bool(np.isnan(array.min()))


def run_options() -> Any:
    """One ``RunOptions`` for every call of a session.

    Without one, ONNX Runtime builds a default per call. Its ``gpu_graph_id`` entry is set to
    the default (0, no graph capture) because ``run_with_iobinding`` looks it up on every call,
    and a missing entry is reported by raising an exception, which costs more than a small run.
    """
    import onnxruntime as ort

    options = ort.RunOptions()
    options.add_run_config_entry("gpu_graph_id", "0")
    return options
