"""onnxbridge's own converter registry, on top of skl2onnx's.

One file per estimator family under ``onnxbridge/convert/_converters/`` builds a
:class:`ConverterSpec` and ends with ``register_converter(spec)``; ``converters/__init__.py``
imports them all (an explicit list, as skl2onnx's ``operator_converters`` does).
:func:`load_converters` imports that package once and installs every spec into skl2onnx, so our
converters also work inside pipelines, column transformers and meta-estimators that skl2onnx
converts.

A spec either adds a converter skl2onnx lacks (``replaces=None``) or replaces one that is broken
(``replaces="why the upstream converter is wrong"``); replacing without saying why is refused, and
so is registering the same estimator twice. Every spec carries an ``example`` that builds a small
fitted instance and its data: the common test (``tests/convert/test_registry_common.py``) runs
the same battery of checks over every registered converter.

The converter functions follow skl2onnx's protocol: ``shape_calculator(operator)`` sets the output
types, ``converter(scope, operator, container)`` adds the nodes.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from onnxbridge.errors import ConverterRegistryError, MissingConverterError

__all__ = [
    "ConverterSpec",
    "accepts_option",
    "default_options",
    "find_converter",
    "get_converter",
    "load_converters",
    "register_converter",
    "register_default_options",
    "registered_converters",
    "tree_default_options",
    "upstream_converters",
]

# (fitted estimator, X) where X is a DataFrame or 2-D array the estimator takes.
ExampleFactory = Callable[[], tuple[Any, Any]]


@dataclass(frozen=True)
class ConverterSpec:
    """One converter registered by onnxbridge.

    Attributes:
        estimator: the estimator class converted.
        shape_calculator: ``f(operator)``: sets the types and shapes of the operator's outputs.
        converter: ``f(scope, operator, container)``: adds the ONNX nodes.
        family: the module that registered it (set by :func:`register_converter` if empty).
        example: builds ``(fitted estimator, X)`` for the common converter test.
        replaces: why the upstream (skl2onnx / onnxmltools) converter is replaced, or None when
            there was none.
        parser: a custom skl2onnx parser (estimators whose outputs are not the usual ones).
        options: the converter's options and their allowed values (skl2onnx checks user options
            against them); classifiers declare ``zipmap``.
        alias: the operator name in skl2onnx's tables; ``Onnxbridge<ClassName>`` by default.
    """

    estimator: type
    shape_calculator: Callable[[Any], None]
    converter: Callable[[Any, Any, Any], None]
    example: ExampleFactory
    family: str = ""
    replaces: str | None = None
    parser: Callable[..., Any] | None = None
    options: Mapping[str, Sequence[Any]] | None = None
    alias: str = field(default="")

    @property
    def name(self) -> str:
        """The estimator's class name."""
        return self.estimator.__name__

    @property
    def operator_alias(self) -> str:
        """The alias skl2onnx knows the converter by."""
        return self.alias or f"Onnxbridge{self.estimator.__name__}"


_REGISTRY: dict[type, ConverterSpec] = {}
# skl2onnx options onnxbridge passes for every instance of a class, wherever it sits in a model.
_DEFAULT_OPTIONS: dict[type, dict[str, Any]] = {}
_INSTALLED: set[type] = set()
# What skl2onnx had for an estimator before ours was installed: (alias or None, parser or None).
_UPSTREAM: dict[type, tuple[str | None, Any]] = {}
_LOADED = False


def _check_arity(function: Callable[..., Any], expected: int, what: str, owner: str) -> None:
    try:
        params = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):  # builtins without a signature: trust them
        return
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    if not len(required) <= expected <= len(positional):
        raise ConverterRegistryError(
            f"{what} of the converter for {owner} takes {len(positional)} positional arguments; "
            f"skl2onnx calls it with {expected}"
        )


def _upstream_has_converter(estimator: type) -> bool:
    from skl2onnx._supported_operators import sklearn_operator_name_map

    alias = sklearn_operator_name_map.get(estimator)
    return alias is not None and not str(alias).startswith("Onnxbridge")


