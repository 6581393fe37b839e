"""What the commands that load a model share: the ``--trust`` flag, and a model file and a data
file named on the command line, loaded together (convert, validate)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from onnxbridge.errors import DataError

if TYPE_CHECKING:
    import pandas as pd

# One --trust flag for every command that loads a .skops model (a model file or a bundle's
# model.skops). Trust is per command: nothing records it, so the next command asks again.
TrustOption = Annotated[
    list[str] | None,
    typer.Option(
        "--trust",
        metavar="NAME",
        help="A type or function in the .skops model to trust by its full name, besides the "
        "reviewed list of model types (repeatable); applies to this command only.",
    ),
]


def load_model_and_rows(
    model: Path,
    rows: Path,
    *,
    target: str | None,
    allow_pickle: bool,
    trust: list[str] | None,
) -> tuple[Any, pd.DataFrame]:
    """The estimator in ``model`` (skops; pickle only if allowed) and the rows of ``rows``
    without the ``target`` column.

    Raises:
        DataError: the target is not a column of the data file; and the errors of
            :func:`onnxbridge.bundle.load_estimator` and :func:`onnxbridge.data.read_table`.
    """
    from onnxbridge.bundle import load_estimator
    from onnxbridge.data import read_table

    estimator = load_estimator(model, allow_pickle=allow_pickle, trusted=tuple(trust or ()))
    frame = read_table(rows)
    if target is not None:
        if target not in frame.columns:
            raise DataError(f"--target {target!r} is not a column of {str(rows)!r}")
        frame = frame.drop(columns=[target])
    return estimator, frame
