"""Where commands write: an output file's folder must already exist.

A command that writes one file (``predict --out``, ``convert --out``, ``score --output
X.parquet``, ``coverage --out-md`` ...) refuses a path whose folder is missing rather than
creating it, so that a typo in a path is an error, not a new folder. Commands that own a folder
by design (the bundle of ``train --out``, the folder output of ``score``, a report folder)
create it.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence
from pathlib import Path

from onnxbridge.errors import DataError

__all__ = ["check_not_a_source", "check_out_file"]


def check_out_file(path: Path | None, flag: str) -> None:
    """Refuse ``path`` (given with ``flag``) when its folder does not exist or is not a folder.

    Raises:
        DataError: one line naming the flag, the folder and what to do.
    """
    if path is None:
        return
    folder = path.parent
    if folder.is_dir():
        return
    blocker = next((p for p in (folder, *folder.parents) if p.exists()), None)
    if blocker is not None and not blocker.is_dir():
        raise DataError(
            f"{flag} {str(path)!r}: {str(blocker)!r} is a file, not a folder; choose another path"
        )
    raise DataError(
        f"{flag} {str(path)!r}: folder {str(folder)!r} does not exist; create it first "
        f"(mkdir -p {shlex.quote(str(folder))}) or choose another path"
    )


def check_not_a_source(path: Path | None, flag: str, files: Sequence[Path]) -> None:
    """Refuse an output ``path`` that is one of ``files`` (the same file, or a link to it):
    a command never writes over what it reads, or over a bundle's own files.

    Raises:
        DataError: one line naming the flag and what it would replace.
    """
    if path is None:
        return
    real = path.resolve()
    for file in files:
        same = real == file.resolve() or (
            path.exists() and file.exists() and os.path.samefile(path, file)
        )
        if same:
            raise DataError(
                f"{flag} {str(path)!r} would write over {str(file)!r}, which this command "
                "reads (or its bundle is made of); choose another path"
            )