def register_converter(spec: ConverterSpec) -> ConverterSpec:
    """Add a converter to the registry (installed into skl2onnx by :func:`load_converters`).

    Raises:
        ConverterRegistryError: the estimator is registered already, the functions do not take
            the arguments skl2onnx passes, or an upstream converter would be replaced without a
            reason.
    """
    if not isinstance(spec.estimator, type):
        raise ConverterRegistryError(
            f"ConverterSpec.estimator must be a class, got {spec.estimator!r}"
        )
    if spec.estimator in _REGISTRY:
        raise ConverterRegistryError(
            f"a converter for {spec.name} is registered already (by "
            f"{_REGISTRY[spec.estimator].family}); remove one of them"
        )
    _check_arity(spec.shape_calculator, 1, "the shape calculator", spec.name)
    _check_arity(spec.converter, 3, "the converter function", spec.name)
    if spec.replaces is None and _upstream_has_converter(spec.estimator):
        raise ConverterRegistryError(
            f"skl2onnx already converts {spec.name}; set ConverterSpec.replaces to the reason "
            "its converter is replaced"
        )
    if not spec.family:
        # sys._getframe, not inspect.stack(): the latter reads source files (0.1 s per call).
        caller = sys._getframe(1).f_globals.get("__name__", "?")
        spec = ConverterSpec(**{**spec.__dict__, "family": caller})
    _REGISTRY[spec.estimator] = spec
    if _LOADED:
        _install(spec)
    return spec


def register_default_options(estimator: type, options: Mapping[str, Any]) -> None:
    """Pass these skl2onnx options for every instance of ``estimator`` (and its subclasses).

    For settings skl2onnx leaves at a default that does not work everywhere (text vectorizers
    need ``locale='C'`` where ``en_US.UTF-8`` is missing). Options the user gives win.

    Raises:
        ConverterRegistryError: ``estimator`` is not a class, or an option is set twice to
            different values.
    """
    if not isinstance(estimator, type):
        raise ConverterRegistryError(f"register_default_options takes a class, got {estimator!r}")
    current = _DEFAULT_OPTIONS.setdefault(estimator, {})
    for key, value in options.items():
        if key in current and current[key] != value:
            raise ConverterRegistryError(
                f"default option {key!r} of {estimator.__name__} is {current[key]!r} already; "
                f"refusing to change it to {value!r}"
            )
        current[key] = value


def default_options(estimator: Any) -> dict[str, Any]:
    """The default skl2onnx options for an estimator (instance or class); ``{}`` if none."""
    load_converters()
    cls = estimator if isinstance(estimator, type) else type(estimator)
    found: dict[str, Any] = {}
    # Base classes first, so a subclass's own defaults win.
    for base in reversed(cls.__mro__):
        found.update(_DEFAULT_OPTIONS.get(base, {}))
    return found


def _children(estimator: Any) -> list[Any]:
    """Estimators held by an estimator: steps, transformers, sub-estimators (fitted or not)."""
    from sklearn.base import BaseEstimator

    found: list[Any] = []

    def visit(value: Any) -> None:
        if isinstance(value, BaseEstimator):
            found.append(value)
        elif isinstance(value, list | tuple):
            for item in value:
                visit(item)
        elif isinstance(value, dict):
            for item in value.values():
                visit(item)

    for value in vars(estimator).values():
        visit(value)
    return found


def tree_default_options(estimator: Any) -> dict[int, dict[str, Any]]:
    """skl2onnx's ``options`` argument (``id(estimator) -> options``) for every estimator in a
    model that has default options: the model itself, pipeline steps, column transformers'
    parts, meta-estimators' sub-estimators."""
    options: dict[int, dict[str, Any]] = {}
    seen: set[int] = set()
    pending = [estimator]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        found = default_options(current)
        if found:
            options[id(current)] = dict(found)
        pending.extend(_children(current))
    return options


