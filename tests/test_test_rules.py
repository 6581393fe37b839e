"""Rules every test module keeps: no reads of private attributes, no clocks.

A test that reads ``obj._x`` pins an implementation detail and breaks on every refactoring that
keeps the behaviour; a test that compares durations passes or fails with the machine's load.
Both rules are checked on the source of every file under ``tests/`` with :mod:`ast`.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent

# Clock functions whose calls a test module may not make.
CLOCKS = frozenset(
    {"perf_counter", "perf_counter_ns", "time", "time_ns", "monotonic", "monotonic_ns"}
)

# Helpers that bound how long a test waits for another process or thread (a server to start, a
# child to write a file) with a deadline. They read a clock but never compare durations.
CLOCK_ALLOWED = frozenset(
    {
        "wait_support.py",  # wait_until / wait_for_ready: the deadline of a wait
        "docs_support.py",  # the timeout of a docs page's command and of its server's start-up
    }
)

# Underscore names that are public API of the standard library (namedtuple's methods). Names
# with one underscore at both ends (``_repr_html_``) are public protocols, as IPython's display.
PUBLIC_UNDERSCORE = frozenset({"_replace", "_asdict", "_fields", "_make", "_field_defaults"})

# (test file, attribute) pairs that must read another library's internals, each with the reason.
PRIVATE_ALLOWED = {
    # The test crafts a hostile model file: it changes scikit-learn's own node array, which
    # only exists as a private attribute, to check that loading the file refuses it.
    ("test_gadgets_damaged_trees.py", "_predictors"),
}


def _root_name(node: ast.expr) -> str | None:
    """The name an attribute chain starts from (``a`` for ``a.b.c``), if it starts from one."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _attribute_read(node: ast.AST) -> tuple[ast.expr | None, str | None]:
    """The object and attribute name a node reads: ``x.name`` or ``getattr(x, "name"[, d])``."""
    if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
        return node.value, node.attr
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "getattr"
        and len(node.args) >= 2
        and isinstance(node.args[1], ast.Constant)
        and isinstance(node.args[1].value, str)
    ):
        return node.args[0], node.args[1].value
    return None, None


def private_reads(source: str) -> list[tuple[int, str]]:
    """Lines and text of attribute reads ``x._name`` (or ``getattr(x, "_name")``) on anything but
    ``self``/``cls`` or the ``onnxbridge`` package's own modules, dunders and
    :data:`PUBLIC_UNDERSCORE` excepted."""
    found = []
    for node in ast.walk(ast.parse(source)):
        owner, name = _attribute_read(node)
        if owner is None or name is None:
            continue
        if not name.startswith("_") or name.startswith("__") or name in PUBLIC_UNDERSCORE:
            continue
        if name.endswith("_") and len(name) > 2:
            continue  # a protocol such as _repr_html_
        if isinstance(owner, ast.Name) and owner.id in {"self", "cls"}:
            continue
        if _root_name(owner) == "onnxbridge":
            continue  # a module of the package, e.g. onnxbridge._meta.ORT_TO_NUMPY
        found.append((node.lineno, ast.unparse(node)))
    return sorted(found)


def clock_calls(source: str) -> list[tuple[int, str]]:
    """Lines and text of calls of ``time.perf_counter``, ``time.time``, ``time.monotonic`` (and
    their ``_ns`` forms), however imported."""
    tree = ast.parse(source)
    modules = {"time"}
    direct: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {a.asname or a.name for a in node.names if a.name == "time"}
        elif isinstance(node, ast.ImportFrom) and node.module == "time":
            direct |= {a.asname or a.name for a in node.names if a.name in CLOCKS}
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        module_clock = (
            isinstance(func, ast.Attribute)
            and func.attr in CLOCKS
            and isinstance(func.value, ast.Name)
            and func.value.id in modules
        )
        if module_clock or (isinstance(func, ast.Name) and func.id in direct):
            found.append((node.lineno, ast.unparse(node)))
    return sorted(found)


def _test_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py") if "__pycache__" not in p.parts)


def _report(check, files: list[Path]) -> list[str]:
    lines = []
    for path in files:
        for lineno, text in check(path.read_text(encoding="utf-8")):
            lines.append(f"{path.relative_to(TESTS.parent)}:{lineno}: {text}")
    return lines


def test_no_test_reads_a_private_attribute() -> None:
    found = [
        line
        for line in _report(private_reads, _test_files())
        if not any(f"{name}:" in line and f".{attr}" in line for name, attr in PRIVATE_ALLOWED)
    ]
    assert not found, "private attributes read in tests:\n" + "\n".join(found)


def test_no_test_reads_a_clock() -> None:
    files = [p for p in _test_files() if p.name not in CLOCK_ALLOWED]
    found = _report(clock_calls, files)
    assert not found, "clocks read in tests (assert behaviour, not time):\n" + "\n".join(found)


def test_every_clock_allowed_file_exists() -> None:
    names = {p.name for p in _test_files()}
    assert CLOCK_ALLOWED <= names, CLOCK_ALLOWED - names


@pytest.mark.parametrize(
    ("source", "found"),
    [
        ("predictor._sessions", [(1, "predictor._sessions")]),
        ("len(a.b._cache[0])", [(1, "a.b._cache")]),
        ("obj.__class__.__name__", []),
        ("self._x + cls._y", []),
        ("onnxbridge._meta.ORT_TO_NUMPY", []),
        ("from onnxbridge._meta import ORT_TO_NUMPY", []),
        ("row._replace(a=1)._asdict()", []),
        ("report._repr_html_()", []),
        ("obj._x = 1", []),  # a write, not a read
        ("x = 1\ny = model._fct", [(2, "model._fct")]),
        ("getattr(predictor, '_sessions', None)", [(1, "getattr(predictor, '_sessions', None)")]),
        ("getattr(self, '_x')", []),
        ("getattr(obj, 'public')", []),
    ],
)
def test_private_reads_finds_what_it_should(source: str, found: list) -> None:
    assert private_reads(source) == found


@pytest.mark.parametrize(
    ("source", "found"),
    [
        ("import time\nt = time.perf_counter()", [(2, "time.perf_counter()")]),
        ("import time as clock\nclock.monotonic()", [(2, "clock.monotonic()")]),
        ("from time import perf_counter as pc\npc()", [(2, "pc()")]),
        ("time.time_ns()", [(1, "time.time_ns()")]),
        ("import time\ntime.sleep(0.1)", []),
        ("start = 0.0\nelapsed = 1.0 - start", []),
        ("frame.time()", []),
    ],
)
def test_clock_calls_finds_what_it_should(source: str, found: list) -> None:
    assert clock_calls(source) == found
