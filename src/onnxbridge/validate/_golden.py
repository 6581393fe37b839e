"""Golden predictions: the ONNX outputs on the probe rows, stored in the bundle at convert.

``write_golden(bundle)`` scores the probe sets (holdout, range, thresholds, edge, missing,
strings; ``batch`` repeats holdout rows) with ONNX Runtime and writes ``golden.parquet``: one row
per probe row, columns ``probe``, ``row``, ``in:<feature>`` (the input) and ``out:<role>:<j>``
(the output, column ``j`` of the role). ``card.json`` records it under ``golden`` with its sha256,
the probe seed and the library versions. ``check_golden(bundle)`` re-runs the stored inputs and
reports every change: bit-for-bit identical, changed within the tolerances, or changed beyond
them (a DIVERGENT verdict in ``validate --golden``).

The CLI's ``convert`` calls :func:`write_golden` after ``convert_bundle``; in Python, call it
yourself (``convert`` sits below ``validate`` and does not import it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from onnxbridge._meta import role_parts
from onnxbridge._onnxfile import model_sha256
from onnxbridge.bundle import Bundle, atomic_write_path, file_sha256, library_versions, now_iso
from onnxbridge.errors import BundleError
from onnxbridge.runtime import Predictor
from onnxbridge.validate._compare import Tolerance, compare_output, role_tolerance
from onnxbridge.validate._probes import ProbeSpec, build_probe_sets
from onnxbridge.validate._runtimes import OnnxRuntime

__all__ = ["GOLDEN_NAME", "GOLDEN_PROBES", "GoldenReport", "check_golden", "write_golden"]

GOLDEN_NAME = "golden.parquet"
GOLDEN_PROBES = ("holdout", "range", "thresholds", "edge", "missing", "strings")
_IN, _OUT = "in:", "out:"


@dataclass
class GoldenReport:
    """The stored golden predictions re-run.

    Attributes:
        ok: every output within the tolerances.
        identical: every output bit-for-bit as stored.
        n_rows: golden rows re-run.
        outputs: per probe set and role: ``{"probe", "role", "n_rows", "n_mismatched",
            "n_changed", "max_abs_diff", "status", "ok"}`` (``n_changed``: rows not identical).
        stored_at: when the golden predictions were stored.
        versions_then / versions_now: library versions at convert and now.
    """

    ok: bool
    identical: bool
    n_rows: int
    outputs: list[dict[str, Any]] = field(default_factory=list)
    stored_at: str | None = None
    versions_then: dict[str, str] = field(default_factory=dict)
    versions_now: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (the ``golden`` entry of ``validation.json``)."""
        return asdict(self)


def _outputs_to_columns(outputs: Mapping[str, np.ndarray]) -> dict[str, Any]:
    columns: dict[str, Any] = {}
    for role, values in outputs.items():
        array = np.asarray(values)
        if array.ndim == 1:
            columns[f"{_OUT}{role}:0"] = array
        else:
            matrix = array.reshape(len(array), -1)
            for j in range(matrix.shape[1]):
                columns[f"{_OUT}{role}:{j}"] = matrix[:, j]
    return columns


def _columns_to_outputs(frame: pd.DataFrame) -> dict[str, np.ndarray]:
    roles: dict[str, list[str]] = {}
    for column in frame.columns:
        if column.startswith(_OUT):
            role = column[len(_OUT) :].rsplit(":", 1)[0]
            roles.setdefault(role, []).append(column)
    out = {}
    for role, columns in roles.items():
        columns = sorted(columns, key=lambda c: int(c.rsplit(":", 1)[1]))
        values = frame[columns].to_numpy()
        label = role_parts(role)[0] == "label"
        out[role] = values[:, 0] if label or len(columns) == 1 else values
    return out


