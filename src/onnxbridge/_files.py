"""Files written safely: atomic writes (temporary name, then rename) and content hashes.

The lowest layer: every module that writes files uses it, so a failed command never leaves a
half-written file behind.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

__all__ = ["atomic_write_path", "check_not_folders", "file_sha256", "restored_on_failure"]


def file_sha256(path: str | Path) -> str:
    """sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _default_mode(directory: bool = False) -> int:
    """The mode a plain ``open()`` / ``mkdir()`` would give (temp files are private)."""
    return (0o777 if directory else 0o666) & ~_umask()


@contextlib.contextmanager
def restored_on_failure(folder: Path, names: Iterable[str]) -> Iterator[None]:
    """The files ``names`` of ``folder`` as they were, should the block fail (any exception,
    Ctrl-C included): a refused command changes nothing on disk.

    Each file is kept aside as a hard link (no copy; a copy where the file system has no
    links), which works because onnxbridge replaces files by renaming new ones into place. A
    file the block created where there was none is removed.
    """
    aside = Path(tempfile.mkdtemp(prefix=".onnxbridge-undo.", suffix=".tmp", dir=folder))
    kept: dict[str, Path | None] = {}
    try:
        for index, name in enumerate(dict.fromkeys(names)):
            source = folder / name
            if not source.is_file():
                kept[name] = None
                continue
            copy = aside / str(index)
            try:
                os.link(source, copy)
            except OSError:
                shutil.copy2(source, copy)
            kept[name] = copy
        yield
    except BaseException:
        for name, kept_copy in kept.items():
            target = folder / name
            if kept_copy is None:
                if target.is_file() or target.is_symlink():
                    target.unlink()
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                os.replace(kept_copy, target)
        raise
    finally:
        shutil.rmtree(aside, ignore_errors=True)


def check_not_folders(*paths: Path) -> None:
    """Refuse, before anything is written, files of a set whose names a folder holds: a pair of
    reports is written whole or not at all.

    Raises:
        OSError: ``EISDIR``, naming the first such path.
    """
    for path in paths:
        if path.is_dir():
            raise OSError(errno.EISDIR, "Is a directory", str(path))


@contextlib.contextmanager
def atomic_write_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; renamed onto ``path`` only if the block succeeds."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as exc:
        raise OSError(exc.errno, "a folder on the way to it is a file", str(path)) from exc
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        # Name the file the user asked for, not our temporary one.
        raise OSError(exc.errno, exc.strerror, str(path)) from exc
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        os.chmod(tmp, _default_mode())
        os.replace(tmp, path)
    except OSError as exc:
        # A write that failed (disk full, a size limit) names the temporary file or no file at
        # all (pyarrow): name the file the user asked for.
        if exc.filename in (str(tmp), tmp, None):
            raise _naming(exc, path) from exc
        raise
    finally:
        if tmp.exists():
            tmp.unlink()


# pyarrow raises an OSError whose message wraps the reason: "... Detail: [errno 28] No space ...".
_ERRNO_IN_TEXT = re.compile(r"\[errno (\d+)\]\s*([^\n;]*)", re.IGNORECASE)


def _naming(exc: OSError, path: Path) -> OSError:
    """``exc`` as an OSError about ``path``, keeping its errno and reason."""
    # The innermost "[errno N] reason" is the one that says what happened.
    found = _ERRNO_IN_TEXT.findall(exc.strerror or str(exc))
    if found:
        code, reason = int(found[-1][0]), found[-1][1].strip()
        return OSError(code, reason or os.strerror(code), str(path))
    return OSError(exc.errno, exc.strerror or str(exc), str(path))
