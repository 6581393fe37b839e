"""The accelerator ``onnxbridge tune --engines all`` recorded, used on request.

``tune`` builds compiled copies of a bundle's trees (tl2cgen for scikit-learn ensembles and
LightGBM, lleaves for LightGBM), checks them with the probes of ``validate`` against the ONNX
model and records one only when it is equivalent and faster, with its files in
``BUNDLE/accelerators/`` (their sha256 in ``card.json``). Nothing uses it by default: ONNX stays
the artifact and ONNX Runtime the engine. ``Predictor(..., accelerator=True)`` (and
``onnxbridge score --accelerator``) runs calls of at least the recorded ``min_rows`` rows on it
instead — **a compiled library is native code**, so it is loaded only when asked for, only from
a bundle, only when the caller trusts the bundle's native code (``trust_native=True``,
``--trust-native``: :func:`check_native_trust`) and only when the hash of every file matches the
card. The hash proves the files did not change since they were recorded, not who made them:
whoever can write a bundle can write its card too.

- ``tl2cgen``: a shared library (``accelerators/tl2cgen.so``, with onnxbridge's row driver
  compiled in: :class:`_RowDriver`), :class:`CompiledTrees`;
- ``lleaves``: LLVM's object code (``accelerators/lleaves.o``) with the LightGBM model text it
  was compiled from (``accelerators/lightgbm.txt``, which lleaves reads for the model's shape),
  :class:`LeavesTrees`.
"""

from __future__ import annotations

import ctypes
import importlib.util
import threading
from pathlib import Path
from typing import Any

import numpy as np

from onnxbridge.errors import AcceleratorError, BundleError, UnsafeModelFileError, first_line
from onnxbridge.runtime.pool import LazyPool
from onnxbridge.runtime.settings import available_cores

__all__ = [
    "LEAVES_PARALLEL_ROWS",
    "Accelerator",
    "CompiledTrees",
    "LeavesTrees",
    "check_native_trust",
    "compiled_output",
    "first_argmax",
    "load_accelerator",
]

# Calls of at least this many rows run lleaves' compiled code on the recorded threads (a kept
# pool); smaller ones on the calling thread alone. LightGBM, 100 trees, 28 features, 2 cores:
# two threads took 1.9x the time of one at 100 rows and 0.72x at 300 (benchmarks.md).
LEAVES_PARALLEL_ROWS = 256


# lleaves' entry point, ``void forest_root(double *rows, double *out, int first, int end)``.
_MAX_LEAVES_ROWS = 2**31 - 1
_ONE32 = np.float32(1)
# Small calls' rows go through buffers kept per thread, of at most this many float64 values
# (1 MiB; a server's many threads each keep one); wider calls allocate their own.
_SMALL_BUFFER_VALUES = 1 << 17
_ENTRY_BY_ADDRESS = ctypes.CFUNCTYPE(
    None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32, ctypes.c_int32
)


