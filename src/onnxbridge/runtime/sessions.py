"""The sessions a :class:`~onnxbridge.runtime.Predictor` runs: one per regime, each with its
bound fast path.

Without tuned settings there is one session (``Predictor``'s defaults, or what the caller asked
for). With a :class:`~onnxbridge.runtime.settings.TuningSpec` in the model (``onnxbridge tune``)
there are up to two: calls of at most ``latency_max_rows`` rows run on the latency session, larger
calls on the throughput session. The session opened first (with ``Predictor``'s defaults, before
the model's metadata could be read) is reused for whichever regime has those same settings; a
regime with other settings gets its own session, opened on first use and kept (thread-safe).
Settings are clamped to the cores available here (:meth:`SessionSettings.clamped`).
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from onnxbridge.runtime.blocking import (
    DEFAULT_TREE_BLOCK_NODES,
    ONE_THREAD_TREE_BLOCK_NODES,
    block_tree_ensembles,
)
from onnxbridge.runtime.fastpath import DEFAULT_MAX_ROWS, BoundRunner
from onnxbridge.runtime.linear import LINEAR_GEMV_MIN_ROWS, gemv_linear_models
from onnxbridge.runtime.pool import LazyPool
from onnxbridge.runtime.settings import SessionSettings, TuningSpec, available_cores

__all__ = [
    "MULTI_THREAD_BLOCK_MIN_ROWS",
    "ROW_SPLIT_MIN_PART",
    "RegimeSessions",
    "RowSplitSession",
    "blocked_model",
    "blocks_from_rows",
    "effective_settings",
    "linear_model",
    "open_ort_session",
    "rewritten_model",
    "settings_for_rows",
    "tree_block_nodes_for",
]

# Rows a part of a split call has at least: handing a part to another thread costs some tens of
# µs, which a part of fewer rows does not win back.
ROW_SPLIT_MIN_PART = 1024
# Sessions of several intra-op threads split each block's rows between threads, once per block:
# below a few thousand rows that costs more than the blocks save (benchmark forest, two threads:
# 0.83x at 1 000 rows, 1.13x at 10 000; one thread: 1.27x at 1 000 — docs/benchmarks.md).
MULTI_THREAD_BLOCK_MIN_ROWS = 4096
# One-thread sessions gain from blocks above the bound path's calls.
SINGLE_THREAD_BLOCK_MIN_ROWS = 257


def blocks_from_rows(settings: SessionSettings) -> int:
    """The smallest call that gains from running on the blocked graph with ``settings``."""
    if settings.intra_op_num_threads == 1:
        return SINGLE_THREAD_BLOCK_MIN_ROWS
    return MULTI_THREAD_BLOCK_MIN_ROWS


def tree_block_nodes_for(settings: SessionSettings) -> int:
    """The block size for trees run with ``settings``: smaller when each operator runs on one
    thread (one intra-op thread, or the rows split one thread per part), see
    :mod:`onnxbridge.runtime.blocking`."""
    threads = settings.intra_op_num_threads or available_cores()
    if threads == 1 or settings.row_split > 1:
        return ONE_THREAD_TREE_BLOCK_NODES
    return DEFAULT_TREE_BLOCK_NODES


def settings_for_rows(settings: SessionSettings, rows: int) -> SessionSettings:
    """The settings a per-call regime runs a call of ``rows`` rows with: trees in blocks only
    from :func:`blocks_from_rows` rows on, linear operators as dot products only from
    :data:`~onnxbridge.runtime.linear.LINEAR_GEMV_MIN_ROWS`, the graph as it is below."""
    if settings.tree_block_nodes and rows < blocks_from_rows(settings):
        settings = replace(settings, tree_block_nodes=0)
    if settings.linear_gemv and rows < LINEAR_GEMV_MIN_ROWS:
        settings = replace(settings, linear_gemv=False)
    return settings


def _row_twins(settings: SessionSettings) -> set[SessionSettings]:
    """Every settings :func:`settings_for_rows` gives for ``settings``, whatever the rows."""
    sizes = (1, blocks_from_rows(settings), LINEAR_GEMV_MIN_ROWS)
    return {settings} | {settings_for_rows(settings, rows) for rows in sizes}


class RegimeSessions:
    """Sessions by regime for one model.

    Args:
        first: the session already opened, with ``first_settings``.
        first_settings: its settings.
        spec: the tuned settings, or None to run everything on ``first``.
        open_session: opens another session of the same model with given settings.
        fast_input: ``(name, numpy dtype, width, check_missing)`` of a single tensor input the
            bound path can feed, or None when the model has none (multi-input, strings).
    """

    def __init__(
        self,
        first: Any,
        first_settings: SessionSettings,
        spec: TuningSpec | None,
        open_session: Callable[[SessionSettings], Any],
        fast_input: tuple[str, Any, int, bool] | None,
    ) -> None:
        self.spec = spec
        self._open = open_session
        self._fast_input = fast_input
        self._lock = threading.Lock()
        self._sessions: dict[SessionSettings, Any] = {first_settings: first}
        self._runners: dict[SessionSettings, BoundRunner] = {}
        # The bound paths, once made (read directly by Predictor.predict on every small call).
        self.latency_runner: BoundRunner | None = None
        self.throughput_runner: BoundRunner | None = None
        # Per-call regimes run calls too small to gain from trees in blocks (or linear operators
        # as dot products) on the settings' twin without them (see settings_for); a single
        # regime (spec None, or every call a throughput call) runs one session whatever the
        # size, so its results never depend on it.
        self._unblock_small = spec is not None and spec.latency_max_rows > 0
        if spec is None:
            self._latency = self._throughput = first_settings
            self.latency_max_rows = 0
        else:
            self._latency = spec.latency.clamped()
            self._throughput = spec.throughput.clamped()
            self.latency_max_rows = spec.latency_max_rows
            # Single rows are what a server waits on: open their session now, not mid-request.
            self.session_for(1)
            # latency_max_rows 0: every call is a throughput call (Predictor(regime=...)).
            used = {self._throughput} if self.latency_max_rows == 0 else set(self.settings.values())
            if self._unblock_small:  # the twins without rewrites serve the small calls
                used = {twin for u in used for twin in _row_twins(u)}
            if first_settings not in used:
                del self._sessions[first_settings]  # needed only to read the model's metadata

    @property
    def settings(self) -> dict[str, SessionSettings]:
        """``{"latency": ..., "throughput": ...}`` actually used (clamped to the cores here)."""
        return {"latency": self._latency, "throughput": self._throughput}

    def settings_for(self, rows: int) -> SessionSettings:
        """The settings a call of ``rows`` rows runs with."""
        settings = self._latency if rows <= self.latency_max_rows else self._throughput
        # Blocks and dot products only pay on large calls: smaller ones run the graph as it is.
        return settings_for_rows(settings, rows) if self._unblock_small else settings

    def session_for(self, rows: int) -> Any:
        """The session for a call of ``rows`` rows (opened on first use)."""
        settings = self.settings_for(rows)
        session = self._sessions.get(settings)
        if session is None:
            with self._lock:
                session = self._sessions.get(settings)
                if session is None:
                    session = self._open(settings)
                    self._sessions[settings] = session
        return session

    def open_all(self) -> None:
        """Open the throughput session now too (it is otherwise opened on first use)."""
        if self._throughput != self._latency:
            # Every session a throughput call may run on: with trees in blocks or linear
            # operators as dot products, large calls run on a rewrite.
            smallest = self.latency_max_rows + 1
            for size in (1, blocks_from_rows(self._throughput), LINEAR_GEMV_MIN_ROWS):
                self.session_for(max(smallest, size))

    def runner_for(self, rows: int) -> BoundRunner | None:
        """The bound fast path of the session for ``rows`` rows, or None without one."""
        # Cached per regime in plain attributes: this runs on every small call, and hashing the
        # settings to look a runner up would cost a tenth of such a call.
        # A runner serves calls of up to DEFAULT_MAX_ROWS rows only, so it runs on the session of
        # such calls whatever size the call that made it: with trees in blocks for large calls
        # only, a first call of 10 000 rows must not bind later 100-row calls to the blocks.
        small = min(rows, DEFAULT_MAX_ROWS)
        if rows <= self.latency_max_rows:
            runner = self.latency_runner
            if runner is None and self._fast_input is not None:
                runner = self.latency_runner = self._make_runner(self._latency, small)
        else:
            runner = self.throughput_runner
            if runner is None and self._fast_input is not None:
                runner = self.throughput_runner = self._make_runner(
                    self._throughput, max(small, self.latency_max_rows + 1)
                )
        return runner

    def _make_runner(self, settings: SessionSettings, rows: int) -> BoundRunner:
        """The bound path of ``settings``' regime, on the session of a ``rows``-row call."""
        assert self._fast_input is not None
        runner = self._runners.get(settings)
        if runner is None:
            name, dtype, width, check_missing = self._fast_input
            runner = BoundRunner(
                self.session_for(rows), name, dtype, width, check_missing=check_missing
            )
            self._runners[settings] = runner
        return runner

    def rows_of(self, feeds: dict[str, np.ndarray]) -> int:
        """Rows in prepared feeds (0 for none)."""
        return _rows_of(feeds)


