"""Predictor: an ONNX Runtime session that takes DataFrames, arrays or records and gives labels,
probabilities or values.

Columns are matched to the model's inputs by name, using the schema that ``convert`` wrote into the
model's ``metadata_props``; float64 (and ints, bools) are cast to the input's element type, so the
float64 → float32 trap of hand-written glue is handled here once. Models without onnxbridge
metadata still work when they have one tensor input: columns are then taken in order.

Shapes: ``X [N, F] -> labels [N], probabilities [N, C]`` (classifiers) or ``values [N]`` /
``[N, T]`` (regressors).
"""

from __future__ import annotations

import os
import sys
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from onnxbridge._meta import ORT_TO_NUMPY, ModelMetadata, input_block, role_parts, target_role
from onnxbridge._values import all_finite, cast_values, refuse_table_misfits
from onnxbridge.data import normalize_features, preview_names
from onnxbridge.errors import (
    AcceleratorError,
    DataError,
    InferenceError,
    OnnxModelError,
    SchemaMismatchError,
    SessionSettingsError,
    first_line,
)
from onnxbridge.runtime.accelerator import Accelerator, load_accelerator
from onnxbridge.runtime.fastpath import DEFAULT_MAX_ROWS, has_nan
from onnxbridge.runtime.linear import NAN_FLAG
from onnxbridge.runtime.nancheck import flag_shows_nan, graph_carries_nan, session_shows_nan
from onnxbridge.runtime.sessions import (
    MULTI_THREAD_BLOCK_MIN_ROWS,
    RegimeSessions,
    effective_settings,
    fast_input_of,
    open_ort_session,
    tree_block_nodes_for,
)
from onnxbridge.runtime.settings import SessionSettings, TuningSpec

__all__ = ["PredictionResult", "Predictor", "check_output_rows"]

# From this many rows, a model whose output shows its input's NaN has the output checked instead
# of the input (runtime/nancheck.py); smaller inputs are checked as they are, cheaply.
OUTPUT_NAN_CHECK_MIN_ROWS = 2048
# Up to this many input columns: the probe a session passes first runs about 4 × columns² values
# (one NaN per row, every column), 16 MB of float32 rows here; wider inputs keep the input check.
OUTPUT_NAN_CHECK_MAX_COLUMNS = 1024
# Predictor._output_check keeps its answer for this many row counts.
_OUTPUT_CHECK_COUNTS = 64


@dataclass(slots=True)
class PredictionResult:
    """What a model predicted for ``N`` rows.

    Attributes:
        labels: ``[N]`` class labels (classifiers), else None.
        probabilities: ``[N, C]`` class probabilities in ``classes`` order, else None.
        scores: ``[N, C]`` (or ``[N, 1]``) decision scores, for classifiers without
            ``predict_proba`` (``SVC()``, ``RidgeClassifier``, ...), else None.
        values: ``[N]`` or ``[N, T]`` predictions (regressors), else None.
        classes: class labels in probability-column order, if known (one list per target for
            a multi-output classifier).
        transformed: ``[N, K]`` a transformer's output, else None.
        targets: a multi-output classifier's result per target, in target order (each with
            its ``labels [N]``, ``probabilities [N, C_t]`` and ``classes``); ``labels`` is then
            ``[N, T]``, as scikit-learn's ``predict``. None for other models.
    """

    labels: np.ndarray | None = None
    probabilities: np.ndarray | None = None
    values: np.ndarray | None = None
    classes: list[Any] | None = None
    scores: np.ndarray | None = None
    transformed: np.ndarray | None = None
    targets: list[PredictionResult] | None = None

    def __len__(self) -> int:
        for array in (self.labels, self.values, self.probabilities, self.scores, self.transformed):
            if array is not None:
                return len(array)
        return 0

    def to_frame(self) -> pd.DataFrame:
        """One row per input row: ``label`` then ``proba_<class>`` (or ``score_<class>``)
        columns for classifiers, ``prediction`` for regressors, ``out_<j>`` for transformers;
        ``label_<t>`` and ``proba_<t>_<class>`` per target ``t`` for multi-output classifiers.

        Raises:
            InferenceError: the outputs do not have one row each per input row (a faulty graph).
        """
        if self.targets is not None:
            return self._targets_frame()
        lengths = {
            role: len(array)
            for role, array in (
                ("label", self.labels),
                ("probabilities", self.probabilities),
                ("scores", self.scores),
                ("value", self.values),
                ("transformed", self.transformed),
            )
            if array is not None
        }
        check_output_rows(lengths)
        columns: dict[str, Any] = {}
        if self.labels is not None:
            columns["label"] = self.labels
        if self.probabilities is not None:
            classes = self.classes or list(range(self.probabilities.shape[1]))
            for i, cls in enumerate(classes):
                columns[f"proba_{cls}"] = self.probabilities[:, i]
        if self.scores is not None:
            n_scores = self.scores.shape[1]
            names = list(self.classes or [])
            if len(names) != n_scores:
                # A binary model may give one score: the positive class's.
                names = names[-n_scores:] if len(names) > n_scores else list(range(n_scores))
            for i, cls in enumerate(names):
                columns[f"score_{cls}"] = self.scores[:, i]
        if self.values is not None:
            values = self.values
            if values.ndim == 1 or values.shape[1] == 1:
                columns["prediction"] = values.reshape(len(values))
            else:
                for j in range(values.shape[1]):
                    columns[f"prediction_{j}"] = values[:, j]
        if self.transformed is not None:
            matrix = self.transformed.reshape(len(self.transformed), -1)
            for j in range(matrix.shape[1]):
                columns[f"out_{j}"] = matrix[:, j]
        return pd.DataFrame(columns)

    def _targets_frame(self) -> pd.DataFrame:
        targets = self.targets or []
        lengths: dict[str, int] = {}
        for t, part in enumerate(targets):
            for role, array in (("label", part.labels), ("probabilities", part.probabilities)):
                if array is not None:
                    lengths[target_role(role, t)] = len(array)
        check_output_rows(lengths)
        columns: dict[str, Any] = {}
        for t, part in enumerate(targets):
            columns[f"label_{t}"] = part.labels
            if part.probabilities is not None:
                classes = part.classes or list(range(part.probabilities.shape[1]))
                for i, cls in enumerate(classes):
                    columns[f"proba_{t}_{cls}"] = part.probabilities[:, i]
        return pd.DataFrame(columns)


