"""The router: which session, with which settings, runs a call of N rows.

A model has up to two regimes (:class:`~onnxbridge.runtime.settings.TuningSpec`): calls of at
most ``latency_max_rows`` rows run on the latency settings, larger calls on the throughput
settings. :class:`Router` owns that rule and the sessions behind it; ``Predictor`` runs every call
through one, and ``onnxbridge tune`` measures its candidates through one, so what tune measures is
what predict runs.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from onnxbridge.runtime.sessions import RegimeSessions, effective_settings, open_ort_session
from onnxbridge.runtime.settings import SessionSettings, TuningSpec

__all__ = ["Router"]


class Router:
    """Route calls of a model to the session of their regime.

    Args:
        model: path to a ``.onnx`` file, or its bytes.
        spec: the regimes (None: every call runs with ``settings``).
        settings: the settings of the first session opened (ONNX Runtime's defaults if None).
        providers: ONNX Runtime execution providers (CPU by default).
    """

    def __init__(
        self,
        model: str | os.PathLike[str] | bytes,
        spec: TuningSpec | None = None,
        *,
        settings: SessionSettings | None = None,
        providers: Sequence[str] | None = None,
    ) -> None:
        source: Any = model if isinstance(model, bytes) else str(model)
        chosen = list(providers or ["CPUExecutionProvider"])
        base = settings or SessionSettings()

        def open_session(with_settings: SessionSettings) -> Any:
            if with_settings.tree_block_nodes or with_settings.linear_gemv:
                data = source if isinstance(source, bytes) else open(source, "rb").read()
                with_settings = effective_settings(data, with_settings)
            return open_ort_session(source, with_settings, chosen)

        self._sessions = RegimeSessions(open_session(base), base, spec, open_session, None)

    def settings_for(self, rows: int) -> SessionSettings:
        """The settings a call of ``rows`` rows runs with."""
        return self._sessions.settings_for(rows)

    def session_for(self, rows: int) -> Any:
        """The session a call of ``rows`` rows runs on (opened on first use)."""
        return self._sessions.session_for(rows)

    def open_all(self) -> None:
        """Open every regime's sessions now, not on the first call that needs them."""
        self._sessions.open_all()

    def run(self, feeds: dict[str, np.ndarray]) -> list[Any]:
        """Outputs in graph order for prepared ``feeds``, on the session of their row count."""
        return self.session_for(self._sessions.rows_of(feeds)).run(None, feeds)
