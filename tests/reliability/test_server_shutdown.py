"""SIGTERM on ``onnxbridge serve`` (the real command in a subprocess): a stalled client does not
hold the exit, a request already received finishes, and one still running at the shutdown
deadline is answered 503; the process exits, with no traceback in its log.

A request is kept running for seconds by a model of chained 1000 x 1000 identity MatMuls (its
answer is its input, exactly).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from socket_support import read_until_closed
from wait_support import free_port, wait_for_ready

WIDTH = 1000
# The process must be gone this long after SIGTERM (far past every deadline used here), else
# the test fails instead of hanging.
EXIT_LIMIT = 45


def _slow_model(depth: int = 600) -> onnx.ModelProto:
    """``y = x @ I @ I ...`` (``depth`` MatMuls) on ``x`` FP32 [N, 1000]: seconds per 50 rows."""
    identity = numpy_helper.from_array(np.eye(WIDTH, dtype=np.float32), "w")
    nodes, previous = [], "x"
    for index in range(depth):
        out = "y" if index == depth - 1 else f"h{index}"
        nodes.append(helper.make_node("MatMul", [previous, "w"], [out]))
        previous = out
    graph = helper.make_graph(
        nodes,
        "slow",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", WIDTH])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", WIDTH])],
        initializer=[identity],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


@pytest.fixture(scope="module")
def slow_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("shutdown") / "slow.onnx"
    onnx.save(_slow_model(), path)
    return path


class Served:
    """``onnxbridge serve`` in a subprocess, ready to answer."""

    def __init__(self, model: Path, *flags: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("ONNXBRIDGE_SERVE_")}
        self.process = subprocess.Popen(
            [
                *(sys.executable, "-m", "onnxbridge._cli.main", "serve", str(model)),
                *("--port", str(self.port), "--log-level", "info", *flags),
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        wait_for_ready(self.process, self.url)

    def stalled(self, partial: bytes) -> socket.socket:
        client = socket.create_connection(("127.0.0.1", self.port))
        client.settimeout(EXIT_LIMIT)
        client.sendall(partial)
        return client

    def terminate(self) -> tuple[int, str]:
        """SIGTERM; the exit code and the log once the process is gone."""
        self.process.send_signal(signal.SIGTERM)
        _, err = self.process.communicate(timeout=EXIT_LIMIT)
        return self.process.returncode, err


@pytest.fixture
def serve(slow_model: Path) -> Iterator:
    started: list[Served] = []

    def start(*flags: str) -> Served:
        started.append(Served(slow_model, *flags))
        return started[-1]

    yield start
    for served in started:
        if served.process.poll() is None:
            served.process.kill()
            served.process.communicate()


def _infer_in_background(url: str, rows: int) -> tuple[threading.Thread, dict, np.ndarray]:
    x = np.random.RandomState(0).rand(rows, WIDTH).astype(np.float32)
    tensor = {
        "name": "x",
        "datatype": "FP32",
        "shape": [rows, WIDTH],
        "parameters": {"binary_data_size": x.nbytes},
    }
    header = json.dumps({"inputs": [tensor], "parameters": {"binary_data_output": True}}).encode()
    result: dict = {}

    def run() -> None:
        result["response"] = httpx.post(
            f"{url}/v2/models/slow/infer",
            content=header + x.tobytes(),
            headers={"Inference-Header-Content-Length": str(len(header))},
            timeout=EXIT_LIMIT,
        )

    thread = threading.Thread(target=run)
    thread.start()
    return thread, result, x


HEAD = b"POST /v2/models/slow/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n"


def test_sigterm_finishes_the_request_in_flight_and_drops_stalled_clients(serve, figures) -> None:
    served = serve("--shutdown-timeout", "30", "--header-timeout", "60", "--body-timeout", "60")
    stalled_body = served.stalled(HEAD + b'{"inputs"')
    stalled_head = served.stalled(b"POST /v2/models/slow/infer HTTP/1.1\r\nHo")
    # 150 rows run for seconds: still running at SIGTERM, well within the 30 s deadline.
    thread, result, x = _infer_in_background(served.url, rows=150)
    time.sleep(1.0)  # let the request reach the model (it runs for seconds)
    code, log = served.terminate()
    thread.join(EXIT_LIMIT)
    response = result["response"]
    assert response.status_code == 200, response.status_code
    length = int(response.headers["inference-header-content-length"])
    y = np.frombuffer(response.content[length:], dtype="<f4").reshape(150, WIDTH)
    np.testing.assert_array_equal(y, x)  # the whole answer, exactly
    for client in (stalled_body, stalled_head):
        answer = read_until_closed(client)
        assert answer.startswith(b"HTTP/1.1 503"), answer
        assert b"the server is shutting down and did not receive the whole request" in answer
    assert code in (0, -signal.SIGTERM), log
    assert "Traceback" not in log, log
    figures("server shutdown", "SIGTERM with stalled clients: exits", 1)
    figures("server shutdown", "in-flight requests finished", 1)


def test_a_request_still_running_at_the_deadline_is_answered_503(serve, figures) -> None:
    served = serve("--shutdown-timeout", "1")
    stalled = served.stalled(HEAD)
    # 1 000 rows run for seconds (about 7 s on a fast 2-core machine): far past the 1 s
    # deadline.
    thread, result, _ = _infer_in_background(served.url, rows=1000)
    time.sleep(1.0)
    code, log = served.terminate()
    thread.join(EXIT_LIMIT)
    response = result["response"]
    assert response.status_code == 503, response.status_code
    assert "the server shut down before this request finished" in response.json()["error"]
    assert "--shutdown-timeout" in response.json()["error"]
    assert read_until_closed(stalled).startswith(b"HTTP/1.1 503")
    assert code in (0, -signal.SIGTERM), log
    assert "Traceback" not in log, log
    figures("server shutdown", "requests past the deadline answered 503", 1)
