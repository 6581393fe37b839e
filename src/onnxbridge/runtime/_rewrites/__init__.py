"""Graph rewrites: passes that give ONNX Runtime a faster graph with the same results.

Each pass lives in its own module and is a :class:`Rewrite`: a name, a cheap ``applies_to``
test and ``rewrite(model) -> bytes | None`` (None: nothing in this model to change). The passes
only make large calls faster, so one that fails must never stop a prediction:
:func:`apply_rewrite` logs the failure with its reason on the ``onnxbridge.runtime`` logger
(warning level) and the graph runs as it is. The ``.onnx`` file is never changed.

- :mod:`~onnxbridge.runtime._rewrites.tree_blocks`: large tree ensembles as blocks of trees
  (:attr:`SessionSettings.tree_block_nodes <onnxbridge.runtime._settings.SessionSettings>`);
- :mod:`~onnxbridge.runtime._rewrites.linear_dot`: one-column linear operators as a dot product
  per row (:attr:`SessionSettings.linear_gemv <onnxbridge.runtime._settings.SessionSettings>`).

Each pass's test proves it equivalent: the rewritten model's outputs equal the original's.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from onnxbridge.errors import first_line

if TYPE_CHECKING:
    from onnxbridge.runtime._settings import SessionSettings

__all__ = [
    "Rewrite",
    "apply_rewrite",
    "apply_rewrites",
    "blocked_model",
    "linear_model",
    "passes_for",
]

logger = logging.getLogger("onnxbridge.runtime")


@dataclass(frozen=True)
class Rewrite:
    """One graph pass.

    Attributes:
        name: names the pass in logs (and keys its cache, so it includes its parameters).
        applies_to: a cheap test on the serialized model; False skips the pass.
        rewrite: the rewritten model's bytes, or None when nothing in the model qualifies.
    """

    name: str
    applies_to: Callable[[bytes], bool]
    rewrite: Callable[[bytes], bytes | None]


# Rewritten models by (source, pass): tune and a Predictor's regimes open the same rewrite
# several times, and rewriting a large forest takes a noticeable time.
_CACHE: dict[tuple[int, int, str], bytes | None] = {}
_CACHE_KEEP = 4
_CACHE_LOCK = threading.Lock()


def apply_rewrite(model: bytes, rewrite: Rewrite) -> bytes | None:
    """``rewrite`` applied to ``model`` (cached), or None when it changes nothing or fails.

    A failure is logged once per model and pass, naming the pass and the first line of the
    error; the caller then runs the graph as it is.
    """
    key = (len(model), hash(model), rewrite.name)
    with _CACHE_LOCK:
        if key in _CACHE:
            return _CACHE[key]
    result = None
    if rewrite.applies_to(model):
        try:
            result = rewrite.rewrite(model)
        except Exception as exc:  # any failure of a pass: logged, the graph runs as it is
            logger.warning(
                "graph rewrite %s failed, running the graph as it is: %s",
                rewrite.name,
                first_line(exc),
            )
    with _CACHE_LOCK:
        if len(_CACHE) >= _CACHE_KEEP:
            _CACHE.pop(next(iter(_CACHE)))
        _CACHE[key] = result
    return result


def blocked_model(model: bytes, max_nodes: int) -> bytes | None:
    """``model`` with its large tree ensembles in blocks (cached), or None if nothing changes."""
    from onnxbridge.runtime._rewrites.tree_blocks import tree_blocks

    return apply_rewrite(model, tree_blocks(max_nodes))


def linear_model(model: bytes) -> bytes | None:
    """``model`` with its one-column linear operators as dot products (cached), or None if
    nothing changes."""
    from onnxbridge.runtime._rewrites.linear_dot import LINEAR_DOT

    return apply_rewrite(model, LINEAR_DOT)


def passes_for(settings: SessionSettings) -> list[Rewrite]:
    """The passes ``settings`` asks for, in the order they apply."""
    from onnxbridge.runtime._rewrites.linear_dot import LINEAR_DOT
    from onnxbridge.runtime._rewrites.tree_blocks import tree_blocks

    passes = [tree_blocks(settings.tree_block_nodes)] if settings.tree_block_nodes else []
    return passes + ([LINEAR_DOT] if settings.linear_gemv else [])


def apply_rewrites(model: bytes, settings: SessionSettings) -> tuple[SessionSettings, bytes | None]:
    """``model`` as ``settings`` runs it — trees in blocks, then linear operators as dot
    products, as asked — and ``settings`` without the rewrites that change nothing in it (the
    same graph runs either way, so one session serves both). The bytes are None when no pass
    changes anything."""
    result = None
    if settings.tree_block_nodes:
        result = blocked_model(model, settings.tree_block_nodes)
        if result is None:
            settings = replace(settings, tree_block_nodes=0)
    if settings.linear_gemv:
        linear = linear_model(result if result is not None else model)
        if linear is None:
            settings = replace(settings, linear_gemv=False)
        else:
            result = linear
    return settings, result
