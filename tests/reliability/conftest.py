"""The reliability suite: attacks and faults a hostile or careless user can cause.

Each test asserts its goal (no 5xx, nothing touched, output identical after a kill, ...) and
records the figures it measured with the ``figures`` fixture. With ``ONNXBRIDGE_RELIABILITY_JSON``
set to a path, the figures of the run are written there as JSON when the session ends; that file
is what docs/reliability.md reports.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

_FIGURES: dict[str, dict[str, int | float | str]] = {}


@pytest.fixture
def figures() -> Callable[[str, str, int | float | str], None]:
    """``figures(area, name, value)`` adds ``value`` to a counter (numbers) or sets it (text)."""

    def record(area: str, name: str, value: int | float | str) -> None:
        entry = _FIGURES.setdefault(area, {})
        if isinstance(value, str):
            entry[name] = value
        else:
            entry[name] = entry.get(name, 0) + value  # type: ignore[operator]

    return record


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    target = os.environ.get("ONNXBRIDGE_RELIABILITY_JSON")
    if target and _FIGURES:
        Path(target).write_text(json.dumps(_FIGURES, indent=2, sort_keys=True) + "\n")
