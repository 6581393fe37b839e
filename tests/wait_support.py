"""Waiting for something outside the test (a server starting, a child process writing a file).

The one place tests read a clock: a deadline bounds how long a test waits for another process
or thread before it gives up. No test compares durations.
"""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Callable

import httpx


def wait_until(condition: Callable[[], bool], *, timeout: float, interval: float = 0.02) -> bool:
    """Poll ``condition`` until it holds or ``timeout`` seconds have passed.

    Returns:
        Whether the condition held before the deadline.
    """
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(interval)
    return True


def wait_for_ready(process: subprocess.Popen, url: str, *, timeout: float = 60) -> None:
    """Wait until the server ``process`` answers ``url``/v2/health/ready with 200.

    Raises:
        AssertionError: the process ended first (with its output), or the deadline passed.
    """

    def ready() -> bool:
        assert process.poll() is None, process.communicate()
        try:
            return httpx.get(f"{url}/v2/health/ready").status_code == 200
        except httpx.TransportError:
            return False

    assert wait_until(ready, timeout=timeout, interval=0.1), "the server did not become ready"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
