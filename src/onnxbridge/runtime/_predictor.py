"""Predictor: an ONNX Runtime model that takes DataFrames, arrays or records and gives labels,
probabilities or values.

Three steps, one module each: input coercion (:mod:`onnxbridge.runtime._inputs`), one run through
the :class:`~onnxbridge.runtime._router.Router` (which session, with which settings), and output
decoding (:mod:`onnxbridge.runtime._outputs`).

Shapes: ``X [N, F] -> labels [N], probabilities [N, C]`` (classifiers) or ``values [N]`` /
``[N, T]`` (regressors).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any, Literal

import numpy as np

from onnxbridge._meta import ModelMetadata
from onnxbridge.errors import OnnxModelError, SessionSettingsError
from onnxbridge.runtime._inputs import InputSchema
from onnxbridge.runtime._outputs import OutputDecoder, PredictionResult, check_output_rows
from onnxbridge.runtime._router import Router
from onnxbridge.runtime._settings import SessionSettings, TuningSpec

__all__ = ["PredictionResult", "Predictor", "check_output_rows"]


class Predictor:
    """Run an ONNX model on tabular data.

    Args:
        model: path to a ``.onnx`` file, or its bytes.
        providers: ONNX Runtime execution providers (CPU by default).
        intra_op_num_threads: threads per operator; by default the number of cores this process
            may run on.
        allow_spinning: let idle ONNX Runtime threads spin-wait for work. Off by default: on a
            shared machine spinning threads fight other processes for the cores.
        settings: all session settings at once (:class:`~onnxbridge.runtime.SessionSettings`);
            overrides the two arguments above and any tuned settings.
        tuning: the regimes to run (a :class:`~onnxbridge.runtime.TuningSpec`, such as the
            ``spec`` of a tune report) instead of those stored in the model: the Predictor then
            runs exactly as one of a model tuned to ``tuning`` does. Not with ``settings``.
        tuned: use the settings ``onnxbridge tune`` stored in the model (``onnxbridge.session``
            metadata), when there are some and neither ``settings`` nor ``tuning`` is given.
            With a spec (stored or ``tuning``), calls of at most ``latency_max_rows`` rows run
            on the latency settings, larger calls on the throughput settings (one session each,
            the second opened on first use); ``intra_op_num_threads`` / ``allow_spinning``,
            when given, replace that field in both (``intra_op_num_threads`` also turns a tuned
            ``row_split`` off).
        regime: ``"throughput"`` runs every call, whatever its size, on the throughput
            settings (tuned, or the default ones with trees in blocks) and opens only that
            session — batch scoring, whose results must not depend on the batch size; None
            picks the regime per call.
        speedups: False turns every speed-up of onnxbridge off: no tuned regimes, no graph
            rewrites, no rows split across threads, no bound path for small calls. Every call
            then runs ``session.run`` on one plain ``onnxruntime.InferenceSession`` opened with
            ``settings`` (or the default settings: one thread per core, no spinning). Results
            are the same either way (within float32 rounding where a rewrite adds in another
            order); use it to rule the speed-ups out when looking into a difference.

    Without ``speedups=False``, small calls on a numeric array take a bound path with
    pre-allocated buffers, and large calls may run a rewritten graph (trees in blocks, linear
    operators as dot products) — see :mod:`onnxbridge.runtime._router`.

    Raises:
        OnnxModelError: the file is missing or is not a loadable ONNX model.
        SessionSettingsError: both ``settings`` and ``tuning`` given, or an unknown ``regime``.

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
        tuning: TuningSpec | None = None,
        regime: Literal["throughput"] | None = None,
        speedups: bool = True,
    ) -> None:
        if settings is not None and tuning is not None:
            raise SessionSettingsError(
                "pass settings (every call runs them) or tuning (regimes by call size), not both"
            )
        self.path: Path | None = None
        if not isinstance(model, bytes):
            self.path = Path(model)
            if not self.path.is_file():
                raise OnnxModelError(
                    f"model file {str(self.path)!r} does not exist; pass the path of a .onnx file "
                    "(`onnxbridge convert` writes BUNDLE/model.onnx)"
                )
        # What the caller sets wins over tuned settings, for every call: `settings` replaces
        # them all, the two keyword arguments replace their field in both regimes.
        overrides: dict[str, Any] = {}
        if intra_op_num_threads is not None:
            # The caller sets the threads of a call: no rows split across more of them.
            overrides["intra_op_num_threads"] = intra_op_num_threads
            overrides["row_split"] = 0
        if allow_spinning is not None:
            overrides["allow_spinning"] = allow_spinning
        self._router = Router(
            model if isinstance(model, bytes) else self.path,  # type: ignore[arg-type]
            tuning,
            settings=settings,
            providers=providers,
            speedups=speedups,
            regime=regime,
            tuned=tuned,
            overrides=overrides,
        )
        # The single-row session; run() and predict() pick one per call.
        self.session = self._router.session_for(1)
        self.metadata: ModelMetadata | None = ModelMetadata.from_props(self._router.props)
        self.inputs = self.session.get_inputs()
        self.outputs = self.session.get_outputs()
        # The settings `onnxbridge tune` stored in the model, as this Predictor runs them.
        self.tuning: TuningSpec | None = self._router.tuning
        self._schema = InputSchema(self.metadata, self.inputs)
        self._decoder = OutputDecoder(self.metadata, [o.name for o in self.outputs])

    # Sessions ----------------------------------------------------------------------------------
    def session_for(self, rows: int) -> Any:
        """The ONNX Runtime session a call of ``rows`` rows runs on (see ``tune``)."""
        return self._router.session_for(rows)

    def settings_for(self, rows: int) -> SessionSettings:
        """The session settings a call of ``rows`` rows really runs with: its regime's, without
        the rewrites and the row split such a call does without (see
        :meth:`Router.settings_for <onnxbridge.runtime._router.Router.settings_for>`)."""
        return self._router.settings_for(rows)

    def open_sessions(self) -> None:
        """Open every regime's session now, not on the first call that needs it.

        A server calls this when it loads a model, so that its first large request does not pay
        for opening (and, with trees in blocks, rewriting) the throughput session.
        """
        self._router.open_all()

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
        return self._schema.input_dtype

    @property
    def input_width(self) -> int | None:
        """The number of columns the graph's first input declares (None when not fixed)."""
        return self._schema.input_width()

    @property
    def task(self) -> str | None:
        """``"classification"``, ``"regression"`` or None when unknown."""
        return self.metadata.task if self.metadata else None

    # Running -----------------------------------------------------------------------------------
    def prepare(
        self, data: Any, *, ignore_extra: bool = False, allow_missing: bool = False
    ) -> dict[str, np.ndarray]:
        """Turn a DataFrame, 2-D array, mapping of columns or list of records into ORT feeds.

        Raises:
            SchemaMismatchError: missing / unexpected columns, wrong width, non-numeric values,
                missing values (NaN) for a model whose source refuses them.
        """
        return self._schema.prepare(data, ignore_extra=ignore_extra, allow_missing=allow_missing)

    def run(self, feeds: dict[str, np.ndarray]) -> list[Any]:
        """Run the model on prepared feeds; returns outputs in graph order.

        Raises:
            InferenceError: ONNX Runtime failed.
        """
        return self._router.run(feeds)

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

        Raises:
            SchemaMismatchError: the data does not fit the model (see :meth:`prepare`).
            InferenceError: ONNX Runtime failed.
        """
        # Small numeric arrays may take the bound path; anything it does not serve exactly as
        # the general path would is prepared here (which raises the error for bad input).
        prepare = self._feeds
        if ignore_extra or allow_missing:
            prepare = partial(self._feeds, ignore_extra=ignore_extra, allow_missing=allow_missing)
        return self._decoder.decode(self._router.call(data, prepare))

    def _feeds(
        self, data: Any, ignore_extra: bool = False, allow_missing: bool = False
    ) -> dict[str, np.ndarray]:
        feeds = None
        if type(data) is np.ndarray:
            refuse_nan = self._schema.refuses_missing and not allow_missing
            feeds = self._schema.array_feeds(data, refuse_nan)
        if feeds is None:
            feeds = self.prepare(data, ignore_extra=ignore_extra, allow_missing=allow_missing)
        return feeds
