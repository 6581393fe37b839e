"""Helpers the CLI tests of every command share: run the CLI in-process, check a one-line error."""

from __future__ import annotations

import re

import pytest

from onnxbridge._cli.main import main

# The commands, in the order `onnxbridge --help` lists them.
COMMANDS = (
    "train",
    "convert",
    "inspect",
    "predict",
    "validate",
    "score",
    "demo",
    "bench",
    "tune",
    "serve",
    "coverage",
)
# Libraries (and onnxbridge parts) that `import onnxbridge` and `onnxbridge --help` must not
# load up front.
HEAVY = (
    "numpy",
    "pandas",
    "onnx",
    "onnxruntime",
    "skl2onnx",
    "sklearn",
    "matplotlib",
    "onnxbridge.bench",
    "onnxbridge.coverage",
    "onnxbridge.runtime",
)


def run(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, str, str]:
    """Run ``onnxbridge ARGS``; returns (exit code, stdout, stderr)."""
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(code: int, err: str, pattern: str) -> None:
    """Exit 2 with one ``error: ...`` line matching ``pattern``, and no traceback."""
    assert code == 2, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("error: ")
    assert re.search(pattern, lines[0]), lines[0]
    assert "Traceback" not in err
