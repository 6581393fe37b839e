"""Slow and stalled clients cannot hold the server: raw sockets that send part of a request are
answered 408 and closed after the header / body deadline, connections beyond the cap get 503 at
once, and health checks keep answering throughout. Real uvicorn servers on 127.0.0.1, over
every HTTP parser installed (h11 always, httptools when present)."""

from __future__ import annotations

import importlib.util
import json
import logging
import shutil
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from onnxbridge.serve._connections import MAX_HEAD_BYTES
from onnxbridge.serve._settings import ServeSettings
from serve.conftest import RunningServer
from socket_support import read_until_closed

PARSERS = ["h11"] + (["httptools"] if importlib.util.find_spec("httptools") else [])
ROW = {
    "inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 4], "data": [6.7, 3.0, 5.2, 2.3]}]
}
# A client's socket is read for at most this long: far past every deadline of these servers,
# so only a server that never closes the connection makes a read run out.
READ_LIMIT = 30.0


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory, _iris_bundle_master: Path) -> Path:
    root = tmp_path_factory.mktemp("slow") / "repo"
    root.mkdir()
    shutil.copytree(_iris_bundle_master, root / "iris")
    return root


@pytest.fixture
def serve(repo: Path) -> Iterator[Callable[..., RunningServer]]:
    servers: list[RunningServer] = []

    def start(parser: str, **settings: object) -> RunningServer:
        server = RunningServer(ServeSettings(model_path=repo, **settings), parser=parser)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


def _connect(server: RunningServer) -> socket.socket:
    host, port = server.host.split(":")
    client = socket.create_connection((host, int(port)))
    client.settimeout(READ_LIMIT)
    return client


def _status_and_error(answer: bytes) -> tuple[int, str]:
    head, _, body = answer.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    return status, json.loads(body)["error"]


def _healthy(server: RunningServer) -> int:
    return httpx.get(f"{server.url}/v2/health/live", timeout=READ_LIMIT).status_code


BODY = json.dumps(ROW).encode()
PARTIAL_HEAD = b"POST /v2/models/iris/infer HTTP/1.1\r\nHost: x\r\nContent-Le"
FULL_HEAD = (
    b"POST /v2/models/iris/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    b"Content-Length: " + str(len(BODY)).encode() + b"\r\n\r\n"
)


@pytest.mark.parametrize("parser", PARSERS)
def test_stalled_head_and_body_are_answered_408_and_closed(serve, parser, figures) -> None:
    server = serve(parser, header_timeout=1, body_timeout=1)
    silent = [_connect(server) for _ in range(5)]  # connect, send nothing
    heads = [_connect(server) for _ in range(5)]  # part of the headers
    bodies = [_connect(server) for _ in range(5)]  # the headers and part of the body
    for client in heads:
        client.sendall(PARTIAL_HEAD)
    for client in bodies:
        client.sendall(FULL_HEAD + BODY[:10])
    # While they stall, the server answers others.
    assert _healthy(server) == 200
    answer = httpx.post(f"{server.url}/v2/models/iris/infer", json=ROW, timeout=READ_LIMIT)
    assert answer.json()["outputs"][0]["data"] == [2]
    for client in silent + heads:
        status, error = _status_and_error(read_until_closed(client))
        assert status == 408
        assert "the request headers did not arrive within 1 s" in error
        assert "--header-timeout" in error
    for client in bodies:
        status, error = _status_and_error(read_until_closed(client))
        assert status == 408
        assert "the request body did not arrive within 1 s" in error
        assert "--body-timeout" in error
    assert _healthy(server) == 200
    figures("server slow clients", "slow clients dropped", 15)


@pytest.mark.parametrize("parser", PARSERS)
def test_a_trickling_body_is_bounded_as_a_whole(serve, parser, figures) -> None:
    """A byte now and then keeps no read idle for long, but the body as a whole has a deadline."""
    server = serve(parser, header_timeout=5, body_timeout=1)
    client = _connect(server)
    client.sendall(FULL_HEAD)
    sent = 0
    try:
        for byte in BODY[:-1]:  # never the last byte
            client.sendall(bytes([byte]))
            sent += 1
            time.sleep(0.2)
    except (BrokenPipeError, ConnectionResetError):
        pass  # the server closed the connection while the client trickled
    status, error = _status_and_error(read_until_closed(client))
    assert status == 408 and "the request body did not arrive within 1 s" in error
    assert sent < len(BODY) - 1  # dropped before it could finish trickling
    assert _healthy(server) == 200
    figures("server slow clients", "slow clients dropped", 1)