def _stack_target_labels(labels: Sequence[np.ndarray]) -> np.ndarray:
    """``[N, T]`` labels from one ``[N]`` array per target, as scikit-learn's ``predict``
    gives them: one dtype when every target has it, else objects (no label turns into text)."""
    if not labels:
        return np.zeros((0, 0))
    kinds = {array.dtype for array in labels}
    if len(kinds) == 1:
        return np.column_stack(labels)
    stacked = np.empty((len(labels[0]), len(labels)), dtype=object)
    for t, array in enumerate(labels):
        stacked[:, t] = array
    return stacked


@dataclass(frozen=True, slots=True)
class _TargetOutputs:
    """Where one target of a multi-output classifier is among the outputs."""

    label_at: int
    probabilities_at: int | None
    classes: list[Any] | None
    restore: bool


def _target_layout(
    role_index: Mapping[str, int], classes: list[Any] | None
) -> list[_TargetOutputs] | None:
    """Per target, in target order, its outputs' positions; None for single-target models."""
    labels = {}
    for role, index in role_index.items():
        base, target = role_parts(role)
        if base == "label" and target is not None:
            labels[target] = index
    if not labels:
        return None
    layout = []
    for t in sorted(labels):
        own = classes[t] if classes is not None and t < len(classes) else None
        layout.append(
            _TargetOutputs(
                label_at=labels[t],
                probabilities_at=role_index.get(target_role("probabilities", t)),
                classes=own,
                restore=own is not None and np.asarray(own).dtype.kind in "bf",
            )
        )
    return layout


def check_output_rows(lengths: Mapping[str, int], rows: int | None = None) -> None:
    """Raise unless every output has the same number of rows (``rows``, the input's, if given).

    Args:
        lengths: output (or role) name → its number of rows.
        rows: the number of input rows, when known.

    Raises:
        InferenceError: naming the outputs and their lengths; the graph is faulty.
    """
    wanted = {rows} if rows is not None else set()
    if len(set(lengths.values()) | wanted) <= 1:
        return
    shown = ", ".join(f"{name} {n}" for name, n in lengths.items())
    given = f" for {rows} input rows" if rows is not None else ""
    raise InferenceError(
        f"the model's outputs have different numbers of rows ({shown}){given}, so they cannot "
        "be put side by side one row per input row; the ONNX graph is faulty: re-export it "
        "(`onnxbridge convert`) or check the exporter"
    )


