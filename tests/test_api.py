"""The public surface: a small, sorted, honest ``__all__``, one exception tree, a cheap import."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from importlib.resources import files
from pathlib import Path

import pytest

import onnxbridge
import onnxbridge.errors as errors
from cli_support import HEAVY


def fresh_env() -> dict[str, str]:
    """The environment of a fresh interpreter that imports the onnxbridge under test."""
    src = str(Path(onnxbridge.__file__).parents[1])
    return {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}


def loaded_after(code: str) -> list[str]:
    """The HEAVY modules loaded once ``code`` has run in a fresh interpreter."""
    probe = (
        f"{code}\nimport sys\n"
        f"heavy = {HEAVY!r}\n"
        "print(sorted({h for h in heavy for m in sys.modules if m == h or m.startswith(h + '.')}))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=fresh_env(), check=True
    )
    return eval(proc.stdout.strip().splitlines()[-1])  # a list literal printed just above


def test_all_is_small_sorted_and_resolves() -> None:
    names = onnxbridge.__all__
    assert len(names) <= 40
    assert names == sorted(names)
    assert len(names) == len(set(names))
    for name in names:
        assert getattr(onnxbridge, name) is not None, name


def test_dir_lists_the_public_names() -> None:
    assert set(onnxbridge.__all__) <= set(dir(onnxbridge))
    assert "__version__" in dir(onnxbridge)


def test_top_level_names_are_the_objects_of_their_modules() -> None:
    import onnxbridge.bundle
    import onnxbridge.runtime
    import onnxbridge.validate

    assert onnxbridge.Predictor is onnxbridge.runtime.Predictor
    assert onnxbridge.train_bundle is onnxbridge.bundle.train_bundle
    assert onnxbridge.ValidationReport is onnxbridge.validate.ValidationReport
    for name in onnxbridge.__all__:
        value = getattr(onnxbridge, name)
        home = sys.modules[value.__module__]
        assert getattr(home, name) is value, name


def test_all_lists_every_public_name() -> None:
    # Resolve every name first, so that the module's namespace holds them all.
    for name in onnxbridge.__all__:
        getattr(onnxbridge, name)
    public = {
        n
        for n, v in vars(onnxbridge).items()
        if not n.startswith("_")
        and (inspect.isclass(v) or inspect.isfunction(v))
        and v.__module__.startswith("onnxbridge")
    }
    assert public <= set(onnxbridge.__all__)


def test_version_is_the_installed_version() -> None:
    from importlib.metadata import version

    assert onnxbridge.__version__ == version("onnxbridge")


@pytest.mark.parametrize(
    ("name", "home"),
    [
        ("Timing", "onnxbridge.bench"),
        ("read_table", "onnxbridge.data"),
        ("ServeSettingsError", "onnxbridge.errors"),
        ("register_converter", "onnxbridge.convert"),
    ],
)
def test_names_outside_the_api_say_where_they_live(name: str, home: str) -> None:
    with pytest.raises(AttributeError, match=f"from {home} import {name}") as caught:
        getattr(onnxbridge, name)
    statement = str(caught.value).split("`")[1]
    namespace: dict[str, object] = {}
    exec(statement, namespace)  # the advice works
    assert namespace[name] is getattr(sys.modules[home], name)


def test_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="has no attribute 'no_such_thing'"):
        onnxbridge.no_such_thing  # noqa: B018
    assert not hasattr(onnxbridge, "no_such_thing")


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


def test_top_level_errors_are_those_of_the_tree() -> None:
    exported = [n for n in onnxbridge.__all__ if n.endswith("Error")]
    assert "OnnxbridgeError" in exported
    for name in exported:
        assert getattr(onnxbridge, name) is getattr(errors, name)
    # The server's own errors stay in onnxbridge.errors, under the same base.
    assert "ServeSettingsError" not in exported
    assert issubclass(errors.ServeSettingsError, onnxbridge.OnnxbridgeError)


def test_import_onnxbridge_loads_no_heavy_library() -> None:
    assert loaded_after("import onnxbridge; onnxbridge.DataError; onnxbridge.__all__") == []


def test_first_use_of_a_name_imports_its_module() -> None:
    loaded = loaded_after("import onnxbridge; onnxbridge.Predictor")
    assert "onnxbridge.runtime" in loaded
    assert "onnxbridge.bench" not in loaded


@pytest.mark.parametrize(
    "code",
    [
        "import onnxbridge._score.core, onnxbridge",  # the package first
        "import onnxbridge; onnxbridge.score; import onnxbridge._score.core",  # the function first
    ],
)
def test_score_is_the_function_whatever_was_imported_first(code: str) -> None:
    probe = f"{code}; from onnxbridge import score; print(score.__name__, callable(score))"
    proc = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=fresh_env()
    )
    assert proc.stdout.split() == ["score", "True"], proc.stderr


def test_runtime_does_not_import_sklearn() -> None:
    code = (
        "import sys, onnxbridge.runtime; "
        "bad = [m for m in sys.modules if m.startswith(('sklearn', 'skl2onnx'))]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_package_is_marked_typed() -> None:
    assert files("onnxbridge").joinpath("py.typed").is_file()


def test_every_module_without_a_leading_underscore_is_documented() -> None:
    """Internals sit in ``_``-prefixed modules; a public module is one docs/python-api.md names."""
    package = Path(onnxbridge.__file__).parent
    public = set()
    for path in package.rglob("*.py"):
        parts = path.relative_to(package).with_suffix("").parts
        if any(p.startswith("_") and not p.startswith("__") for p in parts):
            continue
        name = ".".join(("onnxbridge", *parts)).removesuffix(".__init__")
        if name != "onnxbridge":
            public.add(name)
    page = (Path(__file__).resolve().parents[1] / "docs" / "python-api.md").read_text()
    documented = {name for name in public if f"| `{name}` |" in page}
    assert public == documented, "public modules missing from python-api.md"
    assert {"onnxbridge.runtime", "onnxbridge.convert", "onnxbridge.bundle"} <= public
