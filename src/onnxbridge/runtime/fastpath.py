"""The bound path for small calls: IOBinding with pre-allocated input and output buffers.

``session.run(None, feeds)`` builds a feed dictionary, wraps the array, allocates every output and
converts it back to numpy on each call. For one row of a tree model that is a third to a half of
the call (docs/benchmarks.md). :class:`BoundRunner` does that work once per batch size: it keeps
an input buffer and output buffers bound to the session through an ``IOBinding``, so a call is a
copy into the input buffer and ``run_with_iobinding``.

Each batch size has two sets of output buffers. The *handed-out* set is returned to the caller as
it is, without a copy, whenever nobody holds the arrays the previous call returned (their
reference count is back to what the runner's own references make; a view, a result object or a
DataFrame built on them all count) — the usual case of a caller that turns each result into JSON
or a row and drops it. While the caller still holds them, the call runs on the *scratch* set and
returns copies, so a result never changes under its holder's feet. (A weak reference is not a
holder: one kept to a dropped result may see a later call's values.)

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
import sys
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from onnxbridge._values import all_finite, misfits, within_range

__all__ = ["DEFAULT_MAX_ROWS", "BoundRunner", "has_nan", "small_has_nan"]

# Beyond a few hundred rows the saved fixed cost (a few µs) is lost in the run itself, and the
# extra copy into the input buffer starts to cost; larger calls take the plain path.
DEFAULT_MAX_ROWS = 256
# Bound buffers are kept for this many distinct batch sizes (a server sees few sizes).
_MAX_SIZES = 16
# Up to this many values (a bound call's input buffer), small_has_nan's dot product finds NaN
# faster than a reduction: 0.6-1.2 µs against 1.6-2.1 µs for np.isnan(buffer.min()), 280-7 168
# float32 values (the list sum: 4.4 µs at 280). Above it BLAS may start threads of its own
# (OpenBLAS's dot product does from 10 000 values), which then spin on the cores ONNX Runtime
# needs next: has_nan keeps to the minimum there.
_SMALL_NAN_CHECK = 8192
_DOT_TYPES = (np.dtype(np.float32), np.dtype(np.float64))


_refcount = sys.getrefcount


@dataclass(slots=True)
class _Binding:
    """The bound buffers of one batch size (per thread)."""

    run: Any  # the session's run_with_iobinding (see _runner)
    input: np.ndarray
    io: Any  # runs into ``outputs``, which are handed out as they are
    outputs: list[np.ndarray]
    scratch_io: Any  # runs into ``scratch``, which are copied out
    scratch: list[np.ndarray]
    # The Python IOBinding objects: they own the OrtValues bound to the buffers.
    owners: list[Any]
    # Passed to every run: without one, each call builds a default RunOptions (see _runner).
    options: Any
    # The reference count of an ``outputs`` array nobody outside the runner holds (see
    # _free_refs); 0 until measured by the first call.
    free: int = 0


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
        # Set once a call shows the model cannot be served here (e.g. string or ZipMap outputs).
        self.disabled = self._dtype.kind not in "fiub"

    def try_run(self, data: Any) -> list[np.ndarray] | None:
        """Outputs in graph order for ``data`` (``[N, width]`` or one row ``[width]``), or None.

        None means "take the plain path": the input is not a numeric array of the right shape,
        it has missing values to report, or it has more than ``max_rows`` rows. The returned
        arrays are the caller's: no later call changes them while anything still holds them.
        """
        # Every check here is paid on each call of a few µs: cheapest tests first.
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
        outputs = binding.outputs
        free = binding.free
        if not free:
            # Measured here, in this frame, before anything was handed out: the baseline.
            free = binding.free = _free_refs(outputs)
        # Spelled out for the usual one and two outputs: each Python step here is a few percent
        # of a one-row call. The expression shape matches _free_refs (same reference count).
        if len(outputs) == 2:
            handout = _refcount(outputs[0]) <= free and _refcount(outputs[1]) <= free
        else:
            handout = _free_refs(outputs) <= free
        try:
            if handout:
                binding.run(binding.io, binding.options)
                return list(outputs)
            binding.run(binding.scratch_io, binding.options)
        except Exception:
            # Let the plain path run it and raise its wrapped error; never retry here.
            self.disabled = True
            return None
        return [out.copy() for out in binding.scratch]

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
        input_value = ort.OrtValue.ortvalue_from_numpy(buffer)
        names = [meta.name for meta in self._session.get_outputs()]
        ios, sets = [], []
        for _ in range(2):  # handed-out, scratch
            outputs = [np.empty_like(o) for o in probe]
            io = self._session.io_binding()
            io.bind_ortvalue_input(self._input_name, input_value)
            for i, name in enumerate(names):
                io.bind_ortvalue_output(name, ort.OrtValue.ortvalue_from_numpy(outputs[i]))
            ios.append(io)
            sets.append(outputs)
        if len(bindings) >= _MAX_SIZES:
            bindings.clear()
        run, native_io = _runner(self._session, ios[0])
        _, native_scratch = _runner(self._session, ios[1])
        binding = _Binding(
            run=run,
            input=buffer,
            io=native_io,
            outputs=sets[0],
            scratch_io=native_scratch,
            scratch=sets[1],
            owners=ios,
            options=ort.RunOptions(),
        )
        bindings[rows] = binding
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
    below BLAS's own threads). Others:
    the minimum is NaN exactly then — a reduction with no ``[N, F]`` mask allocated (on
    100 000 × 28 float32 values about two thirds of ``np.isnan(array).any()``'s time, and none
    of its 2.8 MB of fresh memory).
    """
    size = array.size
    if size == 1:
        # One value (a NaN flag): read as a Python float, not through numpy — 1.5 µs right
        # after a 10 000-row logistic regression call, against 5-7 for the dot product or
        # np.isnan(...).any() on that one value (measured here).
        return math.isnan(array.flat[0])
    if 0 < size <= _SMALL_NAN_CHECK and array.dtype in _DOT_TYPES and array.flags.c_contiguous:
        return small_has_nan(array)
    return size > 0 and bool(np.isnan(array.min()))


def _free_refs(outputs: list[np.ndarray]) -> int:
    """The highest reference count among ``outputs``.

    Called by the first ``try_run`` of a binding, before anything was handed out, it gives the
    count of an array only the runner holds (its list and the ``OrtValue`` bound to it); later
    calls compare against that with the same expression, so any holder outside the runner — a
    result, a view, a DataFrame column — shows as more.
    """
    most = 0
    for i in range(len(outputs)):
        count = _refcount(outputs[i])
        if count > most:
            most = count
    return most


def _runner(session: Any, io: Any) -> tuple[Any, Any]:
    """``(run, io)`` such that ``run(io, options)`` runs ``session`` on the binding ``io``.

    ``InferenceSession.run_with_iobinding`` is a thin Python wrapper over the C++ session; calling
    the C++ method directly saves a quarter of a microsecond per call (measured on a one-row
    forest call of ~6 µs). The public method is used whenever those internals are not there.
    Either way the caller passes a ``RunOptions`` made once: given ``None``, ONNX Runtime builds
    a default one on every call, about 1 µs of a 7 µs one-row forest call (measured here).
    """
    native_session = getattr(session, "_sess", None)
    native_io = getattr(io, "_iobinding", None)
    method = getattr(native_session, "run_with_iobinding", None)
    if method is not None and native_io is not None:
        return method, native_io
    return session.run_with_iobinding, io
