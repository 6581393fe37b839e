"""Where tuning lives: the model's ``metadata_props`` and, for a bundle, its card.

The spec is written into the model under ``onnxbridge.session`` (JSON), so the ``.onnx`` file
alone carries it to ``predict``, ``serve`` and ``score``; a bundle's ``card.json`` holds a copy
under ``tuning`` (``model.onnx`` re-hashed), and ``reports/tune.json`` the full measurements.
Every file is written to a temporary name and renamed into place.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from onnxbridge._files import atomic_write_path
from onnxbridge.bench._source import BenchSource
from onnxbridge.bundle import ONNX_NAME, now_iso
from onnxbridge.errors import OnnxModelError, first_line
from onnxbridge.runtime._settings import SESSION_KEY, TuningSpec

__all__ = ["keep_artifact", "read_tuning", "store_tuning"]


def read_tuning(path: str | Path) -> TuningSpec | None:
    """The tuned settings stored in a ``.onnx`` file, or None.

    Raises:
        OnnxModelError: the file is not an ONNX model.
        SessionSettingsError: the entry is there but damaged.
    """
    import onnx
    from google.protobuf.message import DecodeError

    try:
        model = onnx.load(str(path), load_external_data=False)
    except (OSError, DecodeError) as exc:
        raise OnnxModelError(
            f"cannot read {str(path)!r} as an ONNX model: {first_line(exc)}"
        ) from exc
    return TuningSpec.find_in_props({p.key: p.value for p in model.metadata_props})


def store_tuning(source: BenchSource, spec: TuningSpec, report: dict[str, Any] | None) -> None:
    """Write ``spec`` into the model's metadata (and the bundle's card), atomically.

    The model file is rewritten to a temporary name and renamed into place; for a bundle the
    card then records the new hash of ``model.onnx`` and the spec under ``tuning``. A model that
    keeps its tensors in external data keeps them there, untouched: only the ``.onnx`` (the
    graph and its metadata) is rewritten.
    """
    import onnx

    model = onnx.load(str(source.onnx_path), load_external_data=False)
    keep = [p for p in model.metadata_props if p.key != SESSION_KEY]
    del model.metadata_props[:]
    for prop in keep:
        model.metadata_props.add(key=prop.key, value=prop.value)
    model.metadata_props.add(key=SESSION_KEY, value=spec.to_json())
    with atomic_write_path(source.onnx_path) as tmp:
        tmp.write_bytes(model.SerializeToString())
    if report is not None:
        source.reports_dir.mkdir(parents=True, exist_ok=True)
        with atomic_write_path(source.reports_dir / "tune.json") as tmp:
            tmp.write_text(json.dumps(report, indent=2) + "\n")
    bundle = source.bundle
    if bundle is not None:
        bundle.record_file(ONNX_NAME)
        bundle.card["tuning"] = {
            **spec.to_dict(),
            "report": "reports/tune.json",
            "tuned_at": report.get("created_at") if report else now_iso(),
        }
        bundle.save_card()


def keep_artifact(source: BenchSource, artifact: Path) -> str:
    """Copy an accelerator's file (its library, lleaves' model text) into
    ``BUNDLE/accelerators/`` and record its hash; returns its name in the bundle."""
    bundle = source.bundle
    if bundle is None:  # pragma: no cover - callers pass bundles only
        raise OnnxModelError("accelerators are kept in bundles only")
    name = f"accelerators/{artifact.name}"
    target = bundle.path / name
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        with atomic_write_path(target) as tmp:
            shutil.copyfile(artifact, tmp)
    except OSError as exc:
        raise OSError(
            exc.errno, f"cannot keep the accelerator: {first_line(exc)}", str(target)
        ) from exc
    bundle.record_file(name)
    return name
