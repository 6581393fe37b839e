"""What every command prints through, and what happens when nobody reads any more.

``onnxbridge predict ... | head -2`` closes the pipe once ``head`` has its lines. A command
that meets a reader gone (a closed pipe, a socket whose peer left: the write fails with EPIPE)
stops printing there, finishes its work (files it writes, the check it runs) and exits with its
own code: 0, or 1 for a DIVERGENT verdict or a failed gate. The same holds for standard error:
``2>&1 >/dev/null | true`` loses the messages, never the work.
"""

from __future__ import annotations

import errno
import io
import os
import sys
from typing import IO, Any, TextIO

from rich.console import Console

__all__ = ["console", "make_console", "quiet_when_unread", "silence_fd"]


def silence_fd(fd: int) -> None:
    """Point file descriptor ``fd`` (open or closed) at the null device: later writes there
    succeed unread, including Python's last flush at exit (no "Exception ignored ...
    BrokenPipeError")."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    if devnull != fd:
        os.dup2(devnull, fd)
        os.close(devnull)


class _UnreadIsFine(io.FileIO):
    """Standard output or error as a raw file whose writes, once the reader has gone (EPIPE),
    go to the null device instead of failing."""

    def write(self, data: Any) -> int:
        try:
            return super().write(data)
        except OSError as exc:
            if exc.errno != errno.EPIPE:
                raise
            silence_fd(self.fileno())
            return len(memoryview(data))


def _quiet_text(stream: TextIO | None, fd: int) -> TextIO:
    """A text stream on ``fd`` like ``stream`` (encoding, buffering) that tolerates a reader
    gone; the null device when ``fd`` is closed (``2>&-``), so that nothing meant for it lands
    in whatever file next takes its number."""
    if stream is None:
        silence_fd(fd)
        return open(fd, "w", encoding="utf-8", closefd=False)
    stream.flush()
    raw = _UnreadIsFine(fd, "w", closefd=False)
    # Buffered as the stream it replaces: unbuffered under ``python -u`` / PYTHONUNBUFFERED, so
    # a reader sees each line when it is written.
    buffered = isinstance(getattr(stream, "buffer", None), io.BufferedWriter)
    return io.TextIOWrapper(
        io.BufferedWriter(raw) if buffered else raw,
        encoding=stream.encoding,
        errors=stream.errors,
        line_buffering=bool(stream.line_buffering),
        write_through=getattr(stream, "write_through", False),
    )


def quiet_when_unread() -> None:
    """Make ``sys.stdout`` and ``sys.stderr`` carry on when their reader has gone (or when they
    were closed before the command started); the command's own exit code then stands."""
    for name, fd in (("stdout", 1), ("stderr", 2)):
        stream = getattr(sys, name)
        if stream is not None and _fd_of(stream) != fd:
            continue  # already redirected in-process (tests capturing output): leave it
        setattr(sys, name, _quiet_text(stream, fd))


def _fd_of(stream: IO[str]) -> int | None:
    try:
        return stream.fileno()
    except (AttributeError, OSError, ValueError):
        return None


class _Console(Console):
    def on_broken_pipe(self) -> None:
        # rich's own answer is SystemExit(1); a reader gone is not a failure of the command,
        # which finishes its work silently.
        self.quiet = True
        fd = _fd_of(self.file)
        if fd is not None:
            silence_fd(fd)


def make_console(**options: Any) -> Console:
    """A rich console (``options`` as for :class:`rich.console.Console`) that falls silent,
    without failing the command, when its reader goes."""
    return _Console(**options)


# Standard output of the commands: plain text, no highlighting, long lines left whole.
console = make_console(highlight=False, soft_wrap=True)