class Predictor:
    """Run an ONNX model on tabular data.

    Args:
        model: path to a ``.onnx`` file, or its bytes.
        providers: ONNX Runtime execution providers (CPU by default).
        intra_op_num_threads: threads per operator; by default the number of cores this process
            may run on.
        allow_spinning: let idle ONNX Runtime threads spin-wait for work. Off by default: on a
            shared machine spinning threads fight other processes for the cores, and sessions
            measured up to 3× slower (docs/benchmarks.md).
        settings: all session settings at once (:class:`~onnxbridge.runtime.SessionSettings`);
            overrides the two arguments above and any tuned settings.
        tuned: use the settings ``onnxbridge tune`` stored in the model (``onnxbridge.session``
            metadata), when there are some and ``settings`` is not given. Calls of at most
            ``tuning.latency_max_rows`` rows then run on the latency settings, larger calls on
            the throughput settings (one session each, the second opened on first use);
            ``intra_op_num_threads`` / ``allow_spinning``, when given, replace that field in
            both (``intra_op_num_threads`` also turns a tuned ``row_split`` off).
        accelerator: run calls of at least the recorded ``min_rows`` rows on the accelerator
            ``onnxbridge tune --engines all`` recorded for this bundle (compiled trees checked
            equivalent to the ONNX model; :mod:`onnxbridge.runtime.accelerator`). Off by
            default: its library is native code, loaded only when asked for, only with
            ``trust_native=True`` and only when its hash matches the bundle's card.
            Classifiers and regressors only. A
            :class:`~onnxbridge.runtime.accelerator.Accelerator` the caller loaded (and
            checked) is used as it is.
        trust_native: the caller trusts the bundle's native code (made it with ``tune
            --engines all`` themselves): required for ``accelerator=True``, which otherwise
            raises :class:`~onnxbridge.errors.UnsafeModelFileError` without opening the
            library.
        regime: ``"throughput"`` runs every call, whatever its size, on the throughput
            settings (tuned, or the default ones with trees in blocks) and opens only that
            session — batch scoring, whose results must not depend on the batch size; None
            picks the regime per call.

    Small calls on a numeric array (up to 256 rows) take a bound path: an IOBinding with
    pre-allocated input and output buffers per batch size, reused across calls
    (:mod:`onnxbridge.runtime.fastpath`); results are the same as the plain path's.

    Raises:
        OnnxModelError: the file is missing or is not a loadable ONNX model.

    Example:
        >>> Predictor("runs/iris-rf/model.onnx").predict(frame).to_frame()  # doctest: +SKIP
    """

    def __init__(
        self,
        model: str | os.PathLike[str] | bytes,
        *,
        providers: Sequence[str] | None = None,
        intra_op_num_threads: int | None = None,
        allow_spinning: bool | None = None,
        settings: SessionSettings | None = None,
        tuned: bool = True,
        accelerator: bool | Accelerator = False,
        regime: str | None = None,
        trust_native: bool = False,
    ) -> None:
        source: str | bytes
        if isinstance(model, bytes):
            source = model
            self.path: Path | None = None
        else:
            self.path = Path(model)
            if not self.path.is_file():
                raise OnnxModelError(
                    f"model file {str(self.path)!r} does not exist; pass the path of a .onnx file "
                    "(`onnxbridge convert` writes BUNDLE/model.onnx)"
                )
            source = str(self.path)
        # What the caller sets wins over tuned settings, for every call: `settings` replaces
        # them all, the two keyword arguments replace their field in both regimes.
        overrides: dict[str, Any] = {}
        if intra_op_num_threads is not None:
            # The caller sets the threads of a call: no rows split across more of them.
            overrides["intra_op_num_threads"] = intra_op_num_threads
            overrides["row_split"] = 0
        if allow_spinning is not None:
            overrides["allow_spinning"] = allow_spinning
        base = settings or replace(SessionSettings.onnxbridge_default(), **overrides)
        where = repr(str(self.path)) if self.path else "the given bytes"
        chosen_providers = list(providers or ["CPUExecutionProvider"])

        # Sessions opened so far, weakly: settings whose rewrites change nothing in this model
        # (trees in blocks of a linear model, say) reuse the session of the graph they run.
        opened: weakref.WeakValueDictionary[SessionSettings, Any] = weakref.WeakValueDictionary()

        def open_session(with_settings: SessionSettings) -> Any:
            try:
                effective = with_settings
                if with_settings.tree_block_nodes or with_settings.linear_gemv:
                    data = source if isinstance(source, bytes) else Path(source).read_bytes()
                    effective = effective_settings(data, with_settings)
                    if effective in opened:
                        return opened[effective]  # the same graph with the same options
                session = open_ort_session(source, effective, chosen_providers)
                opened[effective] = opened[with_settings] = session
                return session
            except OSError as exc:
                raise OnnxModelError(f"cannot read {where} ({exc})") from exc
            except Exception as exc:  # ORT raises its own Fail / InvalidProtobuf / InvalidGraph
                raise OnnxModelError(
                    f"{where} is not a loadable ONNX model ({first_line(exc)}); pass a .onnx "
                    "file written by `onnxbridge convert` or another exporter"
                ) from exc

        self._source = source
        first = open_session(base)
        props = dict(first.get_modelmeta().custom_metadata_map)
        self.metadata: ModelMetadata | None = ModelMetadata.from_props(props)
        self.inputs = first.get_inputs()
        # The model's outputs (a session running linear operators as dot products has one more,
        # NAN_FLAG, which run() and predict() keep to themselves).
        self.outputs = [o for o in first.get_outputs() if o.name != NAN_FLAG]
        # `onnxbridge tune` stored per-regime settings in the model (runtime/settings.py).
        self.tuning: TuningSpec | None = (
            None if settings is not None or not tuned else TuningSpec.find_in_props(props)
        )
        if self.tuning is not None and overrides:
            self.tuning = replace(
                self.tuning,
                latency=replace(self.tuning.latency, **overrides),
                throughput=replace(self.tuning.throughput, **overrides),
            )
        fast_input = None
        # The columns a single-tensor input takes (None when unknown); read on every call.
        self._width = len(self.feature_names) if self.feature_names else self._input_width()
        if not self._multi_input():
            refused = self._refuses_missing()
            fast_input = fast_input_of(self.inputs, ORT_TO_NUMPY, self._width, refused)
        # (input name, dtype, width, refuses NaN) of a single tensor input: large arrays skip
        # prepare() (_array_feeds).
        self._fast_input = fast_input
        # (input name, dtype, width) of a single float tensor input: _array_feeds' fields.
        self._float_feed = (
            (fast_input[0], np.dtype(fast_input[1]), fast_input[2])
            if fast_input is not None and np.dtype(fast_input[1]).kind == "f"
            else None
        )
        regimes = self.tuning
        if regimes is None and settings is None:
            # Untuned: calls too large for the bound path run with the same settings on the
            # graph with its large tree ensembles in blocks (runtime/blocking.py) and its
            # one-column linear operators as dot products (runtime/linear.py), which is faster
            # there and changes nothing for models without either.
            regimes = TuningSpec(
                latency=base,
                throughput=replace(
                    base, tree_block_nodes=tree_block_nodes_for(base), linear_gemv=True
                ),
                latency_max_rows=(
                    DEFAULT_MAX_ROWS
                    if base.intra_op_num_threads == 1
                    else MULTI_THREAD_BLOCK_MIN_ROWS - 1
                ),
            )
        if regime not in (None, "throughput"):
            raise SessionSettingsError(f"regime must be None or 'throughput', got {regime!r}")
        if regime == "throughput" and regimes is not None:
            regimes = replace(regimes, latency_max_rows=0)
        self._sessions = RegimeSessions(first, base, regimes, open_session, fast_input)
        # The single-row (latency) session; run() and predict() pick one per call.
        self.session = self._sessions.session_for(1)
        self._roles = self._output_roles()
        names = self._output_names = [o.name for o in self.outputs]
        self._role_index = {
            role: names.index(name) for role, name in self._roles.items() if name in names
        }
        self._classes = self.classes
        # A multi-output classifier: per target, its label and probabilities outputs.
        self._targets = _target_layout(self._role_index, self._classes)
        # Labels need mapping back only for bool / float classes (see _restore_labels).
        self._restore = (
            self._targets is None
            and self._classes is not None
            and np.asarray(self._classes).dtype.kind in "bf"
        )
        # The common case, labels + probabilities tensors as they are, gets a shortcut in _result.
        plain = set(self._roles) == {"label", "probabilities"}
        self._plain_classifier = plain and not self._restore
        self._label_at = self._role_index.get("label", -1)
        self._probabilities_at = self._role_index.get("probabilities", -1)
        self.accelerator: Accelerator | None = None
        if accelerator is not False:
            self.accelerator = self._load_accelerator(
                accelerator if isinstance(accelerator, Accelerator) else None, trust_native
            )
        # Large calls of a model refusing NaN whose graph carries NaN to its output check the
        # output (runtime/nancheck.py): the graph is read on the first such call, each session
        # probed once.
        self._nan_output_at = next(
            (
                self._role_index[r]
                for r in ("probabilities", "value", "scores")
                if r in self._role_index
            ),
            -1,
        )
        self._output_check_possible = (
            self._refuses_missing() and self._nan_output_at >= 0 and not self._multi_input()
        )
        self._graph_carries_nan: bool | None = None
        # id(session) -> (run(feeds), session) for run(): see _native_run.
        self._native_runs: dict[int, tuple[Any, Any]] = {}
        # id(session) -> how a large call on it checks its output for NaN: see _output_check.
        self._output_checks: dict[int, tuple[Any, int, Any] | None] = {}
        # row count -> _output_check's answer for it.
        self._output_check_by_rows: dict[int, tuple[Any, int, Any] | None] = {}
        # Calls of this many rows or more run on the accelerator (never, without one).
        self._accelerated_from = (
            self.accelerator.min_rows if self.accelerator is not None else sys.maxsize
        )
        # (input dtype, width, refuses NaN, takes float32 rows as they are) of a float array the
        # accelerator takes without prepare().
        self._accel_input = (
            (
                *fast_input[1:],
                self.accelerator.widens_float32 and np.dtype(fast_input[1]) == np.float64,
            )
            if self.accelerator is not None
            and fast_input is not None
            and np.dtype(fast_input[1]).kind == "f"
            else None
        )

    def _load_accelerator(self, given: Accelerator | None, trust_native: bool) -> Accelerator:
        roles = set(self._roles)
        classifier = roles == {"label", "probabilities"}
        if not classifier and roles != {"value"}:
            raise AcceleratorError(
                f"an accelerator serves classifiers (label + probabilities) and regressors; "
                f"this model's outputs are {', '.join(sorted(roles)) or 'unknown'}"
            )
        if self._multi_input():
            raise AcceleratorError("an accelerator takes one numeric input; this model has more")
        classes = self._classes if classifier else None
        n_classes = len(classes) if classes else None
        if given is not None:
            if given.n_classes != n_classes:
                raise AcceleratorError(
                    f"the accelerator gives {given.n_classes or 'no'} classes, the model "
                    f"{n_classes or 'none'}; load it for this model"
                )
            loaded = given
        else:
            record = self.tuning.accelerator if self.tuning is not None else None
            loaded = load_accelerator(self.path, record, n_classes, trust_native=trust_native)
        if classes is not None:
            strings = any(isinstance(c, str) for c in classes)
            self._class_table = np.asarray(classes, dtype=object if strings else None)
            # Integer classes 0 … C-1 are their own indices (int64, as ONNX labels are).
            self._labels_are_indices = self._class_table.dtype.kind in "iu" and np.array_equal(
                self._class_table, np.arange(len(classes))
            )
        return loaded

    def _accelerated(self, feeds: dict[str, np.ndarray]) -> PredictionResult | None:
        """The accelerator's result for large numeric calls, or None (ONNX Runtime runs it)."""
        accelerator = self.accelerator
        if accelerator is None or len(feeds) != 1:
            return None
        X = next(iter(feeds.values()))
        if X.ndim != 2 or len(X) < accelerator.min_rows or X.dtype.kind != "f":
            return None
        return self._accelerator_result(X)

    def _accelerated_array(self, data: np.ndarray, allow_missing: bool) -> PredictionResult | None:
        """The accelerator's result for a float array of the input's width, or None (the
        general path takes it): ``_array_feeds`` + ``_accelerated`` without their dictionary
        and repeated checks — a single LightGBM row's accelerated call lasts ~5 µs."""
        accel_input = self._accel_input
        if accel_input is None or data.ndim != 2 or data.dtype.kind != "f":
            return None
        dtype, width, refuses, takes_float32 = accel_input
        if data.shape[1] != width:
            return None
        # The model's input type, as ONNX Runtime would get it (float64 narrowed for a float
        # model); float32 rows of a double model as they are to an engine that widens them
        # itself (exactly: the same values).
        X = (
            data
            if data.dtype == dtype or (takes_float32 and data.dtype == np.float32)
            else cast_values(data, dtype)
        )
        self._check_floats(data, X, refuse_nan=refuses and not allow_missing)
        return self._accelerator_result(X)

    def _accelerator_result(self, X: np.ndarray) -> PredictionResult:
        accelerator = self.accelerator
        out, index = accelerator.predict_indexed(X)  # type: ignore[union-attr]
        if index is None:
            return PredictionResult(values=out)
        labels = index if self._labels_are_indices else self._class_table[index]
        return PredictionResult(labels, out, None, self._classes)

    def _array_feeds(
        self, data: np.ndarray, refuse_nan: bool, *, check_values: bool = True
    ) -> dict[str, np.ndarray] | None:
        """``prepare``'s feeds for a float array of the input's width, without its general
        coercion (a few µs of a 100-row accelerated call, 5 % of a 10 000-row linear model);
        None for anything else, which ``prepare`` takes. Checked as ``prepare`` checks: values
        the input cannot take, and NaN when ``refuse_nan`` — unless not ``check_values``, when
        the caller checks the run's NaN flag instead.
        """
        feed = self._float_feed
        if feed is None or data.ndim != 2 or data.dtype.kind != "f" or not len(data):
            return None
        name, dtype, width = feed
        if data.shape[1] != width:
            return None
        given = data
        if data.dtype is not dtype:
            # The model's input type, as prepare() gives it: float64 rows narrowed for a float
            # model.
            data = cast_values(data, dtype)
        if not data.flags.c_contiguous:
            data = np.ascontiguousarray(data)
        if check_values:
            self._check_floats(given, data, refuse_nan=refuse_nan)
        return {name: data}

    def session_for(self, rows: int) -> Any:
        """The ONNX Runtime session a call of ``rows`` rows runs on (see ``tune``)."""
        return self._sessions.session_for(rows)

    def open_sessions(self) -> None:
        """Open every regime's session now, not on the first call that needs it.

        A server calls this when it loads a model, so that its first large request does not pay
        for opening (and, with trees in blocks, rewriting) the throughput session.
        """
        self._sessions.open_all()

    def settings_for(self, rows: int) -> SessionSettings:
        """The session settings a call of ``rows`` rows runs with."""
        return self._sessions.settings_for(rows)

    def _output_roles(self) -> dict[str, str]:
        roles = dict(self.metadata.outputs) if self.metadata else {}
        if not roles:
            # A model from elsewhere: label + probabilities, or one value output.
            if len(self.outputs) >= 2:
                roles = {"label": self.outputs[0].name, "probabilities": self.outputs[1].name}
            else:
                roles = {"value": self.outputs[0].name}
        return roles

    # Introspection -----------------------------------------------------------------------------
    @property
    def feature_names(self) -> list[str] | None:
        """The feature columns the model expects, in order (None without metadata)."""
        return self.metadata.features.names if self.metadata else None

    @property
    def classes(self) -> list[Any] | None:
        """Class labels in probability-column order (None for regressors / unknown)."""
        return self.metadata.classes if self.metadata else None

    @property
    def input_dtype(self) -> np.dtype | None:
        """The numpy element type of the model's one tensor input (None: several inputs, or
        one of a type numpy has no match for); what its values are cast to and checked
        against (:mod:`onnxbridge._values`)."""
        if len(self.inputs) != 1 or self._multi_input():
            return None
        dtype = ORT_TO_NUMPY.get(self.inputs[0].type)
        return None if dtype is None else np.dtype(dtype)

    @property
    def task(self) -> str | None:
        """``"classification"``, ``"regression"`` or None when unknown."""
        return self.metadata.task if self.metadata else None

    # Input coercion ----------------------------------------------------------------------------
    def _input_width(self) -> int | None:
        shape = self.inputs[0].shape
        if len(shape) == 2 and isinstance(shape[1], int):
            return shape[1]
        return None

    def _frame_to_matrix(self, frame: pd.DataFrame, ignore_extra: bool) -> pd.DataFrame:
        frame = frame.rename(columns=str)
        names = self.feature_names
        if names is None:
            width = self._input_width()
            if width is not None and frame.shape[1] != width:
                raise SchemaMismatchError(
                    f"the model takes {width} columns but the data has {frame.shape[1]}; the model "
                    "has no onnxbridge schema, so columns are taken in order"
                )
            return frame
        missing = [c for c in names if c not in frame.columns]
        if missing:
            raise SchemaMismatchError(
                f"missing columns: {', '.join(map(repr, missing))}; the model expects "
                f"{len(names)} columns: {preview_names(names, limit=10)}"
            )
        target = self.metadata.target if self.metadata else None
        extra = [c for c in frame.columns if c not in names and c != target]
        if extra and not ignore_extra:
            raise SchemaMismatchError(
                f"unexpected columns: {', '.join(map(repr, extra))}; drop them or pass "
                "ignore_extra=True to leave them out",
                arguments=("ignore_extra",),
            )
        return frame[names]

    def _multi_input(self) -> bool:
        """Whether the model takes one input per column (tables with text columns)."""
        inputs = self.metadata.inputs if self.metadata else []
        return len(inputs) > 1 or any(spec.get("dtype") == "string" for spec in inputs)

    def prepare(
        self, data: Any, *, ignore_extra: bool = False, allow_missing: bool = False
    ) -> dict[str, np.ndarray]:
        """Turn a DataFrame, 2-D array, mapping of columns or list of records into ORT feeds.

        Raises:
            SchemaMismatchError: missing / unexpected columns, wrong width, non-numeric values,
                missing values (NaN) for a model whose source refuses them.
        """
        if isinstance(data, Mapping) and all(np.ndim(v) == 0 for v in data.values()):
            data = pd.DataFrame([data])  # one row given as {column: value}
        elif isinstance(data, Mapping) or (
            isinstance(data, list) and data and isinstance(data[0], Mapping)
        ):
            data = pd.DataFrame(data)
        if self._multi_input():
            return self._prepare_columns(data, ignore_extra, allow_missing)
        if len(self.inputs) != 1:
            raise SchemaMismatchError(
                f"the model has {len(self.inputs)} inputs but no onnxbridge schema saying which "
                "columns feed which; convert it with `onnxbridge convert` or feed the inputs "
                "yourself with Predictor.run"
            )
        spec = self.inputs[0]
        dtype = ORT_TO_NUMPY.get(spec.type)
        if dtype is None:
            raise SchemaMismatchError(f"input {spec.name!r} has unsupported type {spec.type}")
        if isinstance(data, pd.DataFrame):
            frame = self._frame_to_matrix(data, ignore_extra)
            bad = [
                c
                for c in frame.columns
                if not (
                    pd.api.types.is_numeric_dtype(frame[c]) or pd.api.types.is_bool_dtype(frame[c])
                )
            ]
            if bad and dtype is not np.object_:
                raise SchemaMismatchError(
                    f"columns {', '.join(map(repr, bad))} are not numeric (dtype "
                    f"{frame[bad[0]].dtype}); the model's input {spec.name!r} takes numbers"
                )
            try:
                given = frame.to_numpy(dtype=np.float64, na_value=np.nan)
                array = cast_values(given, dtype)
            except (TypeError, ValueError) as exc:
                raise SchemaMismatchError(f"cannot cast the data to {spec.type}: {exc}") from exc
        else:
            given = self._matrix(data)
            try:
                # No copy when the array already has the input's type (a 10 000-row batch).
                array = cast_values(given, dtype)
            except (TypeError, ValueError) as exc:
                raise SchemaMismatchError(
                    f"cannot cast the data to {spec.type}: {first_line(exc)}"
                ) from exc
        if array.shape[0] == 0:
            raise SchemaMismatchError("the data has no rows; nothing to predict")
        if array.dtype.kind == "f":
            refuse_nan = not allow_missing and self._refuses_missing()
            self._check_floats(given, array, refuse_nan=refuse_nan)
        elif array.dtype.kind in "iub":
            refuse_table_misfits(given, dtype, array, columns=self.feature_names)
        return {spec.name: np.ascontiguousarray(array)}

    def _matrix(self, data: Any) -> np.ndarray:
        """A 2-D array of the model's width from array-like data (columns in training order)."""
        array = np.asarray(data)
        if array.ndim == 1:
            array = array.reshape(1, -1)
        if array.ndim != 2:
            raise SchemaMismatchError(f"data must be 2-D [rows, features], got shape {array.shape}")
        width = self._width
        if width is not None and array.shape[1] != width:
            raise SchemaMismatchError(
                f"data has {array.shape[1]} columns but the model expects {width}"
                + (f": {preview_names(self.feature_names, limit=10)}" if self.feature_names else "")
            )
        return array

    def _prepare_columns(
        self, data: Any, ignore_extra: bool, allow_missing: bool
    ) -> dict[str, np.ndarray]:
        """Feeds for a model with one input per column: ``{input: [N, 1]}``."""
        metadata = self.metadata
        if metadata is None:  # _multi_input() is False without metadata
            raise SchemaMismatchError("the model has no onnxbridge schema for its inputs")
        if not isinstance(data, pd.DataFrame):
            data = pd.DataFrame(self._matrix(data), columns=self.feature_names)
        frame = self._frame_to_matrix(data, ignore_extra)
        if len(frame) == 0:
            raise SchemaMismatchError("the data has no rows; nothing to predict")
        try:
            frame = normalize_features(frame)
        except DataError as exc:
            raise SchemaMismatchError(str(exc)) from exc
        if not allow_missing:
            self._check_missing(frame.isna().to_numpy())
        feeds = {}
        for spec in metadata.inputs:
            try:
                feeds[spec["name"]] = input_block(frame, spec["columns"], spec["dtype"], check=True)
            except SchemaMismatchError:
                raise  # a value that does not fit, already named by row and column
            except (TypeError, ValueError) as exc:
                column = spec["columns"][0]
                sample = frame[column].dropna().head(3).tolist()
                raise SchemaMismatchError(
                    f"column {column!r} must hold numbers for the model's input {spec['name']!r}, "
                    f"got values like {sample!r}; fix or drop those rows"
                ) from exc
        return feeds

    def _check_floats(self, given: np.ndarray, cast: np.ndarray, *, refuse_nan: bool) -> None:
        """Refuse values a float input cannot take and, when ``refuse_nan``, missing values:
        one check when every value is finite (the common case), the details only otherwise.

        Args:
            given: the rows as the caller gave them ``[N, F]`` (or one row ``[F]``).
            cast: the same rows in the input's element type.
        """
        if all_finite(cast):
            return
        if refuse_nan:
            self._refuse_nan(cast)
        refuse_table_misfits(given, cast.dtype, cast, columns=self.feature_names)

    def _refuses_missing(self) -> bool:
        """Whether the source model raises on a missing value in some column."""
        return self.metadata is not None and self.metadata.refuses_missing()

    def _refuse_nan(self, array: np.ndarray) -> None:
        """Raise the missing-values error if the float ``array`` holds NaN (the mask, and the
        message, only when there is something to report)."""
        if has_nan(array):
            self._check_missing(np.isnan(array))

    def _check_missing(self, nan_rows: np.ndarray) -> None:
        """Refuse rows with a missing value in a column where the source model refused one
        (``nan_rows [N, F]`` is the mask, columns in training order)."""
        if self.metadata is None or not nan_rows.any():
            return
        names = self.metadata.features.names
        refused = set(self.metadata.missing_refused_columns())
        if not refused:
            return
        nan_rows = np.atleast_2d(nan_rows)
        at = [j for j in range(nan_rows.shape[1]) if j < len(names) and names[j] in refused]
        counts = nan_rows[:, at].sum(axis=0)
        if not counts.any():
            return
        shown = preview_names(
            [f"{names[j]!r} ({int(n)})" for j, n in zip(at, counts, strict=True) if n],
            limit=5,
        )
        n_rows = int(nan_rows[:, at].any(axis=1).sum())
        raise SchemaMismatchError(
            f"missing values (NaN) in {n_rows} row{'s' if n_rows != 1 else ''}, columns: {shown}; "
            "the source model refuses missing values in these columns, so ONNX results for such "
            "rows are not validated: fill or drop them, or pass allow_missing=True",
            arguments=("allow_missing",),
        )

    # Running -----------------------------------------------------------------------------------
    def run(self, feeds: dict[str, np.ndarray]) -> list[Any]:
        """Run the session on prepared feeds; returns outputs in graph order.

        Raises:
            InferenceError: ONNX Runtime failed.
        """
        session = self._sessions.session_for(self._sessions.rows_of(feeds))
        run = self._native_runs.get(id(session))
        if run is None:
            run = self._native_runs[id(session)] = _native_run(session, self._output_names)
        return _call(run[0], feeds)

    def predict(
        self, data: Any, *, ignore_extra: bool = False, allow_missing: bool = False
    ) -> PredictionResult:
        """Predict for every row of ``data``.

        Args:
            data: a DataFrame (columns matched by name), a 2-D array (columns in training order),
                a mapping of column → values (or → one value, for a single row), or a list of
                row dicts.
            ignore_extra: leave out columns the model does not use instead of raising.
            allow_missing: let rows with missing values (NaN) through even when the source
                model refused them (recorded at conversion); their results are not validated.
        """
        if type(data) is np.ndarray:
            # Small numeric arrays take the bound path (runtime/fastpath.py); it returns None
            # for anything it does not serve exactly as the plain path would. Spelled out for
            # speed: a single-row call lasts a few µs, and each Python step here costs 0.05 µs.
            rows = data.shape[0] if data.ndim == 2 else 1
            if rows >= self._accelerated_from:
                # The accelerator's calls, as lean: from one row for an engine tune found faster
                # there (LightGBM's compiled code).
                accelerated = self._accelerated_array(data, allow_missing)
                if accelerated is not None:
                    return accelerated
                runner = None
            else:
                sessions = self._sessions
                if rows <= sessions.latency_max_rows:
                    runner = sessions.latency_runner
                else:
                    runner = sessions.throughput_runner
                if runner is None:
                    runner = sessions.runner_for(rows)
            if runner is not None:
                outputs = runner.try_run(data)
                if outputs is not None:
                    if self._plain_classifier:
                        # The bound path returns arrays only; labels [N] and probabilities [N, C].
                        labels = outputs[self._label_at]
                        probabilities = outputs[self._probabilities_at]
                        if labels.ndim == 1 and probabilities.ndim == 2:
                            return PredictionResult(labels, probabilities, None, self._classes)
                    return self._result(outputs)
        checked = None if allow_missing else self._output_check(data)
        # A session's NaN flag (z · z over a linear model's products) is finite only when every
        # input value is: it stands in for the input's value check too (see below).
        flagged = checked is not None and checked[1] == len(self._output_names)
        feeds = (
            self._array_feeds(
                data,
                not (allow_missing or checked is not None)
                and self._fast_input is not None
                and self._fast_input[3],
                check_values=not flagged,
            )
            if type(data) is np.ndarray
            else None
        )
        if feeds is None:
            feeds = self.prepare(
                data,
                ignore_extra=ignore_extra,
                allow_missing=allow_missing or checked is not None,
            )
        if self.accelerator is not None:
            accelerated = self._accelerated(feeds)
            if accelerated is not None:
                return accelerated
        if checked is None:
            return self._result(self.run(feeds))
        # The model's outputs, then (with a NaN flag) the flag: _result reads outputs by index.
        outputs = _call(checked[0], feeds)
        if flagged:
            # ±inf (given, or a float64 value beyond the input's range) makes a product, and so
            # the flag, infinite or NaN, as NaN does: the input is then checked in full for both.
            if not all_finite(outputs[checked[1]]):
                cast = next(iter(feeds.values()))
                given = data if type(data) is np.ndarray else cast
                self._check_floats(given, cast, refuse_nan=True)
        elif has_nan(outputs[checked[1]]):
            self._refuse_nan(next(iter(feeds.values())))  # the check prepare() skipped
        return self._result(outputs)

    def _output_check(self, data: Any) -> tuple[Any, int, Any] | None:
        """``(run, index, session)`` when this large call may check an output for NaN instead
        of the input — the model refuses NaN, its graph carries NaN to the output and the
        session shows it (runtime/nancheck.py): ``run(feeds)`` gives the outputs to check
        ``[index]`` of, the model's and, where the session has a NaN flag that shows NaN too,
        the flag last. None: check the input."""
        if not self._output_check_possible:
            return None
        if type(data) is not np.ndarray and not isinstance(data, pd.DataFrame):
            return None
        if data.ndim != 2:
            return None
        rows = data.shape[0]
        # The answer depends on the row count alone: kept per count (a few µs of a 10 000-row
        # linear call otherwise; a server or a scoring job sees few counts).
        known = self._output_check_by_rows.get(rows, self)
        if known is not self:
            return known
        checked = self._find_output_check(rows)
        if len(self._output_check_by_rows) >= _OUTPUT_CHECK_COUNTS:
            self._output_check_by_rows.clear()
        self._output_check_by_rows[rows] = checked
        return checked

    def _find_output_check(self, rows: int) -> tuple[Any, int, Any] | None:
        """:meth:`_output_check`'s answer for a call of ``rows`` rows."""
        if rows < OUTPUT_NAN_CHECK_MIN_ROWS or rows >= self._accelerated_from:
            return None
        if self._graph_carries_nan is None:
            source = self._source
            data_bytes = source if isinstance(source, bytes) else Path(source).read_bytes()
            self._graph_carries_nan = graph_carries_nan(data_bytes)
        if not self._graph_carries_nan:
            return None
        session = self._sessions.session_for(rows)
        key = id(session)
        if key not in self._output_checks:
            self._output_checks[key] = self._probe_output_check(session)
        return self._output_checks[key]

    def _probe_output_check(self, session: Any) -> tuple[Any, int, Any] | None:
        """:meth:`_output_check`'s answer for ``session``, probed once."""
        spec = self.inputs[0]
        width = self._width
        dtype = ORT_TO_NUMPY.get(spec.type)
        if not width or width > OUTPUT_NAN_CHECK_MAX_COLUMNS:
            return None
        if dtype is None or np.dtype(dtype).kind != "f":
            return None
        # A split session runs large calls on its one-thread twin: probe both.
        probed = [session, getattr(session, "part_session", session)]
        at = self._nan_output_at
        if not all(session_shows_nan(s, spec.name, dtype, width, at) for s in probed):
            return None
        names = self._output_names
        if all(
            NAN_FLAG in {o.name for o in s.get_outputs()}
            and flag_shows_nan(s, spec.name, dtype, width, NAN_FLAG)
            for s in probed
        ):
            return _native_run(session, [*names, NAN_FLAG])[0], len(names), session
        return _native_run(session, names)[0], at, session

    def _result(self, outputs: list[Any]) -> PredictionResult:
        """Outputs in graph order → a :class:`PredictionResult` by the outputs' roles.

        Kept lean (it runs on every call, a single-row call lasts a few µs): which roles exist,
        where they are and whether labels need restoring are worked out once, in ``__init__``.
        """
        if self._targets is not None:
            return self._targets_result(outputs)
        if self._plain_classifier:
            labels, probabilities = outputs[self._label_at], outputs[self._probabilities_at]
            if (
                type(labels) is np.ndarray
                and labels.ndim == 1
                and type(probabilities) is np.ndarray
                and probabilities.ndim == 2
            ):
                return PredictionResult(
                    labels=labels, probabilities=probabilities, classes=self._classes
                )
        result = PredictionResult()
        index = self._role_index.get("label")
        if index is not None:
            labels = outputs[index]
            if type(labels) is not np.ndarray or labels.ndim != 1:
                labels = np.asarray(labels).reshape(-1)
            result.labels = _restore_labels(labels, self._classes) if self._restore else labels
        for role in ("probabilities", "scores"):
            index = self._role_index.get(role)
            if index is not None:
                raw = outputs[index]
                if type(raw) is np.ndarray:
                    matrix, classes = raw, self._classes
                else:
                    matrix, classes = _probabilities(raw, self._classes)
                if matrix.ndim == 1:
                    matrix = matrix.reshape(-1, 1)
                setattr(result, role, matrix)
                result.classes = classes
        index = self._role_index.get("value")
        if index is not None:
            values = np.asarray(outputs[index])
            if values.ndim == 2 and values.shape[1] == 1:
                values = values.reshape(-1)
            result.values = values
        index = self._role_index.get("transformed")
        if index is not None:
            result.transformed = np.asarray(outputs[index])
        return result

    def _targets_result(self, outputs: list[Any]) -> PredictionResult:
        """A multi-output classifier's outputs → one result per target, labels ``[N, T]``."""
        parts = []
        for target in self._targets or []:
            labels = np.asarray(outputs[target.label_at]).reshape(-1)
            if target.restore:
                labels = _restore_labels(labels, target.classes)
            probabilities = None
            if target.probabilities_at is not None:
                probabilities, _ = _probabilities(outputs[target.probabilities_at], None)
            parts.append(
                PredictionResult(labels=labels, probabilities=probabilities, classes=target.classes)
            )
        return PredictionResult(
            labels=_stack_target_labels([p.labels for p in parts if p.labels is not None]),
            classes=self._classes,
            targets=parts,
        )


