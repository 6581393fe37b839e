"""What ``tune`` measured and chose: per candidate, per regime, and the whole report."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from onnxbridge.bench._timing import Timing
from onnxbridge.bundle import now_iso
from onnxbridge.runtime._settings import SessionSettings, TuningSpec
from onnxbridge.tune._candidates import MID_ROWS

__all__ = ["TUNE_FORMAT", "CandidateTiming", "RegimeResult", "TuneReport"]

TUNE_FORMAT = "1"


@dataclass(frozen=True)
class CandidateTiming:
    """One candidate's timing in one regime, in one step (1 or 2) of the search."""

    settings: SessionSettings
    timing: Timing
    step: int = 1
    # The throughput regime's second size (MID_ROWS rows per call), when measured.
    mid: Timing | None = None
    # Its third size (``large_rows`` rows per call), for step two's close candidates.
    large: Timing | None = None
    large_rows: int = 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        out = {
            "step": self.step,
            "settings": self.settings.to_dict(),
            "label": self.settings.label(),
            "median": self.timing.median,
            "spread": self.timing.spread,
            "timing": self.timing.to_dict(),
        }
        if self.mid is not None:
            out["mid_rows"] = MID_ROWS
            out["mid_timing"] = self.mid.to_dict()
        if self.large is not None:
            out["large_rows"] = self.large_rows
            out["large_timing"] = self.large.to_dict()
        return out


@dataclass
class RegimeResult:
    """What one regime measured and chose.

    Attributes:
        regime: ``"latency"`` or ``"throughput"``.
        rows: rows per call measured.
        candidates: every candidate of every step, in measurement order.
        winner: the chosen settings.
        winner_timing: its timing (from the last step it was measured in).
        ort_default: ONNX Runtime's defaults in the same run.
        onnxbridge_default: ``Predictor``'s untuned defaults in the same run.
    """

    regime: str
    rows: int
    candidates: list[CandidateTiming]
    winner: SessionSettings
    winner_timing: Timing
    ort_default: Timing
    onnxbridge_default: Timing

    def passed_on(self, step: int) -> SessionSettings | None:
        """The settings step ``step`` kept: the winner after the last step, otherwise the
        candidate the next step started from (None when there is no such step)."""
        steps = sorted({c.step for c in self.candidates})
        if steps and step == steps[-1]:
            return self.winner
        later = [c for c in self.candidates if c.step == step + 1]
        return later[0].settings if later else None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "regime": self.regime,
            "rows": self.rows,
            "winner": self.winner.to_dict(),
            "winner_label": self.winner.label(),
            "winner_median": self.winner_timing.median,
            "speedup_vs_ort_default": self.ort_default.median / self.winner_timing.median,
            "speedup_vs_onnxbridge_default": (
                self.onnxbridge_default.median / self.winner_timing.median
            ),
            "candidates": [c.to_dict() for c in self.candidates],
        }


@dataclass
class TuneReport:
    """What ``onnxbridge tune`` measured and stored.

    Attributes:
        model: the ``.onnx`` file tuned.
        spec: the stored settings.
        regimes: the regimes measured.
        boundary: ``[{"rows": 10, "latency": s, "throughput": s}, ...]`` when measured.
        accelerators: one check per accelerator candidate (``engines="all"``).
        accelerators_skipped: engines not tried, and why.
        machine: cores, load average, versions.
    """

    model: str
    spec: TuningSpec
    regimes: list[RegimeResult]
    boundary: list[dict[str, Any]] = field(default_factory=list)
    accelerators: list[dict[str, Any]] = field(default_factory=list)
    accelerators_skipped: list[str] = field(default_factory=list)
    machine: dict[str, Any] = field(default_factory=dict)
    created_at: str = field(default_factory=now_iso)

    def _repr_html_(self) -> str:
        """The tables ``onnxbridge tune`` prints, as HTML (how a notebook shows the report)."""
        from onnxbridge.tune._table import tune_html

        return tune_html(self)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (what ``reports/tune.json`` holds)."""
        return {
            "format": TUNE_FORMAT,
            "created_at": self.created_at,
            "model": self.model,
            "spec": self.spec.to_dict(),
            "regimes": [r.to_dict() for r in self.regimes],
            "boundary": self.boundary,
            "accelerators": self.accelerators,
            "accelerators_skipped": self.accelerators_skipped,
            "machine": self.machine,
        }
