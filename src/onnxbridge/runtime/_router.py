"""The router: which session, with which settings, runs a call of N rows.

A model has up to two regimes (:class:`~onnxbridge.runtime._settings.TuningSpec`): calls of at
most ``latency_max_rows`` rows run on the latency settings, larger calls on the throughput
settings (:meth:`TuningSpec.settings_for`, the one place of that rule). :class:`Router` owns the
regimes and the sessions behind them; ``Predictor`` runs every call through one, and
``onnxbridge tune`` measures its candidates through one, so what tune measures is what predict
runs. Besides the regimes it owns the speed-ups of a call:

- graph rewrites (:mod:`onnxbridge.runtime._rewrites`) for large calls only: a per-call regime runs
  smaller calls on the twin of its settings without them (:func:`settings_for_rows`);
- one session for settings whose rewrites change nothing in the model;
- rows split across threads (:class:`RowSplitSession`, ``SessionSettings.row_split``) on calls
  large enough for two parts (:func:`split_parts`);
- the bound path for small numeric arrays (:mod:`onnxbridge.runtime._fastpath`).

``speedups=False`` turns all of them off: one plain ``onnxruntime.InferenceSession`` runs every
call with ``session.run``.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import mmap
import os
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

import numpy as np

from onnxbridge._meta import ModelMetadata
from onnxbridge._onnxfile import external_data_locations, read_model_bytes
from onnxbridge.errors import InferenceError, OnnxModelError, SessionSettingsError, first_line
from onnxbridge.runtime._fastpath import DEFAULT_MAX_ROWS, BoundRunner, run_options
from onnxbridge.runtime._inputs import InputSchema
from onnxbridge.runtime._pool import LazyPool
from onnxbridge.runtime._rewrites import apply_rewrites, passes_for
from onnxbridge.runtime._rewrites.linear_dot import LINEAR_GEMV_MIN_ROWS
from onnxbridge.runtime._rewrites.tree_blocks import (
    DEFAULT_TREE_BLOCK_NODES,
    ONE_THREAD_TREE_BLOCK_NODES,
)
from onnxbridge.runtime._settings import SessionSettings, TuningSpec, available_cores

__all__ = [
    "MULTI_THREAD_BLOCK_MIN_ROWS",
    "ROW_SPLIT_MIN_PART",
    "Router",
    "RowSplitSession",
    "blocks_from_rows",
    "default_regimes",
    "open_ort_session",
    "settings_for_rows",
    "split_parts",
    "tree_block_nodes_for",
]

logger = logging.getLogger("onnxbridge.runtime")

# Rows a part of a split call has at least: handing a part to another thread has a fixed cost
# that a part of fewer rows does not win back.
ROW_SPLIT_MIN_PART = 1024
# Sessions of several intra-op threads split each block's rows between threads, once per block:
# below a few thousand rows that costs more than the blocks save.
MULTI_THREAD_BLOCK_MIN_ROWS = 4096
# One-thread sessions gain from blocks on any call too large for the bound path.
SINGLE_THREAD_BLOCK_MIN_ROWS = DEFAULT_MAX_ROWS + 1


def blocks_from_rows(settings: SessionSettings) -> int:
    """The smallest call that gains from running on the blocked graph with ``settings``."""
    if settings.intra_op_num_threads == 1:
        return SINGLE_THREAD_BLOCK_MIN_ROWS
    return MULTI_THREAD_BLOCK_MIN_ROWS


def tree_block_nodes_for(settings: SessionSettings) -> int:
    """The block size for trees run with ``settings``: smaller when each operator runs on one
    thread (one intra-op thread, or the rows split one thread per part)."""
    threads = settings.intra_op_num_threads or available_cores()
    if threads == 1 or settings.row_split > 1:
        return ONE_THREAD_TREE_BLOCK_NODES
    return DEFAULT_TREE_BLOCK_NODES


def settings_for_rows(settings: SessionSettings, rows: int) -> SessionSettings:
    """The settings a per-call regime runs a call of ``rows`` rows with: trees in blocks only
    from :func:`blocks_from_rows` rows on, linear operators as dot products only from
    :data:`~onnxbridge.runtime._rewrites.linear_dot.LINEAR_GEMV_MIN_ROWS`, the graph as it is
    below."""
    if settings.tree_block_nodes and rows < blocks_from_rows(settings):
        settings = replace(settings, tree_block_nodes=0)
    if settings.linear_gemv and rows < LINEAR_GEMV_MIN_ROWS:
        settings = replace(settings, linear_gemv=False)
    return settings


def split_parts(row_split: int, rows: int) -> int:
    """The parts a call of ``rows`` rows is cut into with ``row_split``; below 2 it runs unsplit.
    Every part has at least :data:`ROW_SPLIT_MIN_PART` rows."""
    return min(row_split, rows // ROW_SPLIT_MIN_PART)


def _unsplit_below(settings: SessionSettings, rows: int) -> SessionSettings:
    """``settings`` without its row split when a call of ``rows`` rows runs unsplit."""
    if settings.row_split and split_parts(settings.row_split, rows) < 2:
        return replace(settings, row_split=0)
    return settings


def _row_twins(settings: SessionSettings) -> set[SessionSettings]:
    """Every settings :func:`settings_for_rows` gives for ``settings``, whatever the rows."""
    sizes = (1, blocks_from_rows(settings), LINEAR_GEMV_MIN_ROWS)
    return {settings} | {settings_for_rows(settings, rows) for rows in sizes}


def _without_rewrites(settings: SessionSettings) -> SessionSettings:
    return replace(settings, tree_block_nodes=0, linear_gemv=False)


def default_regimes(base: SessionSettings) -> TuningSpec:
    """The regimes of an untuned model: ``base`` as it is for calls the blocks do not pay on,
    ``base`` with large tree ensembles in blocks and one-column linear operators as dot products
    for larger calls (nothing changes for models without either)."""
    return TuningSpec(
        latency=base,
        throughput=replace(base, tree_block_nodes=tree_block_nodes_for(base), linear_gemv=True),
        latency_max_rows=(
            DEFAULT_MAX_ROWS if base.intra_op_num_threads == 1 else MULTI_THREAD_BLOCK_MIN_ROWS - 1
        ),
    )


def _plain(settings: SessionSettings) -> SessionSettings:
    """``settings`` without any of onnxbridge's speed-ups (ONNX Runtime's own options only)."""
    return replace(settings, tree_block_nodes=0, linear_gemv=False, row_split=0)


class Router:
    """Route calls of a model to the session of their regime.

    Args:
        model: path to a ``.onnx`` file, or its bytes.
        spec: the regimes. None: the spec stored in the model when ``tuned``, else every call
            runs with ``settings`` when given, else onnxbridge's untuned regimes
            (:func:`default_regimes` of :meth:`SessionSettings.onnxbridge_default`).
        settings: the settings of the first session opened (it reads the model's metadata),
            and of every call when there is no spec.
        providers: ONNX Runtime execution providers (CPU by default).
        speedups: False runs every call on one plain ``onnxruntime.InferenceSession`` with
            ``settings`` (or ``onnxbridge_default``) minus rewrites and row splits, through
            ``session.run``: no regimes, no rewrites, no bound path.
        regime: ``"throughput"`` runs every call, whatever its size, on the throughput
            settings (one session: results never depend on the batch size); None routes by
            size.
        tuned: with ``spec`` and ``settings`` None, use the spec ``onnxbridge tune`` stored in
            the model, if any.
        overrides: fields replaced in the default settings and in every regime of the spec
            (the caller's thread count, say); not in ``settings``, which are taken as given.

    Raises:
        OnnxModelError: the model cannot be read or loaded.
        SessionSettingsError: an unknown ``regime``, or a damaged stored spec.
    """

    def __init__(
        self,
        model: str | os.PathLike[str] | bytes,
        spec: TuningSpec | None = None,
        *,
        settings: SessionSettings | None = None,
        providers: Sequence[str] | None = None,
        speedups: bool = True,
        regime: Literal["throughput"] | None = None,
        tuned: bool = False,
        overrides: Mapping[str, Any] | None = None,
    ) -> None:
        if regime not in (None, "throughput"):
            raise SessionSettingsError(f"regime must be None or 'throughput', got {regime!r}")
        self._source: str | bytes = model if isinstance(model, bytes) else str(model)
        self._where = "the given bytes" if isinstance(model, bytes) else repr(str(model))
        # External data is read only from beside the model (refused before ORT opens it), and
        # handed to each session as buffers (see open_ort_session).
        self._data_files: dict[str, Path] = {}
        if not isinstance(model, bytes) and Path(model).is_file():
            self._data_files = external_data_locations(model)
        self._providers = list(providers or ["CPUExecutionProvider"])
        # Re-entrant: a row-split session opens the sessions of its parts.
        self._lock = threading.RLock()
        # Sessions opened so far, weakly, by the settings they really run (see _open).
        self._opened: weakref.WeakValueDictionary[SessionSettings, Any] = (
            weakref.WeakValueDictionary()
        )
        # Settings whose rewritten graph ONNX Runtime refused -> what runs instead.
        self._runs_as: dict[SessionSettings, SessionSettings] = {}
        base = settings or replace(SessionSettings.onnxbridge_default(), **(overrides or {}))
        if not speedups:
            base, spec = _plain(base), None
        self._sessions: dict[SessionSettings, Any] = {}
        first = self._session(base)
        self.props: dict[str, str] = dict(first.get_modelmeta().custom_metadata_map)
        self._output_names = [o.name for o in first.get_outputs()]
        # What `onnxbridge tune` stored, or the caller gave (None: untuned).
        if spec is None and tuned and settings is None and speedups:
            spec = TuningSpec.find_in_props(self.props)
        if spec is not None and overrides:
            spec = replace(
                spec,
                latency=replace(spec.latency, **overrides),
                throughput=replace(spec.throughput, **overrides),
            )
        self.tuning: TuningSpec | None = spec
        if spec is None and settings is None and speedups:
            spec = default_regimes(base)
        if spec is None:
            spec = TuningSpec(base, base, latency_max_rows=0)  # one session for every call
        else:  # settings tuned on a bigger machine must not oversubscribe this one
            spec = replace(
                spec, latency=spec.latency.clamped(), throughput=spec.throughput.clamped()
            )
        if regime == "throughput":
            spec = replace(spec, latency_max_rows=0)
        self._start(base, spec, speedups)

    def _start(self, base: SessionSettings, spec: TuningSpec, speedups: bool) -> None:
        """Open the single-row session, drop the first one if no call uses its settings, and
        prepare the bound path."""
        self._spec = spec
        # Per-call regimes run calls too small to gain from the rewrites on their settings' twin
        # without them; a single regime runs one session whatever the size, so its results never
        # depend on it.
        self._per_call = spec.latency_max_rows > 0
        self._runners: dict[str, BoundRunner] = {}
        first = self._sessions[base]
        self._fast_input = _fast_input(first, self.props) if speedups else None
        self._run_options = run_options()
        # Single rows are what a server waits on: open their session now, not mid-request.
        self.session_for(1)
        used = {spec.throughput} if not self._per_call else {spec.latency, spec.throughput}
        if self._per_call:
            used = {twin for u in used for twin in _row_twins(u)}
        used |= {replace(u, row_split=0) for u in used}
        if base not in used:
            del self._sessions[base]  # needed only to read the model's metadata

    @property
    def settings(self) -> dict[str, SessionSettings]:
        """``{"latency": ..., "throughput": ...}`` actually used (clamped to the cores here)."""
        return {"latency": self._spec.latency, "throughput": self._spec.throughput}

    @property
    def latency_max_rows(self) -> int:
        """Calls of at most this many rows run on the latency settings."""
        return self._spec.latency_max_rows

    def settings_for(self, rows: int) -> SessionSettings:
        """The settings a call of ``rows`` rows really runs with: its regime's settings, without
        the rewrites a per-call regime leaves to larger calls (:func:`settings_for_rows`), without
        the row split when the call is too small for two parts (:func:`split_parts`), and
        without a rewrite ONNX Runtime refused. Opens the call's session when it asks for a
        rewrite: whether ONNX Runtime takes the rewritten graph is known only then.
        """
        wanted = self._wanted(rows)
        if wanted.tree_block_nodes or wanted.linear_gemv:
            self._session(wanted)
            return self._runs_as.get(wanted, wanted)
        return wanted

    def _wanted(self, rows: int) -> SessionSettings:
        """The settings a call of ``rows`` rows asks for; its session is opened with them."""
        settings = self._spec.settings_for(rows)
        if self._per_call:  # rewrites only pay on large calls: smaller ones run the graph as is
            settings = settings_for_rows(settings, rows)
        return _unsplit_below(settings, rows)

    def session_for(self, rows: int) -> Any:
        """The session a call of ``rows`` rows runs on (opened on first use)."""
        return self._session(self._wanted(rows))

    def _session(self, settings: SessionSettings) -> Any:
        session = self._sessions.get(settings)
        if session is None:
            with self._lock:
                session = self._sessions.get(settings)
                if session is None:
                    session = self._sessions[settings] = self._open(settings)
        return session

    def open_all(self) -> None:
        """Open every regime's sessions now, not on the first call that needs them."""
        spec = self._spec
        regimes = (
            (spec.latency, 1, spec.latency_max_rows),
            (spec.throughput, spec.first_throughput_rows, None),
        )
        for settings, low, high in regimes:
            # The sizes from which a call may run on another session of the same regime.
            for size in (
                1,
                blocks_from_rows(settings),
                LINEAR_GEMV_MIN_ROWS,
                2 * ROW_SPLIT_MIN_PART,
            ):
                size = max(low, size)
                if high is None or size <= high:
                    self.session_for(size)

    def run(self, feeds: dict[str, np.ndarray]) -> list[Any]:
        """Outputs in graph order for prepared ``feeds``, on the session of their row count.

        Raises:
            InferenceError: ONNX Runtime failed.
        """
        session = self.session_for(rows_of(feeds))
        try:
            return session.run(self._output_names, feeds, self._run_options)
        except Exception as exc:
            raise InferenceError(f"onnxruntime failed to run the model: {first_line(exc)}") from exc

    def call(self, data: Any, prepare: Callable[[Any], dict[str, np.ndarray]]) -> list[Any]:
        """Outputs in graph order for ``data``, run the way ``Predictor.predict`` runs it.

        A numeric array ``[N, F]`` (or one row ``[F]``) of 1 to ``DEFAULT_MAX_ROWS`` rows takes
        the bound path of its regime (:mod:`~onnxbridge.runtime._fastpath`) when that serves it
        exactly as the general path would; anything else is turned into feeds by
        ``prepare(data)`` (which raises the right error for bad input) and run by :meth:`run`.
        ``onnxbridge tune`` times its candidates through here, so it measures what ``predict``
        runs.

        Raises:
            InferenceError: ONNX Runtime failed.
        """
        if type(data) is np.ndarray and self._fast_input is not None:
            rows = data.shape[0] if data.ndim == 2 else 1
            if 0 < rows <= DEFAULT_MAX_ROWS:
                regime = self._spec.regime_for(rows)
                runner = self._runners.get(regime)
                if runner is None:
                    runner = self._make_runner(regime, rows)
                outputs = runner.try_run(data)
                if outputs is not None:
                    return outputs
        return self.run(prepare(data))

    def _make_runner(self, regime: str, rows: int) -> BoundRunner:
        """The bound path of ``regime``, on the session of the small calls it serves: with
        rewrites for large calls only, a first call of many rows must not bind later small
        calls to a rewritten graph."""
        assert self._fast_input is not None
        size = min(rows, DEFAULT_MAX_ROWS)
        if regime == "throughput":
            size = max(size, self._spec.first_throughput_rows)
        name, dtype, width, check_missing = self._fast_input
        runner = BoundRunner(
            self.session_for(size), name, dtype, width, check_missing=check_missing
        )
        self._runners[regime] = runner
        return runner

    def _open(self, settings: SessionSettings) -> Any:
        """A session running ``settings``; settings whose rewrites change nothing in this model
        share the session of the graph they run."""
        if settings.row_split >= 2:
            return self._open_split(settings)
        effective, rewritten = settings, None
        try:
            if settings.tree_block_nodes or settings.linear_gemv:
                data = _rewritable(self._source)
                if data is None:
                    effective = _without_rewrites(settings)
                else:
                    effective, rewritten = apply_rewrites(data, settings)
            session = self._opened.get(effective)
            if session is None:
                session, runs = _open_graph(
                    self._source, rewritten, effective, self._providers, self._data_files
                )
                if runs != effective:
                    self._runs_as[effective] = runs
        except OnnxModelError:  # its own one line (external data changed since it was opened)
            raise
        except OSError as exc:
            raise OnnxModelError(f"cannot read {self._where} ({exc})") from exc
        except Exception as exc:  # ORT raises its own Fail / InvalidProtobuf / InvalidGraph
            raise OnnxModelError(
                f"{self._where} is not a loadable ONNX model ({first_line(exc)}); pass a .onnx "
                "file written by `onnxbridge convert` or another exporter"
            ) from exc
        if effective in self._runs_as:  # the rewritten graph was refused: the plain one runs
            self._runs_as[settings] = _without_rewrites(settings)
        self._opened[effective] = self._opened[settings] = session
        return session

    def _open_split(self, settings: SessionSettings) -> RowSplitSession:
        """A row-split session: unsplit calls run on the session of ``settings`` without the
        split, the parts on its one-thread twin (the same session when it has one thread)."""
        whole = replace(settings, row_split=0)
        part = whole
        if settings.intra_op_num_threads != 1:
            part = replace(whole, intra_op_num_threads=1, allow_spinning=False)
        split = RowSplitSession(self._session(whole), settings.row_split, self._session(part))
        if whole in self._runs_as:
            self._runs_as[settings] = replace(self._runs_as[whole], row_split=settings.row_split)
        return split


def _rewritable(model: str | os.PathLike[str] | bytes) -> bytes | None:
    """The whole model as bytes for the rewrite passes (external data read in), or None when
    it cannot be one protobuf message (over 2 GiB with its tensors): then the graph runs as it
    is, and the log says why."""
    if isinstance(model, bytes):
        return model
    data = read_model_bytes(model)
    if data is None:
        logger.info(
            "%s keeps over 2 GiB of tensors in external data; the graph rewrites need the whole "
            "model as one protobuf message, so it runs as it is",
            model,
        )
    return data


def _fast_input(session: Any, props: dict[str, str]) -> tuple[str, Any, int, bool] | None:
    """``(name, numpy dtype, width, refuses NaN)`` of a model with one numeric tensor input
    ``[N, width]`` — what the bound path feeds — or None; read from the same
    :class:`~onnxbridge.runtime._inputs.InputSchema` that prepares the general path's feeds."""
    schema = InputSchema(ModelMetadata.from_props(props), session.get_inputs())
    dtype = schema.input_dtype
    if dtype is None or dtype.kind not in "fiub" or schema.width is None:
        return None
    return schema.inputs[0].name, dtype, schema.width, schema.refuses_missing


class RowSplitSession:
    """An ONNX Runtime session whose large calls are cut into parts run side by side.

    ``run`` has ``InferenceSession.run``'s shape. A call of ``N`` rows (every feed ``[N, ...]``)
    with room for at least two parts of :data:`ROW_SPLIT_MIN_PART` rows is cut into up to
    ``parts`` consecutive slices, run on ``part_session`` (one intra-op thread): the caller's
    thread runs the first, a small pool the others (ONNX Runtime releases the GIL while it runs,
    and one session serves concurrent runs), and the outputs are joined in order. Rows are scored
    independently, so the results are those of one unsplit call on ``part_session``, bit for
    bit. Smaller calls run on ``session`` as they are, with its own threads. Everything else
    (``get_inputs``, ``io_binding``, …) is ``session``'s.

    Args:
        session: the ``onnxruntime.InferenceSession`` for calls too small to split.
        parts: the most parts a call is cut into (2 or more).
        part_session: the session the parts run on (one intra-op thread); ``session`` if None.
    """

    def __init__(self, session: Any, parts: int, part_session: Any = None) -> None:
        self.session = session
        self.part_session = part_session if part_session is not None else session
        self.parts = parts
        self._pool = LazyPool(parts - 1, "onnxbridge-rows")

    def __getattr__(self, name: str) -> Any:
        # Only for what this class does not have; never for its own fields (copy, pickle).
        if name.startswith("__") or name in ("session", "part_session"):
            raise AttributeError(name)
        return getattr(self.session, name)

    def run(self, output_names: Any, feeds: dict[str, Any], run_options: Any = None) -> list[Any]:
        """``session.run`` over the parts of the call, outputs joined in row order."""
        rows = rows_of(feeds)
        parts = split_parts(self.parts, rows)
        if parts < 2:
            return self.session.run(output_names, feeds, run_options)
        bounds = [rows * i // parts for i in range(parts + 1)]
        slices = [
            {name: value[start:stop] for name, value in feeds.items()}
            for start, stop in itertools.pairwise(bounds)
        ]
        pool = self._pool.get()
        run = self.part_session.run
        futures = [pool.submit(run, output_names, part, run_options) for part in slices[1:]]
        results = [run(output_names, slices[0], run_options)]
        results += [future.result() for future in futures]
        return [_join([r[i] for r in results]) for i in range(len(results[0]))]


def rows_of(feeds: Mapping[str, Any]) -> int:
    """Rows in prepared feeds (0 for none)."""
    for value in feeds.values():
        return len(value)
    return 0


def _join(pieces: list[Any]) -> Any:
    """One output from its parts: arrays concatenated along rows, lists (ZipMap) chained."""
    if isinstance(pieces[0], list):
        return [item for piece in pieces for item in piece]
    return np.concatenate(pieces)


def open_ort_session(
    model: str | os.PathLike[str] | bytes,
    settings: SessionSettings,
    providers: Sequence[str] | None = None,
) -> Any:
    """An ``onnxruntime.InferenceSession`` of ``model`` (a path or bytes) with ``settings``.

    With ``settings.tree_block_nodes`` / ``settings.linear_gemv`` the session runs the graph
    rewritten by those passes (:mod:`onnxbridge.runtime._rewrites`) when they change something;
    the model is never changed on disk. With ``settings.row_split`` of 2 or more it comes
    wrapped in a :class:`RowSplitSession` whose parts run on a one-thread twin (the same session
    when it has one thread already). Should a rewrite fail or not load, the failure is logged and
    the graph as it is runs instead. ONNX Runtime's own errors propagate (callers wrap them).

    A model's external data files are handed to ONNX Runtime as buffers (mapped only while the
    session is created), and it copies what it needs: left to itself it would keep the files
    mapped, and a data file rewritten in place under a running session would change its answers
    or end the process (``SIGBUS``). (ONNX Runtime before 1.24 has no such call: it maps them.)

    Raises:
        OnnxModelError: the model's external data is outside its folder, missing or damaged.
    """
    chosen = list(providers or ["CPUExecutionProvider"])
    data_files = {} if isinstance(model, bytes) else external_data_locations(model)
    session = _open_one(model, settings, chosen, data_files)
    if settings.row_split < 2:
        return session
    if settings.intra_op_num_threads == 1:
        return RowSplitSession(session, settings.row_split)
    # The parts run on one intra-op thread each (the cores are taken by the parts).
    single = replace(settings, intra_op_num_threads=1, allow_spinning=False, row_split=0)
    return RowSplitSession(
        session, settings.row_split, _open_one(model, single, chosen, data_files)
    )


def _open_one(
    model: str | os.PathLike[str] | bytes,
    settings: SessionSettings,
    chosen: list[str],
    data_files: Mapping[str, Path] | None = None,
) -> Any:
    rewritten = None
    data = _rewritable(model) if settings.tree_block_nodes or settings.linear_gemv else None
    if data is not None:
        _, rewritten = apply_rewrites(data, settings)
    return _open_graph(model, rewritten, settings, chosen, data_files)[0]


def _open_graph(
    model: str | os.PathLike[str] | bytes,
    rewritten: bytes | None,
    settings: SessionSettings,
    chosen: list[str],
    data_files: Mapping[str, Path] | None = None,
) -> tuple[Any, SessionSettings]:
    """A session of ``rewritten`` (the graph ``settings`` asks for), else of ``model`` as it is
    when there is no rewrite or ONNX Runtime refuses it (logged); and the settings it runs.
    ``data_files``: the model's external data, ``{location: file}`` (:func:`open_ort_session`)."""
    import onnxruntime as ort

    options = settings.to_session_options()
    if rewritten is not None:
        try:
            return ort.InferenceSession(rewritten, options, providers=chosen), settings
        except Exception as exc:  # a rewrite ONNX Runtime refuses: logged, graph as it is
            logger.warning(
                "ONNX Runtime refused the graph rewritten by %s, running the graph as it is: %s",
                " + ".join(p.name for p in passes_for(settings)),
                first_line(exc),
            )
            settings = _without_rewrites(settings)
    # The graph as it is opens from the path; its external data from buffers, by location.
    source: Any = model if isinstance(model, bytes) else str(model)
    with _data_buffers(options, data_files or {}):
        return ort.InferenceSession(source, options, providers=chosen), settings


@contextlib.contextmanager
def _data_buffers(options: Any, data_files: Mapping[str, Path]) -> Iterator[None]:
    """Hand ``options`` the external data files as buffers for a block (the session's
    creation): each file mapped read-only, once, and unmapped after; ONNX Runtime keeps its
    own copy of what it reads."""
    give = getattr(options, "add_external_initializers_from_files_in_memory", None)
    if not data_files or give is None:
        yield
        return
    with contextlib.ExitStack() as stack:
        views: dict[Path, Any] = {}
        for file in dict.fromkeys(data_files.values()):
            handle = stack.enter_context(file.open("rb"))
            size = os.fstat(handle.fileno()).st_size
            views[file] = (
                stack.enter_context(mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ))
                if size
                else b""
            )
        buffers = [views[file] for file in data_files.values()]
        give(list(data_files), buffers, [len(b) for b in buffers])
        yield
