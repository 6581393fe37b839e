"""``onnxbridge tune``: measure session settings per regime and store the winners in the model.

``bench`` measures; ``tune`` decides. The package is split by job: :mod:`~.candidates` (what is
tried), :mod:`~.search` (timing candidates through the router and picking a winner per regime),
:mod:`~.boundary` (the latency/throughput boundary), :mod:`~.engines` (compiled engines,
``engines="all"``), :mod:`~.store` (the model's metadata and the bundle's card),
:mod:`~.report` and :mod:`~.table` (what it found, for the terminal, JSON and notebooks), and
:mod:`~.run` (:func:`tune_model`, which runs them in turn).
"""

from onnxbridge.tune._boundary import DEFAULT_LATENCY_MAX_ROWS, boundary_limit
from onnxbridge.tune._candidates import Variants, stage_one_candidates, stage_two_candidates
from onnxbridge.tune._report import CandidateTiming, RegimeResult, TuneReport
from onnxbridge.tune._run import ENGINES, REGIMES, Engines, Regime, tune_model
from onnxbridge.tune._store import read_tuning, store_tuning

__all__ = [
    "DEFAULT_LATENCY_MAX_ROWS",
    "ENGINES",
    "REGIMES",
    "CandidateTiming",
    "Engines",
    "Regime",
    "RegimeResult",
    "TuneReport",
    "Variants",
    "boundary_limit",
    "read_tuning",
    "stage_one_candidates",
    "stage_two_candidates",
    "store_tuning",
    "tune_model",
]