def write_golden(
    bundle: str | Path | Bundle, *, spec: ProbeSpec | None = None, trusted: Sequence[str] = ()
) -> Path:
    """Store the ONNX outputs on the probe rows in ``BUNDLE/golden.parquet`` (and card.json).

    Args:
        bundle: a converted bundle.
        spec: probe sizes and seed (default :class:`ProbeSpec` restricted to
            :data:`GOLDEN_PROBES`).
        trusted: extra names to trust in ``model.skops`` for this call (see
            :func:`onnxbridge.bundle.load_estimator`); never stored.

    Returns:
        The path of ``golden.parquet``.

    Raises:
        BundleError: the bundle has no (or a changed) ``model.onnx``.
    """
    from onnxbridge.validate._core import _accepts_missing, _inputs_take

    if not isinstance(bundle, Bundle):
        bundle = Bundle.open(bundle)
    bundle.check_file("model.onnx")
    estimator = bundle.load_estimator(trusted=trusted)
    X, _ = bundle.load_holdout()
    spec = spec or ProbeSpec(probes=GOLDEN_PROBES)
    predictor = Predictor(bundle.onnx_path)
    runtime = OnnxRuntime(predictor)
    sets = build_probe_sets(
        X,
        bundle.schema,
        estimator=estimator,
        accepts_missing=_accepts_missing(predictor, estimator, X),
        spec=spec,
    )
    parts = []
    for probe in sets:
        if probe.skipped is not None or probe.name not in GOLDEN_PROBES:
            continue
        # Rows holding a value the inputs cannot take (±inf) have no output to keep.
        takes, _ = _inputs_take([runtime], probe.frame)
        rows = probe.frame[takes].reset_index(drop=True)
        outputs = runtime.run(rows)
        block = pd.DataFrame({"probe": probe.name, "row": np.arange(len(rows))})
        for name in rows.columns:
            column = rows[name]
            if pd.api.types.is_numeric_dtype(column) or pd.api.types.is_bool_dtype(column):
                # One dtype per column across probe sets (bools next to NaN and edge values);
                # the model's input is float anyway.
                column = column.astype(np.float64)
            block[f"{_IN}{name}"] = column.to_numpy()
        for name, values in _outputs_to_columns(outputs).items():
            block[name] = values
        parts.append(block)
    frame = pd.concat(parts, ignore_index=True)
    path = bundle.path / GOLDEN_NAME
    with atomic_write_path(path) as tmp:
        frame.to_parquet(tmp, index=False)
    bundle.card["golden"] = {
        "file": GOLDEN_NAME,
        "sha256": file_sha256(path),
        "rows": len(frame),
        "probe_sets": sorted(set(frame["probe"]), key=GOLDEN_PROBES.index),
        "seed": spec.seed,
        # With external data, the hash covers the data file too.
        "model_sha256": model_sha256(bundle.onnx_path),
        "stored_at": now_iso(),
        "versions": library_versions(),
    }
    bundle.save_card()
    return path


def check_golden(
    bundle: str | Path | Bundle, *, tolerances: Mapping[str, Tolerance] | None = None
) -> GoldenReport:
    """Re-run the golden inputs with ONNX Runtime and compare with the stored outputs.

    Raises:
        BundleError: no golden predictions (convert with the CLI, or call write_golden), or
            ``golden.parquet`` changed since it was stored.
    """
    if not isinstance(bundle, Bundle):
        bundle = Bundle.open(bundle)
    entry = bundle.card.get("golden")
    path = bundle.path / GOLDEN_NAME
    if not entry or not path.is_file():
        raise BundleError(
            f"bundle {str(bundle.path)!r} has no golden predictions; run `onnxbridge convert "
            f"{bundle.path}` (or onnxbridge.validate.write_golden(bundle)) to store them"
        )
    if file_sha256(path) != entry.get("sha256"):
        raise BundleError(
            f"{GOLDEN_NAME} in {str(bundle.path)!r} changed since it was recorded in card.json "
            "(sha256 differs); re-run `onnxbridge convert` to store golden predictions again"
        )
    bundle.check_file("model.onnx")
    stored = pd.read_parquet(path)
    runtime = OnnxRuntime(Predictor(bundle.onnx_path))
    schema = bundle.schema
    outputs: list[dict[str, Any]] = []
    for probe, block in stored.groupby("probe", sort=False):
        block = block.sort_values("row")
        inputs = pd.DataFrame({name: block[f"{_IN}{name}"].to_numpy() for name in schema.names})
        expected = _columns_to_outputs(block)
        actual = runtime.run(inputs)
        for role, values in expected.items():
            if role not in actual:
                continue
            got = np.asarray(actual[role])
            comparison, _ = compare_output(role, values, got, role_tolerance(tolerances, role))
            exact, _ = compare_output(role, values, got, Tolerance(0.0, 0.0))
            outputs.append(
                {
                    "probe": str(probe),
                    "role": role,
                    "n_rows": comparison.n_rows,
                    "n_mismatched": comparison.n_mismatched,
                    "n_changed": exact.n_mismatched,
                    "max_abs_diff": comparison.max_abs_diff,
                    "status": comparison.status,
                    "ok": comparison.ok,
                }
            )
    return GoldenReport(
        ok=all(o["ok"] for o in outputs),
        identical=all(o["n_changed"] == 0 for o in outputs),
        n_rows=len(stored),
        outputs=outputs,
        stored_at=entry.get("stored_at"),
        versions_then=dict(entry.get("versions") or {}),
        versions_now=library_versions(),
    )
