"""ONNX Runtime session settings, and the tuned pair ``onnxbridge tune`` stores in a model.

A :class:`SessionSettings` is one way to open a session (threads, spinning, execution mode, graph
optimisation level). A :class:`TuningSpec` holds the winners ``tune`` measured for the two regimes:

- ``latency``: small batches (one row, a few rows), where the per-call overhead of waking extra
  threads dominates;
- ``throughput``: large batches, where splitting the rows across threads pays.

**The rule** :class:`~onnxbridge.runtime.Predictor` applies: a call with at most
``latency_max_rows`` rows runs on the latency settings, a larger one on the throughput settings.
``tune`` measures ``latency_max_rows`` (the largest probed batch size at which the latency settings
were still at least as fast as the throughput ones).

The spec lives in the model's ``metadata_props`` under :data:`SESSION_KEY` as JSON, so the
``.onnx`` file alone carries it to ``predict``, ``serve`` and ``score``; ``tune`` also copies it
into the bundle's ``card.json``. This module imports neither scikit-learn nor ``onnx``.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

from onnxbridge.errors import SessionSettingsError

__all__ = [
    "EXECUTION_MODES",
    "GRAPH_OPTIMIZATION_LEVELS",
    "SESSION_KEY",
    "SessionSettings",
    "TuningSpec",
    "available_cores",
]

SESSION_KEY = "onnxbridge.session"
TUNING_FORMAT = "1"
EXECUTION_MODES = ("sequential", "parallel")
GRAPH_OPTIMIZATION_LEVELS = ("disabled", "basic", "extended", "all")


def available_cores() -> int:
    """How many cores this process may run on (its CPU affinity where the OS tells)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


# The most threads a session, a pool or a benchmark may be given: far above any machine's
# cores (ONNX Runtime starts every thread it is asked for).
MAX_THREADS = 1024


