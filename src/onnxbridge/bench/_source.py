"""What ``bench`` and ``tune`` run on: a bundle or a bare ``.onnx`` file, and the rows to feed it.

A bundle gives the ONNX model, the scikit-learn model (``model.skops``, when present) and the
held-out rows; a bare ``.onnx`` file gives only the model, so rows come from ``--data`` or, failing
that, are drawn at random (standard normal, seed 0) with the model's width.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from onnxbridge.bundle import MODEL_NAME, ONNX_NAME, REPORTS_DIR, Bundle
from onnxbridge.errors import BundleError, DataError
from onnxbridge.runtime import Predictor

__all__ = ["BenchSource", "open_source", "parse_batch_sizes", "tile_rows"]

# Rows drawn when a bare model comes without data.
_RANDOM_ROWS = 1000


@dataclass
class BenchSource:
    """A model to measure and the rows to measure it on.

    Attributes:
        onnx_path: the ``.onnx`` file.
        bundle: the bundle it belongs to, or None for a bare file.
        rows: ``[N, F]`` base rows in the model's column order (tiled to each batch size).
        rows_from: where the rows come from (``"holdout"``, a file path, ``"random"``).
        reports_dir: where ``bench.json`` / ``bench.png`` / ``tune.json`` go.
        trusted: extra names to trust in ``model.skops`` (see
            :func:`onnxbridge.bundle.load_estimator`), given for this run only.
    """

    onnx_path: Path
    bundle: Bundle | None
    rows: pd.DataFrame
    rows_from: str
    reports_dir: Path
    trusted: tuple[str, ...] = ()

    @property
    def has_estimator(self) -> bool:
        """Whether the scikit-learn model is there to compare with."""
        return self.bundle is not None and (self.bundle.path / MODEL_NAME).is_file()

    def load_estimator(self) -> Any:
        """The scikit-learn model (hash-checked), or None without one."""
        if not (self.has_estimator and self.bundle):
            return None
        return self.bundle.load_estimator(trusted=self.trusted)


def open_source(
    target: str | Path, *, data: str | Path | None = None, trusted: Sequence[str] = ()
) -> BenchSource:
    """Open a bundle folder or a ``.onnx`` file for benchmarking.

    Args:
        target: a bundle folder (with ``model.onnx``) or a ``.onnx`` file.
        data: a data file whose rows to use instead of the holdout (CSV, Parquet, JSON).
        trusted: extra names to trust in the bundle's ``model.skops``, for this run only.

    Raises:
        BundleError: a bundle without ``model.onnx``, or a damaged bundle.
        OnnxModelError: a file that is not a loadable ONNX model.
        DataError: a data file that cannot be read or lacks the model's columns.
    """
    from onnxbridge.data import read_table

    target = Path(target)
    bundle: Bundle | None = None
    if target.is_dir():
        bundle = Bundle.open(target)
        bundle.check_file(ONNX_NAME)
        onnx_path = bundle.onnx_path
        reports_dir = bundle.reports_dir
    else:
        if not target.exists():
            raise DataError(f"{str(target)!r} does not exist; pass a bundle folder or a .onnx file")
        onnx_path = target
        reports_dir = target.parent / REPORTS_DIR
    predictor = Predictor(onnx_path)
    names = predictor.feature_names
    if data is not None:
        frame = read_table(data)
        rows_from = str(data)
    elif bundle is not None:
        try:
            frame, _ = bundle.load_holdout()
        except BundleError:
            frame = None
        rows_from = "holdout"
    else:
        frame = None
        rows_from = "random"
    if frame is None:
        width = len(names) if names else predictor.input_width
        if width is None:
            raise DataError(
                f"{str(onnx_path)!r} has no onnxbridge schema and no fixed input width, so "
                "rows cannot be drawn for it; pass data=FILE",
                arguments=("data",),
            )
        values = np.random.RandomState(0).standard_normal((_RANDOM_ROWS, width))
        frame = pd.DataFrame(values, columns=names or [f"x{i}" for i in range(width)])
        rows_from = "random"
    if names is not None:
        missing = [c for c in names if c not in frame.columns]
        if missing:
            raise DataError(
                f"the rows from {rows_from!r} lack the model's columns "
                f"{', '.join(map(repr, missing[:5]))}; pass data=FILE with the model's columns",
                arguments=("data",),
            )
        frame = frame[names]
    if len(frame) == 0:
        raise DataError(
            f"the rows from {rows_from!r} are empty; pass data=FILE with some rows",
            arguments=("data",),
        )
    return BenchSource(
        onnx_path=onnx_path,
        bundle=bundle,
        rows=frame.reset_index(drop=True),
        rows_from=rows_from,
        reports_dir=reports_dir,
        trusted=(trusted,) if isinstance(trusted, str) else tuple(trusted),
    )


def tile_rows(rows: pd.DataFrame, n: int) -> pd.DataFrame:
    """``n`` rows: ``rows`` repeated (and cut) to length ``n``."""
    index = np.arange(n) % len(rows)
    return rows.iloc[index].reset_index(drop=True)


# The largest batch bench times: its rows are built in memory, once per runtime.
MAX_BATCH_ROWS = 10_000_000


def parse_batch_sizes(text: str | list[int] | tuple[int, ...]) -> list[int]:
    """``"1,10,1000"`` (or a list) → sorted distinct positive row counts.

    Raises:
        DataError: an empty list, a non-integer, a count below 1 or above
            :data:`MAX_BATCH_ROWS`.
    """
    items = [s.strip() for s in text.split(",")] if isinstance(text, str) else list(text)
    sizes: list[int] = []
    for item in items:
        try:
            value = int(str(item).replace("_", ""))
        except ValueError:
            value = 0
        if value < 1:
            raise DataError(
                f"batch size {item!r} is not a whole number >= 1; give sizes like 1,10,1000"
            )
        if value > MAX_BATCH_ROWS:
            raise DataError(
                f"batch size {item!r} is above {MAX_BATCH_ROWS:,} rows, the largest bench "
                "times (a batch is built in memory); give sizes like 1,10,1000"
            )
        sizes.append(value)
    if not sizes:
        raise DataError("no batch sizes given; give sizes like 1,10,1000")
    return sorted(set(sizes))