class Accelerator:
    """What a :class:`~onnxbridge.runtime.Predictor` needs of an accelerator.

    Attributes:
        engine: ``"tl2cgen"`` or ``"lleaves"``.
        threads: the threads it was recorded with.
        n_classes: classes of a classifier, or None for a regressor.
        min_rows: the smallest call it serves (smaller ones stay on ONNX Runtime).
        widens_float32: it computes in float64 whatever float rows it gets.
    """

    engine = ""
    threads = 1
    n_classes: int | None = None
    min_rows = 1
    # Computes in float64 whatever float rows it gets: a double model's float32 rows need no
    # widening copy before it.
    widens_float32 = False

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Probabilities ``[N, C]`` (float32) for a classifier, values ``[N]`` for a regressor."""
        raise NotImplementedError

    def predict_indexed(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """``predict``'s result and, for a classifier, each row's class index ``[N]`` int64
        (the first largest probability, as ``np.argmax``); None for a regressor."""
        out = self.predict(X)
        return out, None if self.n_classes is None else first_argmax(out)


class LeavesTrees(Accelerator):
    """A LightGBM model compiled by lleaves: ``[N, F]`` rows → probabilities ``[N, C]`` or values.

    Args:
        library: the object code ``lleaves.Model.compile(cache=...)`` wrote.
        model_text: the LightGBM model text it was compiled from.
        threads: threads for calls of :data:`LEAVES_PARALLEL_ROWS` rows or more.
        n_classes: classes of a classifier, or None for a regressor.
        min_rows: the smallest call it serves.
    """

    engine = "lleaves"
    widens_float32 = True

    def __init__(
        self, library: Path, model_text: Path, threads: int, n_classes: int | None, min_rows: int
    ) -> None:
        import lleaves

        self.library = library
        self.threads = threads
        self.n_classes = n_classes
        self.min_rows = min_rows
        model = lleaves.Model(model_file=str(model_text))
        # With the cache file there, lleaves loads it instead of compiling.
        model.compile(cache=str(library))
        # The compiled entry point, ``(rows*, out*, first row, end row)`` over float64 rows:
        # called directly, without lleaves' predict, which checks and converts the rows again and
        # starts (and joins) a new thread pool on every call with more than one job.
        entry = getattr(model, "_c_entry_func", None)
        if entry is None:
            raise AcceleratorError(
                "this lleaves does not expose its compiled entry point (lleaves 1.x does); "
                "pip install 'onnxbridge[accel]'"
            )
        # The same function taking plain addresses: ``array.ctypes.data`` is an int, where
        # ``data_as(POINTER(c_double))`` builds two ctypes objects per array per call.
        self._entry = _ENTRY_BY_ADDRESS(ctypes.cast(entry, ctypes.c_void_p).value)
        # The model owns the execution engine holding the code: it lives as long as the entry.
        self._model = model
        self._outputs = int(model.num_model_per_iteration())
        self._features = int(model.num_feature())
        self._binary = n_classes == 2 and self._outputs == 1
        # A bundle tuned on a larger machine: no more parts than this process has cores.
        self._parts = max(1, min(threads, available_cores()))
        self._pool = LazyPool(max(self._parts - 1, 1), "onnxbridge-lleaves")
        # Small calls reuse buffers of their own thread (see _small_buffers).
        self._local = threading.local()

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Probabilities ``[N, C]`` (float32) for a classifier, values ``[N]`` for a regressor.

        lleaves computes in float64; float32 rows are widened exactly, so the trees see the
        values the ONNX model sees. Calls of :data:`LEAVES_PARALLEL_ROWS` rows or more are cut
        into one part per thread (at most one per core), run side by side on a pool kept for
        this model (the compiled code runs without the GIL), the last part on the calling thread.
        Smaller calls run on the calling thread in float64 buffers it keeps for them.
        """
        if X.ndim != 2 or X.shape[1] != self._features:
            # The compiled code reads as many columns as the model has, whatever it is given.
            raise AcceleratorError(
                f"the lleaves model takes rows of {self._features} features; got an array of "
                f"shape {X.shape}"
            )
        n = len(X)
        if n < LEAVES_PARALLEL_ROWS and n * self._features <= _SMALL_BUFFER_VALUES:
            # A single row's whole call lasts a few µs: no allocation or address lookup that
            # can be done once (``.ctypes.data`` alone costs ~1 µs per array).
            rows, raw, rows_at, raw_at = self._small_buffers(n)
            np.copyto(rows[:n], X)
            self._entry(rows_at, raw_at, 0, n)
            return compiled_output(
                raw[: n * self._outputs], n, self.n_classes, np.float32, columns=True
            )
        if n >= _MAX_LEAVES_ROWS:
            # The entry point counts rows in int32.
            raise AcceleratorError(
                f"lleaves takes fewer than {_MAX_LEAVES_ROWS} rows per call; got {n}: "
                "score the rows in batches"
            )
        rows = np.ascontiguousarray(X, dtype=np.float64)
        raw = np.empty(n * self._outputs, dtype=np.float64)
        source, target = rows.ctypes.data, raw.ctypes.data
        parts = self._parts if n >= LEAVES_PARALLEL_ROWS else 1
        if parts <= 1:
            self._entry(source, target, 0, n)
        else:
            bounds = [n * i // parts for i in range(parts + 1)]
            pool = self._pool.get()
            pending = [
                pool.submit(self._entry, source, target, bounds[i], bounds[i + 1])
                for i in range(parts - 1)
            ]
            self._entry(source, target, bounds[-2], bounds[-1])
            for future in pending:
                future.result()
        return compiled_output(raw, n, self.n_classes, np.float32, columns=True)

    def predict_indexed(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """As :meth:`Accelerator.predict_indexed`; a binary classifier's single row in scalars
        (the numpy calls of the array path were half of a ~5 µs call)."""
        if (
            self._binary
            and X.ndim == 2
            and X.shape[0] == 1
            and X.shape[1] == self._features <= _SMALL_BUFFER_VALUES
        ):
            rows, raw, rows_at, raw_at = self._small_buffers(1)
            rows[0] = X[0]
            self._entry(rows_at, raw_at, 0, 1)
            # As compiled_output and first_argmax on arrays: the probability rounded to float32,
            # its complement computed in float32, label 1 only when strictly larger.
            positive = np.float32(raw[0])
            negative = _ONE32 - positive
            probabilities = np.empty((1, 2), dtype=np.float32)
            probabilities[0, 0] = negative
            probabilities[0, 1] = positive
            return probabilities, np.array([1 if positive > negative else 0], dtype=np.int64)
        return super().predict_indexed(X)

    def _small_buffers(self, n: int) -> tuple[np.ndarray, np.ndarray, int, int]:
        """This thread's input and output buffers for calls of up to ``n`` rows (and their
        addresses): the ones it keeps, or new ones grown to the next power of two (within
        :data:`_SMALL_BUFFER_VALUES`), kept for its next small calls."""
        buffers = getattr(self._local, "buffers", None)
        if buffers is not None and buffers[0].shape[0] >= n:
            return buffers
        capacity = min(
            1 << max(n - 1, 0).bit_length(),
            LEAVES_PARALLEL_ROWS,
            max(n, _SMALL_BUFFER_VALUES // self._features),
        )
        rows = np.empty((capacity, self._features), dtype=np.float64)
        raw = np.empty(capacity * self._outputs, dtype=np.float64)
        buffers = (rows, raw, rows.ctypes.data, raw.ctypes.data)
        self._local.buffers = buffers
        return buffers


class CompiledTrees(Accelerator):
    """A loaded tl2cgen library: ``[N, F]`` float32 rows → probabilities ``[N, C]`` or values.

    Args:
        library: the compiled ``.so``.
        threads: the threads it was recorded with.
        n_classes: classes of a classifier, or None for a regressor.
        min_rows: the smallest call it serves (smaller ones stay on ONNX Runtime).
    """

    engine = "tl2cgen"

    def __init__(self, library: Path, threads: int, n_classes: int | None, min_rows: int) -> None:
        import tl2cgen

        self.library = library
        self.threads = threads
        self.n_classes = n_classes
        self.min_rows = min_rows
        self._engine = tl2cgen.Predictor(str(library), nthread=threads, verbose=False)
        # tl2cgen's predictor serves one thread at a time.
        self._lock = threading.Lock()
        self._driver = _RowDriver.checked(library, self._engine, self._lock, threads, n_classes)

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Probabilities ``[N, C]`` (float32) for a classifier, values ``[N]`` for a regressor.

        ``X`` comes in the model's input type: float64 rows (a model converted in double) are
        compared with the trees' thresholds in double, anything else in float32. ``tune``
        compiles a float model's trees in float32 (float32 probabilities out, nothing to
        narrow), a double model's in float64.
        """
        return self._run(X, labels=False)[0]

    def predict_indexed(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """As :meth:`Accelerator.predict_indexed`; with onnxbridge's row driver the labels come
        from the compiled code, in the pass that computes the rows' outputs."""
        return self._run(X, labels=self.n_classes is not None)

    def _run(self, X: np.ndarray, labels: bool) -> tuple[np.ndarray, np.ndarray | None]:
        dtype = np.float64 if X.dtype == np.float64 else np.float32
        rows = np.ascontiguousarray(X, dtype=dtype)
        driver = self._driver
        index = None
        if driver is not None:
            raw, index = driver(rows, labels)
        else:
            raw = _public_batch(self._engine, self._lock, rows)
        out = compiled_output(raw, len(X), self.n_classes, np.float32, columns=True)
        if labels and index is None:
            index = first_argmax(out)
        return out, index


def _public_batch(engine: Any, lock: threading.Lock, rows: np.ndarray) -> np.ndarray:
    """``engine.predict(tl2cgen.DMatrix(rows))``, tl2cgen's public call, one caller at a time."""
    import tl2cgen

    matrix = tl2cgen.DMatrix(rows, dtype=rows.dtype.name)
    with lock:
        return engine.predict(matrix)


# The prefix of the functions ``tune`` compiles into a tl2cgen library beside the generated code
# (onnxbridge.bench.accelerators.add_row_driver): ``<prefix>_float32`` / ``<prefix>_float64``
# ``(rows*, n, out*, labels* or NULL, parts) -> 0`` over dense rows, ``<prefix>_outputs()``
# (values per row) and ``<prefix>_result_bytes()`` (4: float32 outputs, 8: float64).
ROW_DRIVER = "onnxbridge_rows"
# Calls of at least this many rows are cut into one part per thread (OpenMP, in the library).
DRIVER_PARALLEL_ROWS = 256
_DRIVER_ARGS = (ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int)


class _RowDriver:
    """The tl2cgen library's rows run by onnxbridge's row driver (compiled into it by ``tune``)
    rather than by tl2cgen's runtime: no ``DMatrix`` per call, no zeroed output to allocate
    (the driver zeroes each row's outputs as it goes), and the labels computed in the same pass
    — ``first_argmax`` over the reference forest's 100 000 rows took ~160 µs of a ~1.6 ms call
    (docs/benchmarks.md). Large calls run in one part per thread (at most one per core), on
    the library's OpenMP threads.
    """

    def __init__(self, library: Path, threads: int, n_classes: int | None) -> None:
        lib = ctypes.CDLL(str(library))
        self._rows = {}
        for dtype in (np.float32, np.float64):
            function = getattr(lib, f"{ROW_DRIVER}_{np.dtype(dtype).name}")
            function.argtypes = _DRIVER_ARGS
            function.restype = ctypes.c_int
            self._rows[np.dtype(dtype)] = function
        count = lib[f"{ROW_DRIVER}_outputs"]
        size = lib[f"{ROW_DRIVER}_result_bytes"]
        count.restype = size.restype = ctypes.c_int64
        self._outputs = int(count())
        self._out_type = {4: np.dtype(np.float32), 8: np.dtype(np.float64)}[int(size())]
        self._features = int(lib.get_num_feature())
        # Labels from the compiled code: one output per class, or a binary model's one
        # (the positive class's probability).
        self._labels = n_classes is not None and (
            self._outputs == n_classes or (self._outputs == 1 and n_classes == 2)
        )
        self._library = lib  # keeps the library loaded as long as its functions are used
        self._parts = max(1, min(threads, available_cores()))

    @classmethod
    def checked(
        cls,
        library: Path,
        engine: Any,
        lock: threading.Lock,
        threads: int,
        n_classes: int | None,
    ) -> _RowDriver | None:
        """The driver, or None (tl2cgen's public call then) when the library has none (built
        before it existed) or it disagrees with tl2cgen's own call on probe rows (NaN
        included) — its outputs, and its labels with ``first_argmax`` of the outputs."""
        try:
            driver = cls(library, threads, n_classes)
            probe = np.random.default_rng(0).standard_normal((600, driver._features)) * 10
            probe[1::3, 0] = np.nan
            for dtype in (np.float32, np.float64):
                rows = probe.astype(dtype)
                public = _public_batch(engine, lock, rows)
                raw, index = driver(rows, labels=True)
                if raw.dtype != public.dtype or not np.array_equal(
                    raw.reshape(public.shape), public, equal_nan=True
                ):
                    return None
                if index is not None:
                    out = compiled_output(raw, len(rows), n_classes, np.float32, columns=True)
                    if not np.array_equal(index, first_argmax(out)):
                        return None
        except Exception:
            return None
        return driver

    def __call__(self, rows: np.ndarray, labels: bool) -> tuple[np.ndarray, np.ndarray | None]:
        """``[N, outputs]`` for C-contiguous float32 / float64 ``rows [N, F]``, and with
        ``labels`` (a classifier) each row's class index ``[N]`` int64."""
        n, width = rows.shape
        if width != self._features:
            # The compiled code reads as many columns as the model has, whatever it is given.
            raise AcceleratorError(
                f"the tl2cgen model takes rows of {self._features} features; got an array of "
                f"shape {rows.shape}"
            )
        out = np.empty((n, self._outputs), dtype=self._out_type)
        index = np.empty(n, dtype=np.int64) if labels and self._labels else None
        function = self._rows[rows.dtype]
        parts = self._parts if n >= DRIVER_PARALLEL_ROWS else 1
        labels_at = None if index is None else index.ctypes.data
        if function(rows.ctypes.data, n, out.ctypes.data, labels_at, parts):
            raise AcceleratorError("the tl2cgen library's row driver could not allocate memory")
        return out, index


def compiled_output(
    raw: Any, n_rows: int, n_classes: int | None, dtype: Any = np.float64, *, columns: bool = False
) -> np.ndarray:
    """Compiled engines' outputs → ``[N, C]`` probabilities or ``[N]`` values of ``dtype``.

    With ``columns`` a classifier's probabilities that need converting to ``dtype`` come column
    by column in memory (an ``[N, C]`` array in Fortran order, the same values): the conversion
    writes them so in the same pass, and the labels computed from them next (``first_argmax``)
    need no transposing copy of their own. Scores already of ``dtype`` are returned as they are
    (a view of ``raw``: pass a buffer that is the caller's to hand out).
    """
    if n_classes is not None and columns:
        scores = np.asarray(raw).reshape(n_rows, -1)
        if scores.shape[1] == 1 and n_classes == 2:
            # Binary models give the positive class's probability only. (Spelled for speed:
            # this runs on single rows too; the subtraction is in ``dtype``, as before.)
            out = np.empty((2, n_rows), dtype=dtype)
            positive = out[1]
            positive[...] = scores.reshape(n_rows)
            np.subtract(out.dtype.type(1), positive, out=out[0])
            return out.T
        if scores.dtype == dtype:
            # Nothing to convert: the scores as they are (first_argmax makes the one
            # column-ordered copy it needs, faster than converting here and reading after).
            return scores
        out = np.empty((scores.shape[1], n_rows), dtype=dtype)
        np.copyto(out, scores.T, casting="unsafe")
        return out.T
    out = np.asarray(raw, dtype=dtype).reshape(n_rows, -1)
    if n_classes is None:
        return out.reshape(n_rows) if out.shape[1] == 1 else out
    if out.shape[1] == 1 and n_classes == 2:
        # Binary models give the positive class's probability only.
        return np.hstack([1.0 - out, out])
    return out


def check_native_trust(trust_native: bool, what: str) -> None:
    """Refuse to load native code the caller has not trusted: the one check before any
    compiled library of a bundle is opened.

    Args:
        trust_native: the caller's explicit ``trust_native=True`` / ``--trust-native``.
        what: the library, as the message names it.

    Raises:
        UnsafeModelFileError: without ``trust_native``.
    """
    if not trust_native:
        raise UnsafeModelFileError(
            f"{what} is native code, and loading it runs that code with your rights; a hash in "
            "the same bundle shows it is unchanged, not who made it: if you made this bundle "
            "yourself (tune --engines all), pass trust_native=True, or leave out "
            "accelerator=True",
            arguments=("trust_native", "accelerator"),
        )


def load_accelerator(
    model_path: Path | None,
    record: dict[str, Any] | None,
    n_classes: int | None,
    *,
    trust_native: bool = False,
) -> Accelerator:
    """The recorded accelerator of the bundle holding ``model_path``, loaded and checked.

    Args:
        model_path: the bundle's ``model.onnx``.
        record: the accelerator ``tune`` recorded in the model's metadata.
        n_classes: the model's classes (None for a regressor).
        trust_native: the caller trusts this bundle's native code (:func:`check_native_trust`);
            nothing is opened without it.

    Raises:
        UnsafeModelFileError: without ``trust_native``; no file was opened.
        AcceleratorError: no bundle, nothing recorded, an engine that cannot be loaded here,
            its library not installed, or a file that is missing or changed since ``tune``.
    """
    hint = "run `onnxbridge tune BUNDLE --engines all` on a bundle with model.skops first"
    if model_path is None:
        raise AcceleratorError(
            "an accelerator is loaded from a bundle's folder; pass the bundle's model.onnx path, "
            "not the model's bytes"
        )
    if not record:
        raise AcceleratorError(
            f"{str(model_path)!r} has no accelerator recorded (tune records one only when it is "
            f"equivalent and faster); {hint}, or leave out accelerator=True",
            arguments=("accelerator",),
        )
    engine = record.get("engine")
    library = record.get("library")
    model_text = record.get("model_text")
    if (
        engine not in ("tl2cgen", "lleaves")
        or not library
        or (engine == "lleaves" and not model_text)
    ):
        raise AcceleratorError(
            f"the recorded accelerator ({engine}) has no compiled library to load; re-run {hint} "
            "(or leave out accelerator=True)",
            arguments=("accelerator",),
        )
    if importlib.util.find_spec(engine) is None:
        raise AcceleratorError(
            f"the recorded accelerator needs {engine}: pip install 'onnxbridge[accel]' "
            "(or leave out accelerator=True)",
            arguments=("accelerator",),
        )
    check_native_trust(
        trust_native, f"the recorded accelerator of {str(model_path)!r} ({engine}: {library})"
    )
    from onnxbridge.bundle import Bundle

    folder = model_path.parent
    try:
        bundle = Bundle.open(folder)
    except BundleError as exc:
        raise AcceleratorError(
            f"the accelerator's files cannot be trusted: {first_line(exc)}; re-run {hint}"
        ) from exc
    paths = [_checked_file(bundle, str(name), hint) for name in (library, model_text) if name]
    threads = int(record.get("threads") or 1)
    min_rows = int(record.get("min_rows") or 1)
    try:
        if engine == "lleaves":
            return LeavesTrees(paths[0], paths[1], threads, n_classes, min_rows)
        return CompiledTrees(paths[0], threads=threads, n_classes=n_classes, min_rows=min_rows)
    except Exception as exc:  # the engines raise their own errors for files they cannot load
        raise AcceleratorError(
            f"{engine} could not load {str(paths[0])!r} ({first_line(exc)}); re-run {hint}"
        ) from exc


def _checked_file(bundle: Any, name: str, hint: str) -> Path:
    """``bundle.path / name`` after checking it is inside the bundle and matches its recorded
    hash."""
    folder = bundle.path
    try:
        if name not in bundle.card.get("files", {}):
            raise BundleError(f"card.json records no hash for {name}")
        bundle.check_file(name)
    except BundleError as exc:
        raise AcceleratorError(
            f"the accelerator's files cannot be trusted: {first_line(exc)}; re-run {hint}"
        ) from exc
    path = (folder / name).resolve()
    if folder.resolve() not in path.parents:
        raise AcceleratorError(f"the accelerator file {name!r} is outside the bundle")
    return path


# Up to this many classes, comparing columns beats np.argmax(axis=1), which walks each short row.
_COLUMNWISE_ARGMAX = 16


def first_argmax(matrix: np.ndarray) -> np.ndarray:
    """``[N, C] -> [N]`` int64: the column of each row's largest value, the first of equal ones
    (``np.argmax(matrix, axis=1)`` for finite values, faster for a few columns).

    ``np.argmax`` along a short last axis walks each row on its own; comparing whole columns is
    1.2-10× faster on 10 000 - 100 000 rows of 2-3 classes.
    """
    n_rows, n_cols = matrix.shape
    if n_cols > _COLUMNWISE_ARGMAX or n_cols == 0:
        return np.argmax(matrix, axis=1)
    if n_cols == 1:
        return np.zeros(n_rows, dtype=np.int64)
    if n_cols == 2:
        # Strictly greater: a tie keeps column 0, as argmax does.
        return np.greater(matrix[:, 1], matrix[:, 0]).astype(np.int64)
    # One transposing copy makes every class's column contiguous (none for the accelerators'
    # column-ordered output). The answer is the last column at which the running maximum
    # strictly grew, so it is the largest of j·[column j > max of columns < j]: whole-column
    # comparisons, products and maxima in int8, with no data-dependent branch (np.where or a
    # masked copy branch on each row: 1.6x slower on a forest's probabilities, 4-6x on random
    # ones, 100 000 rows of 3-5 classes).
    columns = np.ascontiguousarray(matrix.T)
    best = np.maximum(columns[0], columns[1])
    index = np.greater(columns[1], columns[0]).view(np.int8)
    for j in range(2, n_cols):
        column = columns[j]
        larger = np.greater(column, best).view(np.int8)
        if j < n_cols - 1:
            np.maximum(best, column, out=best)
        np.multiply(larger, np.int8(j), out=larger)
        np.maximum(index, larger, out=index)
    return index.astype(np.int64)
