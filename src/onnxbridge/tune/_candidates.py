"""What the search tries: the candidate settings of each step, and the calls they are timed on.

Candidates are listed from the cheapest for a shared machine (fewer threads, no spinning,
sequential, all graph optimisations) to the dearest: the search keeps the first one within its
margin of the fastest, so a tie leaves the cores to other processes.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from onnxbridge.runtime._router import tree_block_nodes_for
from onnxbridge.runtime._settings import SessionSettings

__all__ = [
    "LARGE_BYTES",
    "LARGE_CONTENDERS",
    "LARGE_ROWS",
    "MID_ROWS",
    "RegimePlan",
    "Variants",
    "large_rows_for",
    "stage_one_candidates",
    "stage_two_candidates",
]

Feeds = dict[str, np.ndarray]

# The throughput regime's candidates are also timed on calls of this many rows, when it lies
# between the two regimes' sizes: its settings serve every call above the boundary.
MID_ROWS = 100
# Step two's close candidates are also timed on calls this many times the throughput size (at
# most LARGE_ROWS rows and LARGE_BYTES of inputs): the throughput settings serve every larger
# call too, and two settings tied at one size can be far apart at ten times it.
LARGE_FACTOR = 10
LARGE_ROWS = 100_000
LARGE_BYTES = 64 << 20
# "Close": a score within this factor of the best after the throughput and 100-row calls.
LARGE_CONTENDERS = 1.25


class Variants(enum.Flag):
    """Step two's variants of the step-one winner, beyond parallel mode and optimisation levels.

    ``ROW_SPLIT``: each large call's rows split across the cores, one thread per part.
    ``TREE_BLOCKS``: the trees in blocks (:mod:`onnxbridge.runtime._rewrites.tree_blocks`), for
    a tree ensemble large enough to split. ``DOT_PRODUCT``: linear operators as dot products
    (:mod:`onnxbridge.runtime._rewrites.linear_dot`).
    """

    NONE = 0
    ROW_SPLIT = enum.auto()
    TREE_BLOCKS = enum.auto()
    DOT_PRODUCT = enum.auto()


def stage_one_candidates(cores: int) -> list[SessionSettings]:
    """Threads × spinning, cheapest first, then ONNX Runtime's defaults.

    Spinning means nothing to one thread (no pool to spin), so it is tried from two threads on:
    first spinning within runs only (threads sleep once a run returns), then spinning on between
    runs as well (ONNX Runtime's default, dearest for the other sessions on the cores).
    """
    candidates = [
        SessionSettings(intra_op_num_threads=n, allow_spinning=False) for n in range(1, cores + 1)
    ]
    for in_runs_only in (True, False):
        candidates += [
            SessionSettings(
                intra_op_num_threads=n, allow_spinning=True, spin_in_runs_only=in_runs_only
            )
            for n in range(2, cores + 1)
        ]
    return [*candidates, SessionSettings()]


def stage_two_candidates(
    winner: SessionSettings, cores: int, variants: Variants = Variants.NONE
) -> list[SessionSettings]:
    """The step-one winner, then its parallel-mode and lower-optimisation variants, then the
    ``variants`` asked for (see :class:`Variants`; a row split only on several cores).

    ``tune`` appends ``Predictor``'s and ONNX Runtime's defaults when they are not among these.
    """
    out = [winner]
    if cores > 1:
        out.append(replace(winner, execution_mode="parallel", inter_op_num_threads=cores))
    levels = ("extended", "basic", "disabled")
    out += [replace(winner, graph_optimization_level=level) for level in levels]
    if Variants.ROW_SPLIT in variants and cores > 1:
        # Large calls split across the cores; smaller ones keep the winner's own threads.
        out.append(replace(winner, row_split=cores))
    if Variants.TREE_BLOCKS in variants:
        out += _blocked(winner, cores)
    if Variants.DOT_PRODUCT in variants:
        out += _dot_product(winner)
    return out


def _blocked(winner: SessionSettings, cores: int) -> list[SessionSettings]:
    """The winner with its trees in blocks; on several cores also the blocks run side by side
    (parallel mode, one thread per block) and the blocked winner with its rows split."""
    blocked = [winner]
    if cores > 1:
        blocked.append(
            replace(
                winner,
                intra_op_num_threads=1,
                execution_mode="parallel",
                inter_op_num_threads=cores,
            )
        )
        blocked.append(replace(winner, row_split=cores))
    # Each with blocks of the size for its threads per operator.
    return [replace(s, tree_block_nodes=tree_block_nodes_for(s)) for s in blocked]


def _dot_product(winner: SessionSettings) -> list[SessionSettings]:
    """The winner with linear operators as dot products, and before it the same on one thread
    without spinning: the dot-product kernel gains little from a second thread, and listed
    first, the cheaper one wins a tie within the margin."""
    out = []
    if winner.intra_op_num_threads != 1:
        out.append(
            replace(
                winner,
                linear_gemv=True,
                intra_op_num_threads=1,
                allow_spinning=False,
                spin_in_runs_only=False,
                execution_mode="sequential",
                inter_op_num_threads=0,
                row_split=0,
            )
        )
    return [*out, replace(winner, linear_gemv=True)]


def large_rows_for(throughput_rows: int, row_bytes: float) -> int:
    """Rows of the throughput regime's third size (0: none larger than ``throughput_rows``)."""
    rows = min(throughput_rows * LARGE_FACTOR, LARGE_ROWS, int(LARGE_BYTES // max(row_bytes, 1.0)))
    return rows if rows > throughput_rows else 0


@dataclass(frozen=True, eq=False)
class RegimePlan:
    """What one regime's search times.

    Attributes:
        regime: ``"latency"`` or ``"throughput"``.
        feeds: the regime's call (its rows per call).
        variants: step two's variants to try.
        mid_feeds: a call of :data:`MID_ROWS` rows every candidate is also timed on, or None.
        large_feeds: a call of :func:`large_rows_for` rows step two's close candidates are
            also timed on, or None.
    """

    regime: Literal["latency", "throughput"]
    feeds: Feeds
    variants: Variants = Variants.NONE
    mid_feeds: Feeds | None = None
    large_feeds: Feeds | None = None

    @property
    def rows(self) -> int:
        """Rows per call of the regime."""
        return _rows(self.feeds)

    @property
    def large_rows(self) -> int:
        """Rows per call of the large size (0: not timed)."""
        return _rows(self.large_feeds) if self.large_feeds else 0

    def steps(self, cores: int, repeat: int) -> int:
        """Progress steps of the search, at most (step two's close candidates are not known
        before step one ends)."""
        stage1 = len(stage_one_candidates(cores))
        # At most: the winner's variants and the two defaults.
        stage2 = len(stage_two_candidates(SessionSettings(), cores, self.variants)) + 2
        sizes = 2 if self.mid_feeds is not None else 1
        large = stage2 if self.large_feeds is not None else 0
        return ((stage1 + stage2) * sizes + large) * (repeat + 1)


def _rows(feeds: Feeds) -> int:
    return len(next(iter(feeds.values()))) if feeds else 0
