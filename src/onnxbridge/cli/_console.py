"""What every command prints through: a rich console, and what happens when nobody reads.

``onnxbridge predict ... | head -2`` closes the pipe once ``head`` has its lines; the command
then ends quietly with exit 0 (see :func:`onnxbridge.cli.main.main`), as a writer to a closed
pipe should.
"""

from __future__ import annotations

import select
import sys
from typing import Any

from rich.console import Console

__all__ = ["OutputClosed", "console", "make_console", "stdout_closed"]


class OutputClosed(Exception):
    """Standard output is a pipe whose reader has gone (``onnxbridge predict ... | head``).

    Attributes:
        exit_code: what the command exits with: 0, or the verdict it had already reached
            (``validate``: 1 for DIVERGENT), which a closed pipe must not hide.
    """

    def __init__(self, exit_code: int = 0) -> None:
        super().__init__(exit_code)
        self.exit_code = exit_code


def stdout_closed() -> bool:
    """Whether standard output is a pipe nobody reads any more.

    A write there fails with EPIPE; so does a write to a socket whose peer left, which is an
    error to report, not a reason to end quietly: ask the pipe itself.
    """
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
    except (AttributeError, OSError, ValueError):
        return False  # not a real file (tests capturing output) or no poll(): report it
    return any(events & select.POLLERR for _, events in poller.poll(0))


class _Console(Console):
    def on_broken_pipe(self) -> None:
        # rich's own answer is SystemExit(1); a closed pipe is not a failure of the command.
        self.quiet = True
        raise OutputClosed()


def make_console(**options: Any) -> Console:
    """A rich console (``options`` as for :class:`rich.console.Console`) that raises
    :class:`OutputClosed` when its pipe closes."""
    return _Console(**options)


# Standard output of the commands: plain text, no highlighting, long lines left whole.
console = make_console(highlight=False, soft_wrap=True)
