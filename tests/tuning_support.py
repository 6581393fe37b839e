"""What the tests of bench, tune and tuned sessions share: tiny timings, and tuned settings
written into a model file."""

from __future__ import annotations

from pathlib import Path

import onnx

from onnxbridge.runtime._settings import SESSION_KEY, TuningSpec

# Tiny measurements: these tests check what is reported, not how fast anything is.
FAST = {"repeat": 2, "min_time": 0.002}


def store_spec(path: Path, spec: TuningSpec | str, out: Path | None = None) -> Path:
    """The model at ``path`` with ``spec`` (or raw text, to test bad entries) in its metadata as
    ``onnxbridge tune`` stores it, saved to ``out`` (``path`` itself by default)."""
    model = onnx.load(str(path))
    model.metadata_props.add(
        key=SESSION_KEY, value=spec if isinstance(spec, str) else spec.to_json()
    )
    target = out or path
    onnx.save(model, str(target))
    return target
