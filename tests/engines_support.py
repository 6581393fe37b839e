"""A helper the tests of compiled engines share: record an engine in a bundle as ``tune`` does."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from onnxbridge import Bundle
from onnxbridge.bundle import ONNX_NAME
from onnxbridge.runtime._settings import SessionSettings, TuningSpec
from tuning_support import store_spec


def record_engine(bundle: Bundle, record: dict[str, Any], *files: Path) -> dict[str, Any]:
    """Copy ``files`` (a library, lleaves' model text) into ``BUNDLE/accelerators/`` with their
    hashes in the card, and store ``record`` (with ``library`` and ``model_text`` set to them) as
    the model's recorded accelerator, in its metadata and in the card, as ``tune`` does."""
    names = []
    for file in files:
        name = f"accelerators/{file.name}"
        target = bundle.path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(file, target)
        bundle.record_file(name)
        names.append(name)
    record = {**record, "library": names[0]}
    if len(names) > 1:
        record["model_text"] = names[1]
    default = SessionSettings.onnxbridge_default()
    spec = TuningSpec(latency=default, throughput=default, accelerator=record)
    store_spec(bundle.onnx_path, spec)
    bundle.record_file(ONNX_NAME)
    bundle.card["tuning"] = spec.to_dict()
    bundle.save_card()
    return record
