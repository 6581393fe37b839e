"""Helpers shared by the reliability suite's model-file tests (tests/reliability/test_gadgets*):
a real CLI subprocess, a snapshot of a folder's files, and a bundle whose model.skops is
replaced by another file with a card that matches it (as an attacker who can write a bundle
would make it)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from onnxbridge import Bundle


def cli(*args: object) -> subprocess.CompletedProcess[str]:
    """``onnxbridge ARGS...`` in a subprocess of this interpreter (so nothing in the file runs
    inside the test process), with the test's import path."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run(
        [sys.executable, "-m", "onnxbridge._cli.main", *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def snapshot(folder: Path) -> dict[str, str]:
    """Every path below ``folder`` with the sha256 of its bytes (``"dir"`` for folders)."""
    return {
        str(p.relative_to(folder)): (
            hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
        )
        for p in sorted(folder.rglob("*"))
    }


def bundle_with(bundle: Bundle, model_file: Path, out: Path) -> Path:
    """A copy of ``bundle`` whose model.skops is ``model_file`` and whose card.json matches."""
    shutil.copytree(bundle.path, out)
    shutil.copyfile(model_file, out / "model.skops")
    card_path = out / "card.json"
    card = json.loads(card_path.read_text())
    card["files"]["model.skops"] = hashlib.sha256(model_file.read_bytes()).hexdigest()
    card_path.write_text(json.dumps(card, indent=2))
    return out
