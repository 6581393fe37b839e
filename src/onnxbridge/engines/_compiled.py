"""Compiled engines: the trees of a bundle compiled to native code, used on request.

``onnxbridge tune BUNDLE --engines all`` builds compiled copies of a bundle's trees (tl2cgen for
scikit-learn ensembles and LightGBM, lleaves for LightGBM; :mod:`onnxbridge.engines._build`),
checks them with ``validate``'s probes against the ONNX model and records one only when it is
equivalent and faster, with its files in ``BUNDLE/accelerators/`` (their sha256 in
``card.json``). Nothing uses it by default: ONNX stays the artifact and ONNX Runtime the engine.
``onnxbridge score --accelerator`` (and :class:`~onnxbridge.engines.AcceleratedPredictor`) runs
calls of at least the recorded ``min_rows`` rows on it instead.

**A compiled library is native code**: :func:`load_compiled_engine` opens it only from a bundle,
only when the caller trusts the bundle's native code (``trust_native=True``,
``--trust-native``: :func:`check_native_trust`, checked before any file is opened) and only when
the hash of every file matches the card. The hash proves the files did not change since they
were recorded, not who made them: whoever can write a bundle can write its card too.

- ``tl2cgen``: a shared library (``accelerators/tl2cgen.so``, with onnxbridge's row driver
  compiled in), :class:`CompiledTrees`;
- ``lleaves``: LLVM's object code (``accelerators/lleaves.o``) with the LightGBM model text it
  was compiled from (``accelerators/lightgbm.txt``, which lleaves reads for the model's shape),
  :class:`LeavesTrees`.

Shapes: rows ``X [N, F]`` → probabilities ``[N, C]`` (float32) for a classifier, values ``[N]``
for a regressor (:meth:`CompiledEngine.outputs`), or a whole
:class:`~onnxbridge.runtime.PredictionResult` (:meth:`CompiledEngine.predict`).
"""

from __future__ import annotations

import copy
import ctypes
import importlib.util
import logging
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from onnxbridge.bundle import Bundle
from onnxbridge.errors import AcceleratorError, BundleError, UnsafeModelFileError, first_line
from onnxbridge.runtime import PredictionResult
from onnxbridge.runtime._settings import available_cores

__all__ = [
    "DRIVER_PARALLEL_ROWS",
    "LEAVES_MAX_ROWS",
    "LEAVES_PARALLEL_ROWS",
    "ROW_DRIVER",
    "CompiledEngine",
    "CompiledTrees",
    "LeavesTrees",
    "check_native_trust",
    "compiled_output",
    "first_argmax",
    "load_compiled_engine",
]

# Calls of at least this many rows run lleaves' compiled code on the recorded threads (a kept
# pool); smaller ones on the calling thread alone: on two cores, splitting a 100-row call across
# two threads cost more than it saved, a 300-row one gained (benchmarks/engines.py).
LEAVES_PARALLEL_ROWS = 256
# lleaves' compiled code counts rows in int32: a call has fewer rows than this.
LEAVES_MAX_ROWS = 2**31 - 1

_log = logging.getLogger("onnxbridge.engines")

# The way out every refusal offers: ``onnxbridge.score()`` / ``score --accelerator`` take the
# argument, a caller of ``AcceleratedPredictor.load`` simply keeps the plain Predictor.
_ONNX_RUNTIME_ALONE = (
    "or run on ONNX Runtime alone (leave out accelerator=True, or load no compiled engine)"
)