def accepts_option(estimator: Any, option: str) -> bool:
    """Whether the skl2onnx converter of an estimator declares ``option`` (True when there is no
    converter, so that the missing converter is what gets reported)."""
    from skl2onnx._supported_operators import sklearn_operator_name_map
    from skl2onnx.common._registration import _converter_pool

    load_converters()
    alias = sklearn_operator_name_map.get(type(estimator))
    converter = _converter_pool.get(alias) if alias is not None else None
    if converter is None or not hasattr(converter, "get_allowed_options"):
        return True
    allowed = converter.get_allowed_options()
    # None: the converter takes no options at all (skl2onnx then refuses any).
    return allowed == "passthrough" or (allowed is not None and option in allowed)


def _install(spec: ConverterSpec) -> None:
    if spec.estimator in _INSTALLED:
        return
    from skl2onnx import update_registered_converter
    from skl2onnx._parse import sklearn_parsers_map
    from skl2onnx._supported_operators import sklearn_operator_name_map

    _UPSTREAM[spec.estimator] = (
        sklearn_operator_name_map.get(spec.estimator),
        sklearn_parsers_map.get(spec.estimator),
    )
    update_registered_converter(
        spec.estimator,
        spec.operator_alias,
        spec.shape_calculator,
        spec.converter,
        overwrite=True,
        parser=spec.parser,
        options=dict(spec.options) if spec.options is not None else None,
    )
    _INSTALLED.add(spec.estimator)


def load_converters() -> None:
    """Import every converter module once and install the specs into skl2onnx."""
    global _LOADED
    if _LOADED:
        return
    importlib.import_module("onnxbridge.convert._converters")
    _LOADED = True
    for spec in list(_REGISTRY.values()):
        _install(spec)


@contextlib.contextmanager
def upstream_converters() -> Iterator[None]:
    """Within the block, skl2onnx converts with its own converters only.

    onnxbridge installs its converters into skl2onnx's registry, so once onnxbridge has converted
    anything in a process, a plain ``skl2onnx.convert_sklearn`` call uses them too. Use this to
    get skl2onnx's own behaviour (e.g. to compare with it).
    """
    from skl2onnx._parse import sklearn_parsers_map
    from skl2onnx._supported_operators import sklearn_operator_name_map

    saved = {
        cls: (sklearn_operator_name_map.get(cls), sklearn_parsers_map.get(cls)) for cls in _UPSTREAM
    }
    try:
        for cls, (alias, parser) in _UPSTREAM.items():
            _set_entries(cls, alias, parser)
        yield
    finally:
        for cls, (alias, parser) in saved.items():
            _set_entries(cls, alias, parser)


def _set_entries(cls: type, alias: str | None, parser: Any) -> None:
    """Point skl2onnx's tables for ``cls`` at ``alias`` and ``parser`` (None: no entry)."""
    from skl2onnx._parse import sklearn_parsers_map
    from skl2onnx._supported_operators import sklearn_operator_name_map

    for table, value in ((sklearn_operator_name_map, alias), (sklearn_parsers_map, parser)):
        if value is None:
            table.pop(cls, None)
        else:
            table[cls] = value


def registered_converters() -> list[ConverterSpec]:
    """Every registered converter, sorted by estimator name."""
    load_converters()
    return sorted(_REGISTRY.values(), key=lambda s: (s.name, s.estimator.__module__))


def find_converter(estimator: type | Any) -> ConverterSpec | None:
    """The onnxbridge converter for an estimator (class or instance), or None."""
    load_converters()
    cls = estimator if isinstance(estimator, type) else type(estimator)
    return _REGISTRY.get(cls)


def get_converter(estimator: type | Any) -> ConverterSpec:
    """Like :func:`find_converter`, but raises.

    Raises:
        MissingConverterError: onnxbridge registers no converter for it.
    """
    spec = find_converter(estimator)
    if spec is None:
        cls = estimator if isinstance(estimator, type) else type(estimator)
        raise MissingConverterError(
            f"onnxbridge registers no converter of its own for {cls.__name__}; skl2onnx's is "
            "used if it has one (add one in onnxbridge/convert/_converters/)"
        )
    return spec
