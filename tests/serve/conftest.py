"""Fixtures for the server tests: real uvicorn servers on 127.0.0.1 and a free port, real models.

Models: the Iris bundle of tests/conftest.py, a LogisticRegression (its source refuses missing
values) converted by onnxbridge, and a hand-built ONNX graph with four inputs of four types
(FP64, BYTES, INT64, BOOL) and string output, in two versions.
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
import pytest
import uvicorn
from onnx import TensorProto, helper

from onnxbridge import Bundle, convert_bundle, train_bundle
from onnxbridge.serve import create_app
from onnxbridge.serve._connections import uvicorn_options
from onnxbridge.serve._settings import ServeSettings
from wait_support import wait_until


class RunningServer:
    """A uvicorn server in a thread; ``url`` is ``http://127.0.0.1:<port>``."""

    def __init__(self, settings: ServeSettings, parser: str | None = None) -> None:
        self.app = create_app(settings)
        # The options `onnxbridge serve` runs with: the guarded HTTP protocol (deadlines, cap),
        # the shutdown deadline.
        config = uvicorn.Config(
            self.app,
            host="127.0.0.1",
            port=0,
            lifespan="on",
            ws="none",
            **uvicorn_options(settings, in_process=True, parser=parser),
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        started = wait_until(lambda: self.server.started or not self.thread.is_alive(), timeout=60)
        if not (started and self.server.started):
            raise RuntimeError("the test server did not start")
        port = self.server.servers[0].sockets[0].getsockname()[1]
        self.host = f"127.0.0.1:{port}"
        self.url = f"http://{self.host}"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)


@pytest.fixture
def start_server() -> Iterator:
    """Start servers for a test; every one is stopped at its end."""
    servers: list[RunningServer] = []

    def start(path: Path, **settings: object) -> RunningServer:
        server = RunningServer(ServeSettings(model_path=path, **settings))
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


def multi_input_model(offset: int = 0) -> onnx.ModelProto:
    """Inputs ``num`` FP64 [N, 2], ``cat`` BYTES [N, 1], ``count`` INT64 [N, 1], ``flag`` BOOL
    [N, 1]; outputs ``total`` = row sums of num [N], ``code`` = {"a": 1, "b": 2, else 0} + offset
    [N, 1], ``count_plus`` = count + code [N, 1], ``not_flag`` [N, 1], ``cat_echo`` [N, 1]."""
    n = "N"
    inputs = [
        helper.make_tensor_value_info("num", TensorProto.DOUBLE, [n, 2]),
        helper.make_tensor_value_info("cat", TensorProto.STRING, [n, 1]),
        helper.make_tensor_value_info("count", TensorProto.INT64, [n, 1]),
        helper.make_tensor_value_info("flag", TensorProto.BOOL, [n, 1]),
    ]
    outputs = [
        helper.make_tensor_value_info("total", TensorProto.DOUBLE, [n]),
        helper.make_tensor_value_info("code", TensorProto.INT64, [n, 1]),
        helper.make_tensor_value_info("count_plus", TensorProto.INT64, [n, 1]),
        helper.make_tensor_value_info("not_flag", TensorProto.BOOL, [n, 1]),
        helper.make_tensor_value_info("cat_echo", TensorProto.STRING, [n, 1]),
    ]
    nodes = [
        helper.make_node("ReduceSum", ["num", "axes"], ["total"], keepdims=0),
        helper.make_node(
            "LabelEncoder",
            ["cat"],
            ["code"],
            domain="ai.onnx.ml",
            keys_strings=["a", "b"],
            values_int64s=[1 + offset, 2 + offset],
            default_int64=offset,
        ),
        helper.make_node("Add", ["count", "code"], ["count_plus"]),
        helper.make_node("Not", ["flag"], ["not_flag"]),
        helper.make_node("Identity", ["cat"], ["cat_echo"]),
    ]
    axes = helper.make_tensor("axes", TensorProto.INT64, [1], [1])
    graph = helper.make_graph(nodes, "multi", inputs, outputs, initializer=[axes])
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 2)],
    )
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def multi_input_expected(
    num: np.ndarray, cat: list[str], count: np.ndarray, flag: np.ndarray, offset: int = 0
) -> dict[str, np.ndarray]:
    """What :func:`multi_input_model` answers, computed by hand."""
    code = np.array([[{"a": 1, "b": 2}.get(c, 0) + offset] for c in cat], dtype=np.int64)
    return {
        "total": num.sum(axis=1),
        "code": code,
        "count_plus": count + code,
        "not_flag": ~flag,
        "cat_echo": np.array([[c] for c in cat], dtype=object),
    }


@pytest.fixture(scope="session")
def refusing_bundle_master(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An Iris LogisticRegression bundle: its source refuses NaN (metadata ``refused``)."""
    out = tmp_path_factory.mktemp("master") / "iris-lr"
    bundle, _ = train_bundle("iris", "LogisticRegression(max_iter=500)", out)
    convert_bundle(bundle)
    return out


@pytest.fixture
def repository(tmp_path: Path, iris_bundle: Bundle, refusing_bundle_master: Path) -> Path:
    """A model repository: ``iris`` (a bundle), ``iris-lr``, ``multi`` (versions 1 and 2)."""
    root = tmp_path / "repo"
    root.mkdir()
    shutil.copytree(iris_bundle.path, root / "iris")
    shutil.copytree(refusing_bundle_master, root / "iris-lr")
    for version, offset in (("1", 0), ("2", 100)):
        (root / "multi" / version).mkdir(parents=True)
        onnx.save(multi_input_model(offset), root / "multi" / version / "model.onnx")
    return root
