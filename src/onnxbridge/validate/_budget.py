"""Bounded memory and a time budget for scoring probe sets.

**Memory.** Each runtime scores a probe set in batches of rows, so that the intermediate
results of one batch stay under a memory bound (:data:`DEFAULT_MEMORY_BOUND`, 512 MiB). What a
row costs is read from the ONNX graph itself, so it holds for any model: a model that compares
each row with many stored rows — neighbours (the training rows), support vector machines (the
support vectors), kernel ridge, Gaussian processes — holds them as a constant of the graph
(an initializer, a ``Constant`` node or an operator's attribute), and its intermediates grow as
rows × stored rows. The *width* of a graph is the row count of its largest floating-point
constant that meets the rows — an input of ``MatMul``, ``Gemm``, ``Sub``, ``Add``, ``Mul``,
``Div`` or ``Pow``, the data of a ``Gather`` (through casts and reshapes; ``Scan`` and
``Loop`` bodies included), or an ``ai.onnx.ml`` SVM's support vectors — read as rows of the
model's ``F`` input columns (its number of values // ``F``). A tree ensemble's attributes do
not count: a tree walks one path per row, so a forest's width is ``F`` and it scores in one
batch. A row costs ``8 bytes × width × 4`` (float64 values, a few live copies: differences,
distances, sorted copies). Batches split the rows evenly and their results are
concatenated in order, so they are the rows' results as one call gives them.

**Time.** With a budget of ``B`` seconds, a probe set of more than :data:`MIN_SAMPLE_ROWS`
rows is scored in the order of a permutation of its rows seeded with the report's seed, every
runtime on the same batches. The first :data:`MIN_SAMPLE_ROWS` rows (the minimum sample, never
skipped) are timed: what a row of this set costs on all the runtimes together. When the whole
set would not fit in what is left of the budget, it gets its share — in proportion to its rows
among the sets still to run — and scoring stops when the share is spent: the rows scored are
the first rows of the permutation, a seeded random sample, and every runtime scored them. A
set that starts when the budget is already spent is scored on its minimum sample only. The
``holdout`` set, the headline, runs first and is kept whole when the later sets' minimum
samples still fit after it; otherwise it gets all the budget but their time.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "DEFAULT_BUDGET_S",
    "DEFAULT_MEMORY_BOUND",
    "MIN_SAMPLE_ROWS",
    "Budget",
    "batch_rows",
    "graph_width",
    "next_batch",
    "permutation",
]

DEFAULT_BUDGET_S = 60.0
DEFAULT_MEMORY_BOUND = 512 * 2**20
MIN_SAMPLE_ROWS = 200
_SCORING_SHARE = 0.95
_BYTES_PER_VALUE = 8
_LIVE_COPIES = 4
_FLOAT_TYPES = {1, 10, 11, 16}  # TensorProto FLOAT, FLOAT16, DOUBLE, BFLOAT16


def _tensor_values(tensor: Any) -> int:
    return int(np.prod(tensor.dims)) if len(tensor.dims) else 1


# Operators where a constant meets the rows value by value (broadcasting against them, or
# multiplied with them): their intermediates grow as rows × the constant's rows.
_ROW_OPS = {"MatMul", "Gemm", "Sub", "Add", "Mul", "Div", "Pow"}
# Operators that pick stored rows for each row (their data input): a neighbour search gathers
# the candidates' rows, ``[rows, candidates, F]``.
_GATHER_OPS = {"Gather", "GatherElements", "GatherND"}
# Operators that hand a constant on unchanged but for its type or layout.
_PASS_OPS = {"Cast", "Identity", "Transpose", "Reshape", "Unsqueeze", "Squeeze", "Flatten"}
# ai.onnx.ml operators whose attribute holds stored rows that every row is compared with.
_STORED_ROWS = {"SVMClassifier": "support_vectors", "SVMRegressor": "support_vectors"}


def _constants(graph: Any, known: dict[str, int] | None = None) -> list[int]:
    """Value counts of the floating-point constants that meet the rows, ``graph``'s subgraphs
    (``Scan`` and ``Loop`` bodies) included.

    A constant counts where it is an input of an arithmetic operator (:data:`_ROW_OPS`) or the
    data a ``Gather`` picks rows from, possibly through a cast or a reshape, or the support
    vectors of an ``ai.onnx.ml`` SVM. The attributes
    of tree ensembles (thresholds, leaf values) do not: a tree walks one path per row and builds
    nothing per row and per node.
    """
    from onnx import AttributeProto

    known = dict(known or {})  # a subgraph sees the constants of the graphs around it
    known.update(
        {t.name: _tensor_values(t) for t in graph.initializer if t.data_type in _FLOAT_TYPES}
    )
    found: list[int] = []
    for node in graph.node:
        standard = node.domain in ("", "ai.onnx")
        if standard and node.op_type == "Constant":
            for attribute in node.attribute:
                if attribute.name == "value" and attribute.t.data_type in _FLOAT_TYPES:
                    known[node.output[0]] = _tensor_values(attribute.t)
                elif attribute.name == "value_floats":
                    known[node.output[0]] = len(attribute.floats)
        elif standard and node.op_type in _PASS_OPS and node.input and node.input[0] in known:
            known[node.output[0]] = known[node.input[0]]
        elif standard and node.op_type in _ROW_OPS:
            found.extend(known[name] for name in node.input if name in known)
        elif standard and node.op_type in _GATHER_OPS and node.input[0] in known:
            found.append(known[node.input[0]])
        elif node.domain == "ai.onnx.ml" and node.op_type in _STORED_ROWS:
            for attribute in node.attribute:
                if attribute.name == _STORED_ROWS[node.op_type]:
                    found.append(len(attribute.floats))
        for attribute in node.attribute:
            if attribute.type == AttributeProto.GRAPH:
                found.extend(_constants(attribute.g, known))
            elif attribute.type == AttributeProto.GRAPHS:
                for sub in attribute.graphs:
                    found.extend(_constants(sub, known))
    return found


def graph_width(model: str | Path | Any, n_features: int) -> int:
    """The row count of the largest floating-point constant that meets the rows, as rows of
    ``n_features`` (see :func:`_constants`: stored rows, support vectors, weights).

    Args:
        model: the ``.onnx`` path or a loaded ``ModelProto``.
        n_features: the model's input columns.

    Returns:
        At least ``n_features`` (a row's own values); a tree ensemble's is ``n_features``.
    """
    import onnx

    proto = model if hasattr(model, "graph") else onnx.load(str(model), load_external_data=False)
    width = max(1, int(n_features))
    largest = max(_constants(proto.graph), default=0)
    return max(width, largest // width)


def batch_rows(width: int, memory_bound: int) -> int:
    """Rows per batch so that ``rows × width × 8 bytes × 4`` stays under ``memory_bound``."""
    per_row = max(1, width) * _BYTES_PER_VALUE * _LIVE_COPIES
    return max(1, int(memory_bound) // per_row)


def next_batch(left: int, rows: int) -> int:
    """Rows of the next batch when ``left`` rows remain, in batches of at most ``rows``.

    The batches are as even as can be (10 rows by 3: 3, 3, 2, 2), so none is much smaller.
    """
    if left <= 0:
        return 0
    return math.ceil(left / math.ceil(left / max(1, rows)))


def permutation(n: int, seed: int) -> np.ndarray:
    """The order rows are scored in under a budget: ``RandomState(seed).permutation(n)``.

    A sample is its first rows, so a larger sample with the same seed holds every row of a
    smaller one.
    """
    return np.random.RandomState(seed).permutation(n)


@dataclass
class Budget:
    """The time left for scoring, and how much of it each probe set may take.

    Args:
        seconds: the budget (None: no budget, every row is scored).
        started: ``time.perf_counter()`` when the validation started.
        sizes: rows of every probe set to run, in the order they run.
        single_rows: per set, rows it also scores one row at a time (``batch``), else 0.
        single_cost: seconds of a one-row call on every ONNX runtime together, once timed.
    """

    seconds: float | None
    started: float
    sizes: list[int] = field(default_factory=list)
    single_rows: list[int] = field(default_factory=list)
    single_cost: float | None = None

    @property
    def remaining(self) -> float:
        """Seconds left for scoring (may be negative).

        Scoring aims at 95 % of the budget: the rest is for comparing the outputs, and for
        the estimates' error (a row's cost varies with the machine's load).
        """
        return (self.seconds or 0.0) * _SCORING_SHARE - (time.perf_counter() - self.started)

    def seconds_for(self, index: int, cost_per_row: float, left: float, *, headline: bool) -> float:
        """Seconds probe set ``index`` may take (``inf``: all its rows).

        Args:
            index: position of the set in ``sizes``.
            cost_per_row: seconds a row costs on every runtime together (measured on the
                set's first rows).
            left: seconds of the budget left when the set started.
            headline: the ``holdout`` set: kept whole when the later sets' minimum samples
                still fit after it, else given all but their time.
        """
        if left <= 0:  # spent before the set started: its minimum sample and nothing more
            return 0.0
        n = self.sizes[index]
        later = self.sizes[index + 1 :]
        # One-row calls (the batch set) cannot be sampled: their time is kept for them.
        single = (self.single_cost or 0.0) * sum(self.single_rows[index + 1 :])
        floors = sum(min(m, MIN_SAMPLE_ROWS) for m in later)
        if cost_per_row * (n + sum(later)) + single <= left:
            return float("inf")
        if headline:
            if cost_per_row * (n + floors) + single <= left:
                return float("inf")
            return max(left - single - cost_per_row * floors, 0.0)
        return max(left - single, 0.0) * n / (n + sum(later))