def fast_input_of(
    inputs: Sequence[Any], numpy_types: dict[str, Any], width: int | None, check_missing: bool
) -> tuple[str, Any, int, bool] | None:
    """What the bound path needs of a model with one numeric tensor input ``[N, width]``."""
    if len(inputs) != 1 or width is None:
        return None
    dtype = numpy_types.get(inputs[0].type)
    if dtype is None or np.dtype(dtype).kind not in "fiub":
        return None
    return (inputs[0].name, dtype, width, check_missing)


# Rewritten models by (source, rewrite: a block size, or 0 for linear operators as dot
# products): tune and a Predictor's regimes open the same rewrite several times, and rewriting a
# large forest takes a few tenths of a second.
_BLOCKED: dict[tuple[int, int, int], bytes | None] = {}
_BLOCKED_KEEP = 4


def _cached_rewrite(model: bytes, kind: int, rewrite: Callable[[bytes], bytes | None]) -> Any:
    """``rewrite(model)``, cached by ``kind``; None also when it fails — the rewrites only make
    large calls faster, so the graph as it is runs instead."""
    key = (len(model), hash(model), kind)
    if key not in _BLOCKED:
        if len(_BLOCKED) >= _BLOCKED_KEEP:
            _BLOCKED.pop(next(iter(_BLOCKED)))
        try:
            _BLOCKED[key] = rewrite(model)
        except Exception:  # a model the rewrite does not understand: run it as it is
            _BLOCKED[key] = None
    return _BLOCKED[key]