class CompiledEngine:
    """A compiled copy of a model's trees: the :class:`~onnxbridge.engines.Engine` of
    ``score --accelerator``.

    It takes rows already checked and cast to the model's input type (as
    :meth:`~onnxbridge.runtime.Predictor.prepare` gives them); calls are safe from several
    threads at once.

    Attributes:
        name: ``"tl2cgen"`` or ``"lleaves"``.
        threads: the threads it was recorded with.
        n_classes: classes of a classifier, or None for a regressor.
        min_rows: the smallest call it serves (smaller ones stay on ONNX Runtime).
        classes: the class labels its :meth:`predict` gives, in probability-column order
            (None: the class indices ``0 … C-1``); see :meth:`with_classes`.
    """

    name = ""
    threads = 1
    n_classes: int | None = None
    min_rows = 1
    classes: list[Any] | None = None
    # The label of each class index, when the labels are not the indices themselves.
    _labels: np.ndarray | None = None

    def outputs(self, X: np.ndarray) -> np.ndarray:
        """Probabilities ``[N, C]`` (float32) for a classifier, values ``[N]`` for a regressor."""
        raise NotImplementedError

    def outputs_indexed(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """:meth:`outputs` and, for a classifier, each row's class index ``[N]`` int64 (the
        first largest probability, as ``np.argmax``); None for a regressor."""
        out = self.outputs(X)
        return out, None if self.n_classes is None else first_argmax(out)

    def predict(self, X: np.ndarray) -> PredictionResult:
        """The model's result for ``X``: labels (from :attr:`classes`), probabilities and
        classes of a classifier, values of a regressor."""
        out, index = self.outputs_indexed(X)
        if index is None:
            return PredictionResult(values=out)
        labels = index if self._labels is None else self._labels[index]
        return PredictionResult(labels, out, None, self.classes)

    def with_classes(self, classes: Sequence[Any] | None) -> CompiledEngine:
        """This engine giving ``classes`` as labels (the model's classes, in probability-column
        order; None for a regressor), sharing its loaded library.

        Raises:
            AcceleratorError: the engine gives another number of classes than ``classes``.
        """
        n_classes = len(classes) if classes else None
        if n_classes != self.n_classes:
            raise AcceleratorError(
                f"the accelerator gives {self.n_classes or 'no'} classes, the model "
                f"{n_classes or 'none'}; load it for this model"
            )
        engine = copy.copy(self)
        engine.classes = list(classes) if classes else None
        engine._labels = None
        if classes:
            strings = any(isinstance(c, str) for c in classes)
            table = np.asarray(classes, dtype=object if strings else None)
            # Integer classes 0 … C-1 are their own indices (int64, as ONNX labels are).
            if not (table.dtype.kind in "iu" and np.array_equal(table, np.arange(len(table)))):
                engine._labels = table
        return engine


class LeavesTrees(CompiledEngine):
    """A LightGBM model compiled by lleaves: ``[N, F]`` rows → probabilities ``[N, C]`` or values.

    Args:
        library: the object code ``lleaves.Model.compile(cache=...)`` wrote.
        model_text: the LightGBM model text it was compiled from.
        threads: threads for calls of :data:`LEAVES_PARALLEL_ROWS` rows or more.
        n_classes: classes of a classifier, or None for a regressor.
        min_rows: the smallest call it serves.
    """

    name = "lleaves"

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
        self._model = model
        self._features = int(model.num_feature())
        # A bundle tuned on a larger machine: no more parts than this process has cores.
        self._parts = max(1, min(threads, available_cores()))
        # Started by the first large call and kept: lleaves' own predict starts (and joins) a
        # new pool on every call with more than one job.
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()

    @property
    def parts(self) -> int:
        """How many parts, run side by side, a call of :data:`LEAVES_PARALLEL_ROWS` rows or more
        is cut into: the recorded threads, at most one per core of this process."""
        return self._parts

    def outputs(self, X: np.ndarray) -> np.ndarray:
        """Probabilities ``[N, C]`` (float32) for a classifier, values ``[N]`` for a regressor.

        lleaves computes in float64; float32 rows are widened exactly, so the trees see the
        values the ONNX model sees. Calls of :data:`LEAVES_PARALLEL_ROWS` rows or more are cut
        into :attr:`parts` parts, run side by side on a pool kept for this model (the compiled
        code runs without the GIL), the last part on the calling thread.
        """
        if X.ndim != 2 or X.shape[1] != self._features:
            # The compiled code reads as many columns as the model has, whatever it is given.
            raise AcceleratorError(
                f"the lleaves model takes rows of {self._features} features; got an array of "
                f"shape {X.shape}"
            )
        n = len(X)
        if n >= LEAVES_MAX_ROWS:
            raise AcceleratorError(
                f"lleaves takes fewer than {LEAVES_MAX_ROWS} rows per call; got {n}: "
                "score the rows in batches"
            )
        parts = self._parts if n >= LEAVES_PARALLEL_ROWS else 1
        if parts <= 1:
            raw = self._model.predict(X, n_jobs=1)
        else:
            bounds = [n * i // parts for i in range(parts + 1)]
            pool = self._started_pool()
            pending = [
                pool.submit(self._model.predict, X[bounds[i] : bounds[i + 1]], n_jobs=1)
                for i in range(parts - 1)
            ]
            last = self._model.predict(X[bounds[-2] :], n_jobs=1)
            raw = np.concatenate([future.result() for future in pending] + [last])
        return compiled_output(raw, n, self.n_classes, np.float32, columns=True)

    def _started_pool(self) -> ThreadPoolExecutor:
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self._parts - 1, "onnxbridge-lleaves")
            return self._pool


class CompiledTrees(CompiledEngine):
    """A loaded tl2cgen library: ``[N, F]`` float32 rows → probabilities ``[N, C]`` or values.

    Args:
        library: the compiled ``.so``.
        threads: the threads it was recorded with.
        n_classes: classes of a classifier, or None for a regressor.
        min_rows: the smallest call it serves (smaller ones stay on ONNX Runtime).
    """

    name = "tl2cgen"

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

    @property
    def threshold_type(self) -> str:
        """The type the library compares rows with its thresholds in: ``"float32"`` (a float
        model's trees) or ``"float64"`` (a double model's)."""
        return str(self._engine.threshold_type)

    @property
    def row_driver(self) -> bool:
        """Whether onnxbridge's row driver runs the rows (a library ``tune`` built, checked
        against tl2cgen's own call as it loads); else tl2cgen's public call does."""
        return self._driver is not None

    def outputs(self, X: np.ndarray) -> np.ndarray:
        """Probabilities ``[N, C]`` (float32) for a classifier, values ``[N]`` for a regressor.

        ``X`` comes in the model's input type: float64 rows (a model converted in double) are
        compared with the trees' thresholds in double, anything else in float32. ``tune``
        compiles a float model's trees in float32 (float32 probabilities out, nothing to
        narrow), a double model's in float64.
        """
        return self._run(X, labels=False)[0]

    def outputs_indexed(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """As :meth:`CompiledEngine.outputs_indexed`; with onnxbridge's row driver the labels come
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
# (:func:`onnxbridge.engines._build.add_row_driver`): ``<prefix>_float32`` / ``<prefix>_float64``
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
    rather than in a second one over the probabilities. Large calls run in one part per thread
    (at most one per core), on the library's OpenMP threads.
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
        self._out_type = np.dtype(np.float32) if int(size()) == 4 else np.dtype(np.float64)
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
        except AttributeError:  # a library without the driver's functions
            return None
        probe = np.random.default_rng(0).standard_normal((600, driver._features)) * 10
        probe[1::3, 0] = np.nan
        for dtype in (np.float32, np.float64):
            rows = probe.astype(dtype)
            public = _public_batch(engine, lock, rows)
            raw, index = driver(rows, labels=True)
            same = raw.dtype == public.dtype and np.array_equal(
                raw.reshape(public.shape), public, equal_nan=True
            )
            if same and index is not None:
                out = compiled_output(raw, len(rows), n_classes, np.float32, columns=True)
                same = np.array_equal(index, first_argmax(out))
            if not same:
                _log.warning(
                    "%s: onnxbridge's row driver disagrees with tl2cgen on %s probe rows; the "
                    "rows run through tl2cgen's own call",
                    library,
                    np.dtype(dtype).name,
                )
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
            "yourself (tune --engines all), pass trust_native=True, " + _ONNX_RUNTIME_ALONE,
            arguments=("trust_native", "accelerator"),
        )


def load_compiled_engine(
    model_path: Path | None,
    record: dict[str, Any] | None,
    classes: Sequence[Any] | None,
    *,
    trust_native: bool = False,
) -> CompiledEngine:
    """The compiled engine ``tune`` recorded for the bundle holding ``model_path``, loaded and
    checked.

    Args:
        model_path: the bundle's ``model.onnx`` (or the bundle's folder); None for a model
            given as bytes, which has no bundle (refused).
        record: the accelerator ``tune`` recorded in the model's metadata
            (:attr:`~onnxbridge.runtime.TuningSpec.accelerator`).
        classes: the model's classes in probability-column order (None for a regressor): the
            labels the engine gives.
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
            f"equivalent and faster); {hint}, {_ONNX_RUNTIME_ALONE}",
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
            f"the recorded accelerator ({engine}) has no compiled library to load; re-run {hint}, "
            + _ONNX_RUNTIME_ALONE,
            arguments=("accelerator",),
        )
    if importlib.util.find_spec(engine) is None:
        raise AcceleratorError(
            f"the recorded accelerator needs {engine}: pip install 'onnxbridge[accel]', "
            + _ONNX_RUNTIME_ALONE,
            arguments=("accelerator",),
        )
    check_native_trust(
        trust_native, f"the recorded accelerator of {str(model_path)!r} ({engine}: {library})"
    )
    folder = model_path if model_path.is_dir() else model_path.parent
    try:
        bundle = Bundle.open(folder)
    except BundleError as exc:
        raise AcceleratorError(
            f"the accelerator's files cannot be trusted: {first_line(exc)}; re-run {hint}"
        ) from exc
    paths = [_checked_file(bundle, str(name), hint) for name in (library, model_text) if name]
    threads = int(record.get("threads") or 1)
    min_rows = int(record.get("min_rows") or 1)
    n_classes = len(classes) if classes else None
    try:
        if engine == "lleaves":
            loaded: CompiledEngine = LeavesTrees(paths[0], paths[1], threads, n_classes, min_rows)
        else:
            loaded = CompiledTrees(paths[0], threads, n_classes, min_rows)
    except Exception as exc:  # the engines raise their own errors for files they cannot load
        raise AcceleratorError(
            f"{engine} could not load {str(paths[0])!r} ({first_line(exc)}); re-run {hint}"
        ) from exc
    return loaded.with_classes(classes)


def _checked_file(bundle: Bundle, name: str, hint: str) -> Path:
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
    faster for the few classes of most models.
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
    # masked copy branch on each row, and were slower).
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
