"""The validation report: per probe set, per pair of runtimes, per output; the verdict.

``reports/validation.json`` is :meth:`ValidationReport.to_dict`; its layout is versioned by
:data:`REPORT_SCHEMA_VERSION` and documented in ``docs/validate.md``. The top-level ``outputs``,
``n_rows``, ``rows``, ``atol`` and ``rtol`` keep the layout of schema 1 (scikit-learn against
ONNX Runtime on the held-out rows), so readers of the old report keep working.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from onnxbridge.bundle import library_versions, now_iso
from onnxbridge.validate._compare import EQUIVALENT, OutputComparison

__all__ = [
    "REPORT_SCHEMA_VERSION",
    "Diagnosis",
    "PairComparison",
    "ProbeSetResult",
    "ValidationReport",
]

REPORT_SCHEMA_VERSION = 2


# Runtimes as people name them.
_SPOKEN = {"sklearn": "scikit-learn", "reference": "onnx.reference"}


@dataclass
class PairComparison:
    """Two runtimes compared on one probe set.

    Attributes:
        a: the reference side (``sklearn``, ``onnxruntime``, ...).
        b: the other side (``onnxruntime``, ``reference``, ``onnxruntime[1-row]``, ...).
        outputs: one comparison per output role.
        ok: every output passes and neither side failed.
        status: the worst status bucket of its outputs (``error`` when a side failed).
        error: why the comparison could not run (a runtime raised), else None.
        gating: whether a failure counts for the verdict. Pairs that involve only
            ``onnx.reference`` on one side (``sklearn~reference``, ``onnxruntime~reference``,
            ``reference~reference[1-row]``) tell a conversion error from a runtime problem but
            do not gate when ONNX Runtime — the deployment runtime — is compared too.
    """

    a: str
    b: str
    outputs: list[OutputComparison] = field(default_factory=list)
    ok: bool = True
    status: str = "OK"
    error: str | None = None
    gating: bool = True

    @property
    def name(self) -> str:
        """``a~b``."""
        return f"{self.a}~{self.b}"


@dataclass
class ProbeSetResult:
    """One probe set's rows and comparisons.

    Attributes:
        name: the probe set (``holdout``, ``range``, ``thresholds``, ...).
        description: what its rows are.
        n_rows: rows compared (rows scikit-learn refused are left out, see ``n_refused``, and
            rows the ONNX model's inputs cannot take, see ``n_unscoreable``).
        skipped: why the set was not compared, else None.
        pairs: the runtime pairs compared.
        ok: every pair passes (True for a skipped set).
        cause: for a failing set, what the pattern of pairs says: ``conversion`` (the ONNX
            runtimes agree with each other and differ from scikit-learn), ``onnxruntime`` /
            ``reference`` (that runtime departs from the other and from scikit-learn, which
            agree), ``runtime`` (the ONNX runtimes differ from each other only),
            ``conversion+runtime`` (all three differ), ``batch`` (results depend on the
            batch), else None.
        n_refused: rows scikit-learn raised on (not compared).
        refused: scikit-learn's message for the first refused row.
        n_unscoreable: rows holding a value the ONNX model's inputs cannot take (``±inf``, a
            number out of the input type's range): ``predict`` refuses such a row, so it is
            not compared either.
        unscoreable: what the first of them holds (its column and value).
        gating: whether a failure makes the verdict DIVERGENT (False: reported as a warning;
            see ``missing_values`` in :func:`onnxbridge.validate.validate_model`).
        unavailable: runtime → why it could not score these rows (``onnx.reference`` lacks
            some kernels ONNX Runtime has); its pairs are then left out, and the report's
            ``warnings`` say so.
        sample: when the time budget made the set run on a sample of its rows, ``{"rows": N,
            "of": M, "seed": S, "budget_s": B, "positions": [...]}`` — the N of its M rows
            (their positions in the set, in order) that every runtime scored; None when every
            row was scored.
    """

    name: str
    description: str
    n_rows: int
    skipped: str | None = None
    pairs: list[PairComparison] = field(default_factory=list)
    ok: bool = True
    cause: str | None = None
    n_refused: int = 0
    refused: str | None = None
    n_unscoreable: int = 0
    unscoreable: str | None = None
    gating: bool = True
    unavailable: dict[str, str] = field(default_factory=dict)
    sample: dict[str, Any] | None = None

    @property
    def sampled(self) -> str | None:
        """``sampled N of M rows (seed S) to stay within the B s budget``, or None."""
        if self.sample is None:
            return None
        s = self.sample
        return (
            f"sampled {s['rows']} of {s['of']} rows (seed {s['seed']}) to stay within the "
            f"{s['budget_s']:g} s budget"
        )

    @property
    def fails_verdict(self) -> bool:
        """Whether this set makes the verdict DIVERGENT (a gating pair failed in a gating set)."""
        return self.gating and any(not p.ok and p.gating for p in self.pairs)


@dataclass
class Diagnosis:
    """What a divergence is, the evidence, and what to do next.

    Attributes:
        kind: ``pipeline``, ``trees``, ``missing-values``, ``neighbours``, ``runtime``,
            ``batch``, ``golden`` or ``unexplained``.
        summary: one line.
        details: the evidence, one line each.
        next_step: the concrete next step.
        data: machine-readable evidence (first diverging step, features, thresholds, ...).
    """

    kind: str
    summary: str
    details: list[str] = field(default_factory=list)
    next_step: str = ""
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class ValidationReport:
    """The verdict of a validation, with every probe set's detail.

    Attributes:
        verdict: ``EQUIVALENT`` or ``DIVERGENT``.
        outputs: scikit-learn vs ONNX Runtime on the held-out rows (schema 1's table); the
            ONNX runtimes against each other when there is no source model (:attr:`compared`).
        atol, rtol: the tolerance given for every numeric output (per-role values are in
            ``tolerances``).
        n_rows, rows: held-out rows compared, and their name.
        model: the ONNX file validated.
        reference: the source model (class name).
        runtimes: runtime → ``{"available": bool, "version": str, "error": str | None}``.
        tolerances: role → ``{"atol", "rtol"}`` used.
        probe_sets: every probe set.
        diagnoses: for a DIVERGENT verdict, what went wrong and what to do.
        golden: the golden-predictions check, when asked for.
        seed: the probe seed (also the seed of the rows sampled to stay within the budget).
        budget_s: the time budget in seconds (None: no budget); probe sets that would not fit
            in it ran on a seeded sample of their rows (``probe_sets[].sample``).
        memory_bound: bytes of intermediate results one batch of rows may take in a runtime;
            each runtime scores a probe set in batches sized to stay under it.
        batch_rows: the rows of one such batch for this model.
        scoring_s: wall time of scoring the probe sets (what the budget bounds).
        duration_s: wall time of the validation.
        schema_version: :data:`REPORT_SCHEMA_VERSION`.
    """

    verdict: str
    outputs: list[OutputComparison]
    atol: float
    rtol: float
    n_rows: int
    rows: str = "holdout"
    model: str | None = None
    reference: str | None = None
    runtimes: dict[str, dict[str, Any]] = field(default_factory=dict)
    tolerances: dict[str, dict[str, float]] = field(default_factory=dict)
    probe_sets: list[ProbeSetResult] = field(default_factory=list)
    diagnoses: list[Diagnosis] = field(default_factory=list)
    golden: dict[str, Any] | None = None
    seed: int = 0
    budget_s: float | None = None
    memory_bound: int | None = None
    batch_rows: int | None = None
    scoring_s: float | None = None
    duration_s: float = 0.0
    created_at: str = field(default_factory=now_iso)
    versions: dict[str, str] = field(default_factory=library_versions)
    schema_version: int = REPORT_SCHEMA_VERSION
    # Per probe set, |Δ| of every numeric value of its first pair (for the HTML histograms);
    # not written to validation.json.
    diff_samples: dict[str, list[float]] = field(default_factory=dict, repr=False)

    @property
    def equivalent(self) -> bool:
        """True when the verdict is EQUIVALENT."""
        return self.verdict == EQUIVALENT

    def _repr_html_(self) -> str:
        """The verdict, tolerance, warnings, per-output and per-probe-set tables as HTML.

        Jupyter calls this to show a report; the full page is ``reports/validation.html``.
        """
        from onnxbridge.validate._report_html import report_html

        return report_html(self)

    def probe_set(self, name: str) -> ProbeSetResult:
        """The result of probe set ``name``.

        Raises:
            KeyError: no such probe set in this report.
        """
        for probe in self.probe_sets:
            if probe.name == name:
                return probe
        raise KeyError(f"no probe set {name!r}; the report has {[p.name for p in self.probe_sets]}")

    @property
    def compared(self) -> str:
        """The two runtimes ``outputs`` compares, as people name them: ``scikit-learn vs
        onnxruntime``, or ``onnxruntime vs onnx.reference`` when there is no source model."""
        pair = ("sklearn", "onnxruntime")
        for probe in self.probe_sets:
            if probe.name == self.rows and probe.pairs:
                pair = (probe.pairs[0].a, probe.pairs[0].b)
                break
        return " vs ".join(_SPOKEN.get(name, name) for name in pair)

    @property
    def failing_probe_sets(self) -> list[str]:
        """Names of the probe sets that caught a divergence."""
        return [p.name for p in self.probe_sets if p.fails_verdict]

    @property
    def warning_probe_sets(self) -> list[str]:
        """Names of the probe sets that differ without making the verdict DIVERGENT."""
        return [p.name for p in self.probe_sets if not p.ok and not p.fails_verdict]

    @property
    def sampled_probe_sets(self) -> list[str]:
        """Names of the probe sets that ran on a sample of their rows (the time budget)."""
        return [p.name for p in self.probe_sets if p.sample is not None]

    @property
    def warnings(self) -> list[str]:
        """What the verdict rests on less than it was asked to, one line each.

        A runtime that could not score some probe sets (``onnx.reference`` without a kernel
        ONNX Runtime has) leaves its pairs out of them:
        ``compared on 2 of 3 runtimes: onnx.reference cannot load the model: ...``, with the
        probe sets named when it is not all of them. Held-out rows scikit-learn refused every
        one of, rows the ONNX model's inputs cannot take (left out), and scoring that took longer
        than the budget (the minimum samples alone cost more), say so too.
        """
        asked = list(self.runtimes)
        compared = [p for p in self.probe_sets if p.skipped is None]
        lines = []
        for name, info in self.runtimes.items():
            failed_on = list(info.get("failed_on") or [])
            if info.get("available", True) and not failed_on:
                continue
            if not info.get("available", True) or len(failed_on) == len(compared):
                where = ""
            else:
                where = f" on {', '.join(failed_on)}"
            lines.append(
                f"compared on {len(asked) - 1} of {len(asked)} runtimes{where}: "
                f"{info.get('error') or name + ' could not run the model'}"
            )
        for probe in self.probe_sets:
            if probe.n_unscoreable:
                rows = "1 row" if probe.n_unscoreable == 1 else f"{probe.n_unscoreable} rows"
                lines.append(
                    f"{probe.name}: {rows} left out: the ONNX model's inputs cannot take "
                    f"{'it' if probe.n_unscoreable == 1 else 'them'} ({probe.unscoreable}); "
                    "predict refuses such rows"
                )
            if probe.name == "holdout" and (probe.skipped or "").startswith(
                "scikit-learn refused every row"
            ):
                lines.append(
                    f"no held-out row was compared: {probe.skipped}; the verdict rests on the "
                    "generated probe sets only: pass rows the source model scores"
                )
        over = self.budget_s is not None and (self.scoring_s or 0.0) > self.budget_s * 1.1
        if over and self.sampled_probe_sets:
            lines.append(
                f"scoring took {self.scoring_s:.3g} s, beyond the {self.budget_s:g} s budget: the "
                "minimum samples alone cost more on this model; pass a larger --budget (Python: "
                "budget=), or --runtimes sklearn,onnxruntime (Python: runtimes=('sklearn', "
                "'onnxruntime')) to leave the slowest runtime out"
            )
        return lines

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (``reports/validation.json``)."""
        payload = asdict(self)
        payload.pop("diff_samples", None)
        for probe, raw in zip(self.probe_sets, payload["probe_sets"], strict=True):
            raw["fails_verdict"] = probe.fails_verdict
            raw["sampled"] = probe.sampled
            for pair, raw_pair in zip(probe.pairs, raw["pairs"], strict=True):
                raw_pair["name"] = pair.name
        payload["failing_probe_sets"] = self.failing_probe_sets
        payload["warning_probe_sets"] = self.warning_probe_sets
        payload["sampled_probe_sets"] = self.sampled_probe_sets
        payload["warnings"] = self.warnings
        return payload
