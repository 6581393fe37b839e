"""The public surface: a sorted, honest ``__all__`` and one exception tree."""

from __future__ import annotations

import inspect

import pytest

import onnxbridge
import onnxbridge.errors as errors


def test_all_is_sorted_and_resolves() -> None:
    names = onnxbridge.__all__
    assert names == sorted(names)
    assert len(names) == len(set(names))
    for name in names:
        assert hasattr(onnxbridge, name), name


def test_all_lists_every_public_name() -> None:
    public = {
        n
        for n, v in vars(onnxbridge).items()
        if not n.startswith("_")
        and not inspect.ismodule(v)
        and n not in {"version"}
        and n != "PackageNotFoundError"
    }
    assert public <= set(onnxbridge.__all__)


def test_every_error_descends_from_the_base_and_a_builtin() -> None:
    classes = [getattr(errors, n) for n in errors.__all__]
    assert errors.OnnxbridgeError in classes
    for cls in classes:
        assert issubclass(cls, errors.OnnxbridgeError)
        if cls is not errors.OnnxbridgeError:
            assert issubclass(cls, (ValueError, RuntimeError, TypeError)), cls
    # Every error class is in the tree drawn in the module docstring.
    for cls in classes:
        assert cls.__name__ in errors.__doc__


@pytest.mark.parametrize("name", errors.__all__)
def test_errors_are_exported_at_top_level(name: str) -> None:
    assert getattr(onnxbridge, name) is getattr(errors, name)


def test_runtime_does_not_import_sklearn() -> None:
    import subprocess
    import sys

    code = (
        "import sys, onnxbridge.runtime; "
        "bad = [m for m in sys.modules if m.startswith(('sklearn', 'skl2onnx'))]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
