"""tune reads in one sitting: no function in onnxbridge.tune is longer than 80 lines."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

TUNE = Path(__file__).resolve().parents[2] / "src" / "onnxbridge" / "tune"
MAX_LINES = 80


@pytest.mark.parametrize("path", sorted(TUNE.glob("*.py")), ids=lambda p: p.name)
def test_no_function_is_longer_than_80_lines(path: Path) -> None:
    functions = [
        node
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    ]
    long = {f.name: f.end_lineno - f.lineno + 1 for f in functions}  # type: ignore[operator]
    assert {name: n for name, n in long.items() if n > MAX_LINES} == {}


def test_the_check_sees_every_module() -> None:
    names = {p.stem for p in TUNE.glob("*.py")}
    assert {"_candidates", "_search", "_boundary", "_store", "_engines", "_report"} <= names