@pytest.mark.parametrize("parser", PARSERS)
def test_keep_alive_connection_stalling_on_its_second_request(serve, parser, figures) -> None:
    server = serve(parser, header_timeout=1, body_timeout=1, timeout_keep_alive=30)
    client = _connect(server)
    client.sendall(FULL_HEAD + BODY)
    first = b""
    while b"}]}" not in first:  # the whole first answer (the JSON ends with the outputs)
        first += client.recv(65536)
    assert first.startswith(b"HTTP/1.1 200")
    client.sendall(PARTIAL_HEAD)
    status, error = _status_and_error(read_until_closed(client))
    assert status == 408 and "headers did not arrive within 1 s" in error
    figures("server slow clients", "slow clients dropped", 1)


@pytest.mark.parametrize("parser", PARSERS)
def test_stalled_sockets_beyond_the_cap_get_503_and_the_server_recovers(
    serve, parser, figures
) -> None:
    cap, stalled = 50, 300
    server = serve(parser, header_timeout=3, body_timeout=3, max_connections=cap)
    clients = []
    for _ in range(stalled):
        client = _connect(server)
        try:
            client.sendall(PARTIAL_HEAD)
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused and closed already
        clients.append(client)
    # Over the cap: a health check is answered (200, or 503 while the stalled hold every slot);
    # it never hangs.
    assert _healthy(server) in (200, 503)
    statuses: dict[int, int] = {}
    for client in clients:
        status, error = _status_and_error(read_until_closed(client))
        statuses[status] = statuses.get(status, 0) + 1
        if status == 503:
            assert f"the server has {cap} connections open, its limit" in error
            assert "--max-connections" in error
        else:
            assert status == 408 and "headers did not arrive within 3 s" in error
    assert set(statuses) <= {408, 503}
    assert statuses.get(503, 0) >= stalled - cap  # every one beyond the cap refused
    assert statuses.get(408, 0) <= cap
    # Every stalled socket is gone: the server answers as before.
    assert _healthy(server) == 200
    answer = httpx.post(f"{server.url}/v2/models/iris/infer", json=ROW, timeout=READ_LIMIT)
    assert answer.status_code == 200
    figures("server slow clients", "stalled sockets", stalled)
    figures("server slow clients", "refused over the cap (503)", statuses.get(503, 0))
    figures("server slow clients", "slow clients dropped", statuses.get(408, 0))


@pytest.mark.parametrize("parser", PARSERS)
def test_a_stalled_body_on_every_post_route_logs_no_traceback(serve, parser, figures) -> None:
    """Routes read their bodies through Starlette too (predict, repository): a body cut by the
    deadline is a client error there as well, not an exception in the log."""
    server = serve(parser, header_timeout=5, body_timeout=1)
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    loggers = [logging.getLogger(), logging.getLogger("uvicorn")]
    for logger in loggers:
        logger.addHandler(handler)
    try:
        clients = []
        for path in (
            "/v2/models/iris/infer",
            "/v2/models/iris/versions/1/infer",
            "/v2/models/iris/predict",
            "/v2/repository/index",
            "/v2/repository/models/iris/load",
        ):
            client = _connect(server)
            client.sendall(
                f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\n[".encode()
            )
            clients.append(client)
        for client in clients:
            status, error = _status_and_error(read_until_closed(client))
            assert status == 408 and "the request body did not arrive within 1 s" in error
        assert _healthy(server) == 200
    finally:
        for logger in loggers:
            logger.removeHandler(handler)
    tracebacks = [r for r in records if r.exc_info or r.levelno >= logging.ERROR]
    assert not tracebacks, [r.getMessage() for r in tracebacks]
    figures("server slow clients", "slow clients dropped", len(clients))
    figures("server slow clients", "tracebacks logged", len(tracebacks))


@pytest.mark.parametrize("parser", PARSERS)
@pytest.mark.parametrize(
    "junk",
    [b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", b"GET / HTTP/1.1\r\nBad Header\r\n\r\n"],
    ids=["tls-hello", "bad-header"],
)
def test_bytes_that_are_not_http_get_a_json_400(serve, parser, junk) -> None:
    server = serve(parser)
    client = _connect(server)
    client.sendall(junk)
    status, error = _status_and_error(read_until_closed(client))
    assert status == 400
    assert "the request is not valid HTTP/1.1" in error and "RFC 9112" in error
    assert _healthy(server) == 200


@pytest.mark.parametrize("parser", PARSERS)
def test_a_head_over_the_limit_is_answered_before_it_ends(serve, parser) -> None:
    """Headers that keep coming (fast, within the deadline) would pile up in memory: past
    MAX_HEAD_BYTES the server answers and closes without waiting for the head's end."""
    server = serve(parser, header_timeout=30)
    client = _connect(server)
    filler = b"X-Filler: " + b"a" * 1000 + b"\r\n"
    client.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n" + filler * 20)  # no end
    status, error = _status_and_error(read_until_closed(client))
    if parser == "httptools":
        assert status == 431
        assert f"the request line and headers are over {MAX_HEAD_BYTES} bytes" in error
    else:  # h11 reports it as a parse error
        assert status == 400 and "the request is not valid HTTP/1.1" in error
    assert _healthy(server) == 200
