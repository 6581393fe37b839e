"""Connection guards: deadlines for a request's head and body, a cap on open connections, and a
shutdown that does not wait for clients still sending.

uvicorn reads a request for as long as the client takes: a client that sends part of its headers,
or headers and part of a body, holds its connection (and a file descriptor) forever, and a
graceful shutdown waits for it. The guard is an HTTP protocol class for uvicorn (its documented
``http=`` option) over uvicorn's own h11 or httptools protocol, using only what those parsers
document (h11's ``their_state`` and ``trailing_data``, httptools' parser callbacks) and the
asyncio ``Protocol`` / ``Transport`` interface:

- a request's head must arrive within ``header_timeout`` seconds (counted from the connection's
  opening or the request's first byte), its body within ``body_timeout`` seconds of the head;
  a client too slow is answered ``408 {"error": ...}`` and its connection closed;
- a request head is at most about :data:`MAX_HEAD_BYTES` (plus the read it began in);
  beyond it the answer is 431 (h11 itself answers 400 first);
- beyond ``max_connections`` open connections a new one is answered ``503 {"error": ...}`` and
  closed at once, so stalled clients cannot use up the process's file descriptors;
- on shutdown, a client still sending its request is answered 503 and closed; requests already
  received run to the end (uvicorn's ``timeout_graceful_shutdown`` bounds them).

A timer is armed only when a read is still incomplete at the end of a ``data_received`` call (and
once when a connection opens), so a request that arrives in one piece costs no timer.
"""

from __future__ import annotations

import asyncio
import functools
import http
import importlib.util
import logging
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, cast

import h11
import orjson
from uvicorn.protocols.http.h11_impl import H11Protocol

from onnxbridge.errors import ServeSettingsError
from onnxbridge.serve._settings import ServeSettings, load_settings

__all__ = [
    "MAX_HEAD_BYTES",
    "ConnectionLimits",
    "GuardedH11Protocol",
    "guarded_protocol",
    "uvicorn_options",
]

logger = logging.getLogger("onnxbridge.serve")

Phase = Literal["head", "body"]
# The largest request head (request line and headers), as h11 bounds it by default.
MAX_HEAD_BYTES = 16 * 1024


_HTTPTOOLS = importlib.util.find_spec("httptools") is not None


@dataclass(frozen=True)
class ConnectionLimits:
    """What one connection may take.

    Attributes:
        header_timeout: seconds for a request's head (request line and headers) to arrive.
        body_timeout: seconds for its body to arrive once the head has.
        max_connections: open connections per process; more are answered 503 and closed.
    """

    header_timeout: float
    body_timeout: float
    max_connections: int

    @classmethod
    def from_settings(cls, settings: ServeSettings) -> ConnectionLimits:
        return cls(settings.header_timeout, settings.body_timeout, settings.max_connections)


@functools.cache
def _limits_from_environment() -> ConnectionLimits:
    # A worker process started by uvicorn gets its settings from ONNXBRIDGE_SERVE_* (the CLI
    # exports them); read once per process.
    return ConnectionLimits.from_settings(load_settings())