def _call(run: Any, feeds: dict[str, np.ndarray]) -> list[Any]:
    """``run(feeds)``, ONNX Runtime's errors as :class:`InferenceError`."""
    try:
        return run(feeds)
    except Exception as exc:
        raise InferenceError(f"onnxruntime failed to run the model: {first_line(exc)}") from exc


def _native_run(session: Any, names: list[str]) -> tuple[Any, Any]:
    """``(run, session)``: ``run(feeds)`` is ``session.run(names, feeds)``, minus its wrapper.

    ``InferenceSession.run`` checks the feed names in Python and builds a default
    ``RunOptions`` on each call: 2 µs of a 7 µs 100-row linear call, 5 µs of a 10 000-row one
    (measured here). Feeds from ``prepare`` need neither, so the C++ session is called with the
    output names and one ``RunOptions`` made here; a session without those internals (or one of
    onnxbridge's own, such as rows split across twins) runs through its ``run``. The session is
    kept in the pair so that its ``id`` stays its own.
    """
    import onnxruntime as ort

    # Only a real InferenceSession: the wrappers forward unknown attributes to the session
    # they wrap, and that one's C++ run would bypass them.
    method = getattr(getattr(session, "_sess", None), "run", None)
    if not isinstance(session, ort.InferenceSession) or method is None:
        return (lambda feeds: session.run(names, feeds)), session
    options = ort.RunOptions()
    return (lambda feeds: method(names, feeds, options)), session


def _restore_labels(labels: np.ndarray, classes: list[Any] | None) -> np.ndarray:
    """Give labels the type of the training classes.

    ONNX labels are int64 or string; skl2onnx writes bool and (integral) float classes as int64,
    so ``True`` comes back as ``1``. Map them back so predictions equal scikit-learn's.
    """
    if classes is None or labels.dtype.kind not in "iu":
        return labels
    values = np.asarray(classes)
    if values.dtype.kind not in "bf":
        return labels
    keys = values.astype(np.int64)
    order = np.argsort(keys)
    sorted_keys = keys[order]
    pos = np.clip(np.searchsorted(sorted_keys, labels), 0, len(sorted_keys) - 1)
    if not np.array_equal(sorted_keys[pos], labels):
        return labels
    return values[order][pos]


def _probabilities(raw: Any, classes: list[Any] | None) -> tuple[np.ndarray, list[Any] | None]:
    if isinstance(raw, list):
        # ZipMap output: one {class: probability} dict per row.
        keys = classes if classes is not None else (list(raw[0].keys()) if raw else [])
        matrix = np.array([[row[k] for k in keys] for row in raw], dtype=np.float32)
        return matrix, list(keys)
    return np.asarray(raw), classes