def blocked_model(model: bytes, max_nodes: int) -> bytes | None:
    """``model`` with its large tree ensembles in blocks (cached), or None if nothing changes."""
    return _cached_rewrite(model, max_nodes, lambda data: block_tree_ensembles(data, max_nodes))


def linear_model(model: bytes) -> bytes | None:
    """``model`` with its one-column linear operators as dot products (cached), or None if
    nothing changes (:mod:`onnxbridge.runtime.linear`)."""
    return _cached_rewrite(model, 0, gemv_linear_models)


def _rewrite(model: bytes, settings: SessionSettings) -> tuple[SessionSettings, bytes | None]:
    """``model`` as ``settings`` runs it — trees in blocks, then linear operators as dot
    products, as asked — and ``settings`` without the rewrites that change nothing in it."""
    result = None
    if settings.tree_block_nodes:
        result = blocked_model(model, settings.tree_block_nodes)
        if result is None:
            settings = replace(settings, tree_block_nodes=0)
    if settings.linear_gemv:
        linear = linear_model(result if result is not None else model)
        if linear is None:
            settings = replace(settings, linear_gemv=False)
        else:
            result = linear
    return settings, result


def effective_settings(model: bytes, settings: SessionSettings) -> SessionSettings:
    """``settings`` without the rewrites that change nothing in ``model`` (the same graph runs
    either way, so one session serves both)."""
    return _rewrite(model, settings)[0]


def rewritten_model(model: bytes, settings: SessionSettings) -> bytes | None:
    """``model`` as ``settings`` runs it (see :func:`_rewrite`), or None when no rewrite
    changes anything."""
    return _rewrite(model, settings)[1]


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
        rows = _rows_of(feeds)
        parts = min(self.parts, rows // ROW_SPLIT_MIN_PART)
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


def _rows_of(feeds: dict[str, Any]) -> int:
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

    With ``settings.tree_block_nodes`` the session runs the blocked rewrite of the graph
    (:mod:`onnxbridge.runtime.blocking`) when there is one, with ``settings.linear_gemv`` its
    linear operators as dot products (:mod:`onnxbridge.runtime.linear`); the model is never
    changed on disk.
    With ``settings.row_split`` of 2 or more it comes wrapped in a :class:`RowSplitSession`
    whose parts run on a one-thread twin (the same session when it has one thread already).
    Should a rewrite fail or not load, the graph as it is runs instead (the rewrites only make
    large calls faster). ONNX Runtime's own errors propagate (callers wrap them).
    """
    chosen = list(providers or ["CPUExecutionProvider"])
    session = _open_plain(model, settings, chosen)
    if settings.row_split < 2:
        return session
    if settings.intra_op_num_threads == 1:
        return RowSplitSession(session, settings.row_split)
    # The parts run on one intra-op thread each (the cores are taken by the parts).
    single = replace(settings, intra_op_num_threads=1, allow_spinning=False, row_split=0)
    return RowSplitSession(session, settings.row_split, _open_plain(model, single, chosen))


def _open_plain(
    model: str | os.PathLike[str] | bytes, settings: SessionSettings, chosen: list[str]
) -> Any:
    import onnxruntime as ort

    source: Any = model if isinstance(model, bytes) else str(model)
    options = settings.to_session_options()

    if settings.tree_block_nodes or settings.linear_gemv:
        # The rewrite needs the bytes; the graph as it is still opens from the path (external
        # data files resolve relative to it).
        data = model if isinstance(model, bytes) else Path(model).read_bytes()
        rewritten = rewritten_model(data, settings)
        if rewritten is not None:
            try:
                return ort.InferenceSession(rewritten, options, providers=chosen)
            except Exception:  # a rewrite ONNX Runtime refuses: the graph as it is runs instead
                pass
    return ort.InferenceSession(source, options, providers=chosen)