def _check_int(name: str, value: Any, zero: str | None = "ONNX Runtime chooses") -> int:
    """``value`` if it is an integer >= 0; ``zero`` says what 0 means, in the error."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        meaning = f" (0: {zero})" if zero else ""
        raise SessionSettingsError(f"{name} must be an integer >= 0{meaning}, got {value!r}")
    return value


def _check_threads(name: str, value: Any) -> None:
    _check_int(name, value)
    if value > MAX_THREADS:
        raise SessionSettingsError(
            f"{name} must be at most {MAX_THREADS} (0: ONNX Runtime chooses), got {value!r}"
        )


@dataclass(frozen=True)
class SessionSettings:
    """One way to open an ONNX Runtime session.

    The defaults are ONNX Runtime's own (``SessionSettings()`` opens the same session as
    ``onnxruntime.InferenceSession(path)``).

    Attributes:
        intra_op_num_threads: threads per operator; 0 lets ONNX Runtime choose (one per core).
        inter_op_num_threads: threads running independent nodes in ``parallel`` mode; 0: chosen.
        allow_spinning: idle intra-op threads spin-wait for work instead of sleeping.
        spin_in_runs_only: with ``allow_spinning``, the threads stop spinning as soon as a run
            returns (ONNX Runtime's ``session.force_spinning_stop``). The run's own parallel
            sections keep spinning's quick hand-offs, but between calls the threads sleep
            instead of spinning on for tens of milliseconds — time they would take from the
            next call of any other session (a second regime, another model) on the same cores.
        row_split: cut calls of many rows into up to this many parts, run side by side from
            as many threads on a one-intra-op-thread twin of the session
            (:class:`~onnxbridge.runtime._router.RowSplitSession`): each part walks the trees
            on its own core, start to end, where ONNX Runtime's own threads would split every
            operator (every block of trees) again. Calls too small to split run with the
            settings' own threads. 0 or 1: no split.
        execution_mode: ``"sequential"`` or ``"parallel"`` (independent graph nodes at once).
        graph_optimization_level: ``"disabled"``, ``"basic"``, ``"extended"`` or ``"all"``.
        tree_block_nodes: split tree-ensemble operators larger than this many nodes into blocks
            of trees (:mod:`onnxbridge.runtime._rewrites.tree_blocks`; faster on large
            batches); 0 runs the graph as it is.
        linear_gemv: run binary linear classifiers and single-target linear regressors as one
            dot product per row (:mod:`onnxbridge.runtime._rewrites.linear_dot`; faster on large
            batches); calls under ``LINEAR_GEMV_MIN_ROWS`` rows of a per-call regime run the
            graph as it is.

    Raises:
        SessionSettingsError: a negative or non-integer thread count, an unknown mode or level.
    """

    intra_op_num_threads: int = 0
    inter_op_num_threads: int = 0
    allow_spinning: bool = True
    execution_mode: str = "sequential"
    graph_optimization_level: str = "all"
    tree_block_nodes: int = 0
    spin_in_runs_only: bool = False
    row_split: int = 0
    linear_gemv: bool = False

    def __post_init__(self) -> None:
        _check_threads("intra_op_num_threads", self.intra_op_num_threads)
        _check_int("tree_block_nodes", self.tree_block_nodes, zero="no blocks")
        _check_threads("inter_op_num_threads", self.inter_op_num_threads)
        _check_int("row_split", self.row_split, zero="no split")
        for flag in ("allow_spinning", "spin_in_runs_only", "linear_gemv"):
            if not isinstance(getattr(self, flag), bool):
                raise SessionSettingsError(
                    f"{flag} must be true or false, got {getattr(self, flag)!r}"
                )
        if self.execution_mode not in EXECUTION_MODES:
            raise SessionSettingsError(
                f"execution_mode {self.execution_mode!r} is not one of {', '.join(EXECUTION_MODES)}"
            )
        if self.graph_optimization_level not in GRAPH_OPTIMIZATION_LEVELS:
            raise SessionSettingsError(
                f"graph_optimization_level {self.graph_optimization_level!r} is not one of "
                f"{', '.join(GRAPH_OPTIMIZATION_LEVELS)}"
            )

    @classmethod
    def onnxbridge_default(cls) -> SessionSettings:
        """What ``Predictor`` uses without tuned settings: one thread per core, no spinning.

        Spinning is off because on a shared machine spinning threads fight other processes for
        the cores (docs/benchmarks.md).
        """
        return cls(intra_op_num_threads=available_cores(), allow_spinning=False)

    def label(self) -> str:
        """A short human-readable form, e.g. ``"2 threads, no spin, sequential, opt all"``."""
        threads = self.intra_op_num_threads
        head = "auto threads" if threads == 0 else f"{threads} thread{'s' if threads != 1 else ''}"
        spin = "no spin"
        if self.allow_spinning:
            spin = "spin in runs" if self.spin_in_runs_only else "spin"
        mode = self.execution_mode
        if mode == "parallel" and self.inter_op_num_threads:
            mode += f" ×{self.inter_op_num_threads}"
        text = f"{head}, {spin}, {mode}, opt {self.graph_optimization_level}"
        if self.tree_block_nodes:
            text += f", trees in blocks of {self.tree_block_nodes} nodes"
        if self.linear_gemv:
            text += ", linear as dot products"
        if self.row_split > 1:
            text += f", rows split ×{self.row_split}"
        return text

    def clamped(self, cores: int | None = None) -> SessionSettings:
        """These settings with thread counts no larger than the cores available here.

        Settings tuned on a bigger machine would otherwise oversubscribe a smaller one.
        """
        cores = cores or available_cores()
        return replace(
            self,
            intra_op_num_threads=min(self.intra_op_num_threads, cores),
            inter_op_num_threads=min(self.inter_op_num_threads, cores),
            row_split=min(self.row_split, cores),
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)

    @classmethod
    def from_dict(cls, values: Any) -> SessionSettings:
        """Read settings back from :meth:`to_dict` output.

        Raises:
            SessionSettingsError: not a mapping, unknown keys or bad values.
        """
        if not isinstance(values, dict):
            raise SessionSettingsError(
                f"session settings must be a JSON object, got {type(values).__name__}"
            )
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(values) - known)
        if unknown:
            raise SessionSettingsError(
                f"unknown session setting(s) {', '.join(unknown)}; "
                f"known: {', '.join(sorted(known))}"
            )
        return cls(**values)

    def to_session_options(self) -> Any:
        """An ``onnxruntime.SessionOptions`` with these settings (warnings-only logging)."""
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.log_severity_level = 3
        options.intra_op_num_threads = self.intra_op_num_threads
        options.inter_op_num_threads = self.inter_op_num_threads
        options.add_session_config_entry(
            "session.intra_op.allow_spinning", "1" if self.allow_spinning else "0"
        )
        options.add_session_config_entry(
            "session.inter_op.allow_spinning", "1" if self.allow_spinning else "0"
        )
        if self.allow_spinning and self.spin_in_runs_only:
            options.add_session_config_entry("session.force_spinning_stop", "1")
        options.execution_mode = (
            ort.ExecutionMode.ORT_PARALLEL
            if self.execution_mode == "parallel"
            else ort.ExecutionMode.ORT_SEQUENTIAL
        )
        options.graph_optimization_level = {
            "disabled": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
            "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
            "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
            "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
        }[self.graph_optimization_level]
        return options


@dataclass(frozen=True)
class TuningSpec:
    """The session settings ``onnxbridge tune`` chose, per regime, and an optional accelerator.

    Attributes:
        latency: settings for calls of at most ``latency_max_rows`` rows.
        throughput: settings for larger calls.
        latency_max_rows: the regime boundary (see the module docstring for the rule).
        accelerator: an engine faster than ONNX Runtime from ``min_rows`` rows per call that
            was checked equivalent to the ONNX model (``{"engine": "tl2cgen", "min_rows":
            1000, ...}``), or None. ONNX Runtime stays the default; ``Predictor`` never runs
            it (``score --accelerator`` does, when asked).
        measured: where and when it was measured: ``{"cores": 2, "onnxruntime": "1.32.0", ...}``.
    """

    latency: SessionSettings
    throughput: SessionSettings
    latency_max_rows: int = 1
    accelerator: dict[str, Any] | None = None
    measured: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check_int("latency_max_rows", self.latency_max_rows, zero=None)

    def settings_for(self, rows: int) -> SessionSettings:
        """The settings for a call of ``rows`` rows: latency up to ``latency_max_rows``."""
        return self.latency if self.regime_for(rows) == "latency" else self.throughput

    def regime_for(self, rows: int) -> Literal["latency", "throughput"]:
        """``"latency"`` or ``"throughput"`` for a call of ``rows`` rows: the one routing rule
        (:class:`~onnxbridge.runtime._router.Router` and ``tune`` apply it through here)."""
        return "latency" if rows <= self.latency_max_rows else "throughput"

    @property
    def first_throughput_rows(self) -> int:
        """The smallest call that runs on the throughput settings (:meth:`regime_for`)."""
        return self.latency_max_rows + 1

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (what is stored under :data:`SESSION_KEY`)."""
        return {
            "format": TUNING_FORMAT,
            "latency": self.latency.to_dict(),
            "throughput": self.throughput.to_dict(),
            "latency_max_rows": self.latency_max_rows,
            "accelerator": self.accelerator,
            "measured": self.measured,
        }

    def to_json(self) -> str:
        """The compact JSON stored in the model's ``metadata_props``."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_dict(cls, values: Any) -> TuningSpec:
        """Read a spec back from :meth:`to_dict` output.

        Raises:
            SessionSettingsError: missing regimes or bad values.
        """
        if not isinstance(values, dict) or "latency" not in values or "throughput" not in values:
            raise SessionSettingsError(
                "tuned session settings need 'latency' and 'throughput' entries; re-run "
                "`onnxbridge tune` on the model"
            )
        return cls(
            latency=SessionSettings.from_dict(values["latency"]),
            throughput=SessionSettings.from_dict(values["throughput"]),
            latency_max_rows=values.get("latency_max_rows", 1),
            accelerator=values.get("accelerator"),
            measured=dict(values.get("measured") or {}),
        )

    @classmethod
    def from_json(cls, text: str) -> TuningSpec:
        """Parse :meth:`to_json` output.

        Raises:
            SessionSettingsError: not JSON, or not a valid spec.
        """
        try:
            values = json.loads(text)
        except ValueError as exc:
            raise SessionSettingsError(
                f"the model's {SESSION_KEY} entry is not valid JSON ({exc}); re-run "
                "`onnxbridge tune` on the model"
            ) from exc
        return cls.from_dict(values)

    @classmethod
    def find_in_props(cls, props: dict[str, str]) -> TuningSpec | None:
        """The spec stored in ``metadata_props`` (as a dict), or None when the model has none.

        Raises:
            SessionSettingsError: an entry is there but damaged.
        """
        text = props.get(SESSION_KEY)
        return None if text is None else cls.from_json(text)