def _answer(status: int, message: str) -> bytes:
    """A complete ``{"error": message}`` response that closes the connection."""
    body = orjson.dumps({"error": message})
    head = (
        f"HTTP/1.1 {status} {http.HTTPStatus(status).phrase}\r\n"
        "content-type: application/json\r\n"
        f"content-length: {len(body)}\r\n"
        "connection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


class _Guard:
    """The deadlines, cap and shutdown rule, over any uvicorn HTTP protocol (a mixin).

    A concrete class says, through :meth:`_incomplete`, which part of a request is still
    being read.
    """

    limits: ClassVar[ConnectionLimits | None] = None
    """Bound by :func:`guarded_protocol`; None: from the ``ONNXBRIDGE_SERVE_*`` variables."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        server_state = kwargs["server_state"] if "server_state" in kwargs else args[1]
        self._guard_limits = self.limits or _limits_from_environment()
        self._guard_open: set[Any] = server_state.connections
        self._guard_transport: asyncio.Transport | None = None
        self._guard_timer: asyncio.TimerHandle | None = None
        self._guard_phase: Phase | None = None
        self._guard_head_bytes = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # type: ignore[misc]
        # A stream transport (uvloop's is one without subclassing asyncio.Transport).
        self._guard_transport = cast(asyncio.Transport, transport)
        cap = self._guard_limits.max_connections
        if len(self._guard_open) > cap:
            logger.info(
                "refused a connection: %d open, the limit is %d", len(self._guard_open), cap
            )
            self._close(
                503,
                f"the server has {cap} connections open, its limit; retry shortly, or raise "
                "--max-connections",
            )
            return
        # Nothing has arrived yet: the head's deadline runs from now.
        self._watch("head")

    def data_received(self, data: bytes) -> None:
        # Only bytes that continue a head are counted (a first piece may also hold the end of
        # the previous request), so a request that arrives in one piece costs one comparison.
        continuing = self._guard_phase == "head"
        super().data_received(data)  # type: ignore[misc]
        phase = self._incomplete()
        if phase != self._guard_phase:
            self._watch(phase)
        elif continuing and phase == "head":
            self._guard_head_bytes += len(data)
            if self._guard_head_bytes > MAX_HEAD_BYTES:
                # The parsers keep every header line until the head ends: bound it.
                self._watch(None)
                self._close(
                    431,
                    f"the request line and headers are over {MAX_HEAD_BYTES} bytes; send "
                    "fewer or shorter headers",
                )

    def connection_lost(self, exc: Exception | None) -> None:
        self._watch(None)
        super().connection_lost(exc)  # type: ignore[misc]

    def shutdown(self) -> None:
        """Called by uvicorn on shutdown: a client still sending would hold the exit."""
        if self._guard_phase is not None and self._guard_transport is not None:
            self._watch(None)
            self._close(
                503,
                "the server is shutting down and did not receive the whole request; send it "
                "again (to another instance)",
            )
            return
        super().shutdown()  # type: ignore[misc]

    def send_400_response(self, msg: str) -> None:
        """uvicorn's answer to bytes that do not parse as HTTP: ``{"error"}`` like every other."""
        self._watch(None)
        self._close(
            400,
            "the request is not valid HTTP/1.1 (request line, headers or framing); send a "
            "request as RFC 9112 describes",
        )

    def _incomplete(self) -> Phase | None:
        """The part of a request still being read, or None (none begun, or all of it read)."""
        raise NotImplementedError

    def _watch(self, phase: Phase | None) -> None:
        if phase == self._guard_phase:
            return  # the same read goes on: its deadline stands
        if self._guard_timer is not None:
            self._guard_timer.cancel()
            self._guard_timer = None
        self._guard_phase = phase
        self._guard_head_bytes = 0
        if phase is not None:
            limits = self._guard_limits
            seconds = limits.header_timeout if phase == "head" else limits.body_timeout
            self._guard_timer = asyncio.get_running_loop().call_later(
                seconds, self._expired, phase, seconds
            )

    def _expired(self, phase: Phase, seconds: float) -> None:
        self._guard_timer = None
        self._guard_phase = None
        transport = self._guard_transport
        if transport is None or transport.is_closing():
            return
        what, flag = (
            ("headers", "--header-timeout") if phase == "head" else ("body", "--body-timeout")
        )
        logger.info("closed a connection: the request %s took over %g s", what, seconds)
        self._close(
            408,
            f"the request {what} did not arrive within {seconds:g} s; send the whole request "
            f"at once (the server's {flag} is {seconds:g} s)",
        )

    def _close(self, status: int, message: str) -> None:
        transport = self._guard_transport
        assert transport is not None
        # Bytes still queued belong to a response under way: an answer after them would be
        # read as part of it, so only close then.
        if not transport.is_closing() and transport.get_write_buffer_size() == 0:
            transport.write(_answer(status, message))
        transport.close()


class GuardedH11Protocol(_Guard, H11Protocol):
    """uvicorn's h11 protocol with the guard (see the module docstring)."""

    def _incomplete(self) -> Phase | None:
        conn: h11.Connection = self.conn
        state = conn.their_state
        if state is h11.SEND_BODY:
            return "body"
        if state is h11.IDLE and conn.trailing_data[0]:
            return "head"  # part of the next request's head is buffered
        return None


if _HTTPTOOLS:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class GuardedHttpToolsProtocol(_Guard, HttpToolsProtocol):
        """uvicorn's httptools protocol with the guard; phases follow the parser callbacks."""

        _guard_reading: Phase | None = None

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._guard_reading = "head"

        def on_headers_complete(self) -> None:
            super().on_headers_complete()
            self._guard_reading = "body"

        def on_message_complete(self) -> None:
            super().on_message_complete()
            self._guard_reading = None

        def _incomplete(self) -> Phase | None:
            return self._guard_reading

    __all__ += ["GuardedHttpToolsProtocol"]


_PARSERS: dict[str, type[Any]] = {"h11": GuardedH11Protocol}
if _HTTPTOOLS:
    _PARSERS["httptools"] = GuardedHttpToolsProtocol


def _protocol_path() -> str:
    """The guarded protocol over the fastest parser installed (httptools, else h11)."""
    name = "GuardedHttpToolsProtocol" if _HTTPTOOLS else "GuardedH11Protocol"
    return f"{__name__}:{name}"


def guarded_protocol(settings: ServeSettings, parser: str | None = None) -> type[Any]:
    """The guarded protocol class bound to ``settings``' limits (for a server in this process).

    Args:
        settings: where the limits come from.
        parser: ``"h11"`` or ``"httptools"``; default: httptools when installed.

    Raises:
        ServeSettingsError: a parser that is not installed.
    """
    if parser is None:
        parser = "httptools" if _HTTPTOOLS else "h11"
    base = _PARSERS.get(parser)
    if base is None:
        raise ServeSettingsError(
            f"HTTP parser {parser!r} is not available; installed: {', '.join(_PARSERS)}"
        )
    return type(base.__name__, (base,), {"limits": ConnectionLimits.from_settings(settings)})


def uvicorn_options(
    settings: ServeSettings, *, in_process: bool, parser: str | None = None
) -> dict[str, Any]:
    """The uvicorn keyword arguments that make a server keep ``settings``' limits.

    Args:
        settings: the server settings.
        in_process: True for a server run in this process (the protocol class is bound to
            ``settings``); False for ``uvicorn.run`` with workers, where each worker process
            imports the protocol by name and reads the limits from ``ONNXBRIDGE_SERVE_*``.
        parser: ``"h11"`` or ``"httptools"`` (in process only); default: httptools when
            installed.

    Raises:
        ServeSettingsError: a parser that is not installed.
    """
    return {
        "http": guarded_protocol(settings, parser) if in_process else _protocol_path(),
        "timeout_keep_alive": settings.timeout_keep_alive,
        "h11_max_incomplete_event_size": MAX_HEAD_BYTES,
        # Requests still running this long after the shutdown began are cancelled.
        "timeout_graceful_shutdown": settings.shutdown_timeout,
        "log_level": settings.log_level,
        "access_log": settings.access_log,
    }
