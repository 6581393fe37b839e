"""Layering: data flows top to bottom, never back up (the layers of the package, each one job).

Every ``import onnxbridge.X`` in a module, including imports inside functions, must name a module
of the same or a lower layer.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "onnxbridge"

# Lowest first. train sits above data (it loads datasets); bundle above train (it trains into a
# bundle); runtime above convert (it reads the metadata convert writes); score above runtime
# (it feeds Predictor), beside validate and bench; engines (optional compiled engines) beside
# them too: they are checked with validate's probes and used by score; coverage above validate
# (it trains, converts, runs and compares every estimator).
LAYERS = [
    {"errors"},
    {"_files", "_html", "_onnxfile", "_values"},
    {"data"},
    {"_meta"},
    {"train", "_labels"},
    {"bundle"},
    {"convert"},
    {"runtime", "_inspection"},
    {"validate", "bench", "_score", "serve", "engines"},
    {"tune"},
    {"coverage"},
    {"_cli"},
    {"__init__"},
]


def _layer(module: str) -> int:
    head = module.split(".")[0]
    for index, names in enumerate(LAYERS):
        if head in names:
            return index
    raise AssertionError(f"module onnxbridge.{module} is in no layer; add it to LAYERS")


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _own_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE).with_suffix("")
    return ".".join(rel.parts)


def _imports(path: Path) -> list[str]:
    """The onnxbridge modules ``path`` imports (``__init__`` for the package itself)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for name in names:
            if name == "onnxbridge":
                name = "onnxbridge.__init__"
            if name.startswith("onnxbridge."):
                found.append(name[len("onnxbridge.") :])
    return found


def _package_imports(package: str) -> dict[str, list[str]]:
    """Every module of ``package`` → the top-level onnxbridge modules it imports."""
    return {
        _own_name(path): sorted({target.split(".")[0] for target in _imports(path)})
        for path in sorted((PACKAGE / package).rglob("*.py"))
    }


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_only_go_down(path: Path) -> None:
    own = _layer(_own_name(path))
    for target in _imports(path):
        assert _layer(target) <= own, (
            f"{_own_name(path)} (layer {own}) imports onnxbridge.{target} (layer {_layer(target)})"
        )


def test_layers_cover_the_package() -> None:
    for path in _modules():
        _layer(_own_name(path))


def test_runtime_imports_nothing_above_its_contract() -> None:
    """runtime needs an .onnx file and the metadata contract (_meta), nothing of how models are
    made, measured, tuned or compiled."""
    forbidden = {"convert", "bundle", "bench", "validate", "coverage", "train", "tune", "engines"}
    modules = _package_imports("runtime")
    assert modules  # the package is there and was read
    bad = {module: sorted(set(heads) & forbidden) for module, heads in modules.items()}
    assert {module: heads for module, heads in bad.items() if heads} == {}


def test_serve_imports_no_compiled_engine() -> None:
    """A server never loads native code: serve imports nothing from engines."""
    modules = _package_imports("serve")
    assert modules
    assert {module: heads for module, heads in modules.items() if "engines" in heads} == {}
