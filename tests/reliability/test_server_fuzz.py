"""Property-based fuzzing of every endpoint: no request gets a 5xx, and nothing the clients send
puts a traceback (or any error) in the server's log.

Requests come from the server's own OpenAPI document (each path and method, its path and query
parameters, a body drawn from its request schema), from mutations of valid requests (keys
dropped, values replaced by other JSON, elements dropped or repeated), from binary-extension
requests with mutated header lengths and blobs, and from raw bodies and headers. One real uvicorn
server on 127.0.0.1 per module; hypothesis is derandomized with no example database, so every
run sends the same requests.
"""

from __future__ import annotations

import copy
import json
import logging
import shutil
import string
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from onnxbridge.serve._settings import ServeSettings
from serve.conftest import RunningServer, multi_input_model

LIMIT = 64 * 1024
EXAMPLES = 1000
FUZZ = settings(
    max_examples=EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
NAMES = ["iris", "multi", "spare"]  # spare: the model load / unload requests may take down


class _Records(logging.Handler):
    """Every log record the server writes while the test runs."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def problems(self) -> list[str]:
        """Records with a traceback, or of level ERROR and above."""
        return [
            self.format(r)
            for r in self.records
            if r.exc_info or r.levelno >= logging.ERROR or "Traceback" in r.getMessage()
        ]


@pytest.fixture(scope="module")
def server(tmp_path_factory, _iris_bundle_master: Path) -> Iterator[RunningServer]:
    root = tmp_path_factory.mktemp("fuzz") / "repo"
    root.mkdir()
    shutil.copytree(_iris_bundle_master, root / "iris")
    shutil.copytree(_iris_bundle_master, root / "spare")
    (root / "multi").mkdir()
    onnx.save(multi_input_model(), root / "multi" / "model.onnx")
    running = RunningServer(
        ServeSettings(model_path=root, max_request_bytes=LIMIT, header_timeout=10)
    )
    yield running
    running.stop()


@pytest.fixture
def log(server: RunningServer) -> Iterator[_Records]:
    # Attached after the server started: uvicorn configures its loggers when it starts.
    handler = _Records()
    loggers = [logging.getLogger(), logging.getLogger("uvicorn")]
    for logger in loggers:
        logger.addHandler(handler)
    yield handler
    for logger in loggers:
        logger.removeHandler(handler)


# JSON values of every kind, and the values most likely to break a check.
SPECIAL = st.sampled_from(
    [
        None, True, 0, -1, 1.5, 2**31, 2**63, 2**64, -(2**63) - 1, 1e308, -0.0, "", "FP32",
        "BYTES", [], {}, [0], [-1, 4], [2**40, 4], [1, 4], [[1, 2]], {"name": None}, {"": {}},
    ]
)  # fmt: skip
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
JSON = st.recursive(
    SCALARS | SPECIAL,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=5,
)
MODEL_NAME = st.sampled_from([*NAMES, "nope"]) | st.text(min_size=1, max_size=6)
HEADER_TEXT = st.text(alphabet=string.ascii_letters + string.digits + "-.+", max_size=12)


def from_schema(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values that follow a JSON schema of the OpenAPI document (the parts it uses)."""
    if "oneOf" in schema:
        return st.one_of([from_schema(s) for s in schema["oneOf"]])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kind = schema.get("type")
    if kind == "object":
        properties = schema.get("properties", {})
        required = set(schema.get("required", []))
        if not properties:
            return st.dictionaries(st.text(max_size=6), JSON, max_size=4)
        return st.fixed_dictionaries(
            {k: from_schema(v) for k, v in properties.items() if k in required},
            optional={k: from_schema(v) for k, v in properties.items() if k not in required},
        )
    if kind == "array":
        return st.lists(from_schema(schema.get("items", {})), max_size=3)
    if kind == "string":
        return st.text(max_size=8) | st.sampled_from(["input", "num", "cat", "label", "FP32"])
    if kind == "integer":
        low = schema.get("minimum", -(2**64))
        return st.integers(min_value=low, max_value=2**64) | st.integers(
            min_value=max(low, 0), max_value=5
        )
    if kind == "boolean":
        return st.booleans()
    return JSON  # a field the schema leaves free ("data")


@st.composite
def mutated(draw: st.DrawFn, value: Any, depth: int = 0) -> Any:
    """``value`` with one change somewhere inside it."""
    if depth < 6 and isinstance(value, dict) and value and draw(st.booleans()):
        key = draw(st.sampled_from(sorted(value)))
        action = draw(st.sampled_from(["drop", "replace", "inside", "inside"]))
        out = dict(value)
        if action == "drop":
            del out[key]
        elif action == "replace":
            out[key] = draw(JSON)
        else:
            out[key] = draw(mutated(value[key], depth + 1))
        return out
    if depth < 6 and isinstance(value, list) and value and draw(st.booleans()):
        index = draw(st.integers(0, len(value) - 1))
        action = draw(st.sampled_from(["drop", "repeat", "replace", "inside", "inside"]))
        out = list(value)
        if action == "drop":
            del out[index]
        elif action == "repeat":
            out.insert(index, copy.deepcopy(value[index]))
        elif action == "replace":
            out[index] = draw(JSON)
        else:
            out[index] = draw(mutated(value[index], depth + 1))
        return out
    return draw(JSON)


IRIS_ROW = {"name": "input", "datatype": "FP32", "shape": [1, 4], "data": [5.1, 3.5, 1.4, 0.2]}
VALID_INFER = {
    "iris": {
        "id": "a",
        "parameters": {"binary_data_output": False},
        "inputs": [IRIS_ROW],
        "outputs": [
            {"name": "label"},
            {"name": "probabilities", "parameters": {"binary_data": True}},
        ],
    },
    "multi": {
        "inputs": [
            {"name": "num", "datatype": "FP64", "shape": [2, 2], "data": [[1.0, 2.0], [3.0, 4.0]]},
            {"name": "cat", "datatype": "BYTES", "shape": [2, 1], "data": ["a", "b"]},
            {"name": "count", "datatype": "INT64", "shape": [2, 1], "data": [3, 4]},
            {"name": "flag", "datatype": "BOOL", "shape": [2, 1], "data": [True, False]},
        ],
        "outputs": [{"name": "total"}, {"name": "cat_echo"}],
    },
}
VALID_PREDICT = [
    [{"sepal length (cm)": 5.1, "sepal width (cm)": 3.5, "petal length (cm)": 1.4,
      "petal width (cm)": 0.2}],
    {"columns": ["sepal length (cm)", "sepal width (cm)", "petal length (cm)",
                 "petal width (cm)"], "data": [[5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3]]},
]  # fmt: skip


def _model_path(name: str, version: str | None, endpoint: str) -> str:
    path = f"/v2/models/{quote(name, safe='')}"
    if version is not None:
        path += f"/versions/{quote(version, safe='')}"
    return path + endpoint


@st.composite
def schema_requests(draw: st.DrawFn, document: dict[str, Any]) -> tuple[str, str, dict, bytes]:
    """A request to one route of the OpenAPI document, with a body from its schema."""
    path, operations = draw(st.sampled_from(sorted(document["paths"].items())))
    method = draw(st.sampled_from(sorted(operations)))
    operation = operations[method]
    url = path
    headers: dict[str, str] = {}
    query: list[str] = []
    for parameter in operation.get("parameters", []):
        where = parameter["in"]
        if where == "path" and "/repository/" in path:
            # Load and unload only the spare model: the others must stay up to be fuzzed.
            name = draw(st.sampled_from(["spare", "nope"]) | st.text(min_size=1, max_size=6))
            url = url.replace("{name}", quote(name, safe=""))
        elif where == "path":
            name = draw(
                MODEL_NAME
                if parameter["name"] == "name"
                else st.sampled_from(["1", "2"]) | st.text(min_size=1, max_size=4)
            )
            url = url.replace("{" + parameter["name"] + "}", quote(name, safe=""))
        elif where == "query" and draw(st.booleans()):
            value = draw(st.sampled_from(["true", "false", "1", "0"]) | HEADER_TEXT)
            query.append(f"{parameter['name']}={quote(value)}")
        elif where == "header" and draw(st.booleans()):
            headers[parameter["name"]] = str(draw(from_schema(parameter["schema"]) | HEADER_TEXT))
    if query:
        url += "?" + "&".join(query)
    body = b""
    if "requestBody" in operation:
        schema = operation["requestBody"]["content"]["application/json"]["schema"]
        body = json.dumps(draw(from_schema(schema))).encode()
    elif method == "post" and draw(st.booleans()):
        body = json.dumps(
            draw(st.fixed_dictionaries({}, optional={"parameters": JSON, "ready": JSON}) | JSON)
        ).encode()
    return method.upper(), url, headers, body


@st.composite
def mutated_requests(draw: st.DrawFn) -> tuple[str, str, dict, bytes]:
    """A valid request of some endpoint with one to three changes."""
    kind = draw(st.sampled_from(["infer", "infer", "infer", "predict", "load", "index"]))
    if kind == "infer":
        model = draw(st.sampled_from(["iris", "multi"]))
        request: Any = VALID_INFER[model]
        url = _model_path(model, draw(st.none() | st.just("1")), "/infer")
    elif kind == "predict":
        request = draw(st.sampled_from(VALID_PREDICT))
        url = _model_path("iris", None, "/predict")
    elif kind == "load":
        request = {"parameters": {}}
        url = "/v2/repository/models/spare/load"
    else:
        request = {"ready": True}
        url = "/v2/repository/index"
    for _ in range(draw(st.integers(1, 3))):
        request = draw(mutated(request))
    return "POST", url, {}, json.dumps(request).encode()


@st.composite
def binary_requests(draw: st.DrawFn) -> tuple[str, str, dict, bytes]:
    """Binary tensor data extension: a JSON header, raw tensors, and a header length; any of
    them changed."""
    rows = draw(st.integers(1, 3))
    blob = struct.pack(f"<{rows * 4}f", *([1.5] * rows * 4))
    header: Any = {
        "inputs": [
            {
                "name": "input",
                "datatype": "FP32",
                "shape": [rows, 4],
                "parameters": {"binary_data_size": len(blob)},
            }
        ],
        "parameters": {"binary_data_output": True},
    }
    if draw(st.booleans()):
        header = draw(mutated(header))
    text = json.dumps(header).encode()
    if draw(st.booleans()):
        blob = draw(st.sampled_from([b"", blob[:-1], blob + b"\0", blob[: len(blob) // 2]]))
    length: Any = len(text)
    if draw(st.booleans()):
        length = draw(
            st.integers(-5, len(text) + len(blob) + 5)
            | st.sampled_from(["", "x", "1e3", str(2**70)])
        )
    return (
        "POST",
        "/v2/models/iris/infer",
        {"Inference-Header-Content-Length": str(length)},
        text + blob,
    )


@st.composite
def raw_requests(draw: st.DrawFn) -> tuple[str, str, dict, bytes]:
    """Bytes that may not be JSON at all, with odd content headers, to any route."""
    method = draw(st.sampled_from(["GET", "POST", "PUT", "DELETE"]))
    url = draw(
        st.sampled_from(
            [
                "/v2/models/iris/infer",
                "/v2/models/iris/predict",
                "/v2/models/multi/versions/1/infer",
                "/v2/repository/index",
                "/v2/repository/models/spare/unload",
                "/v2/models/iris",
                "/v2",
                "/metrics",
            ]
        )
    )
    headers: dict[str, str] = {}
    if draw(st.booleans()):
        headers["Content-Type"] = draw(
            st.sampled_from(
                ["text/plain", "application/octet-stream", "application/json; charset=latin-1"]
            )
            | HEADER_TEXT
        )
    if draw(st.integers(0, 5)) == 0:
        headers["Content-Encoding"] = draw(
            st.sampled_from(["gzip", "identity", "br"]) | HEADER_TEXT
        )
    body = draw(
        st.binary(max_size=64)
        | st.sampled_from(
            [b"", b"{", b"[", b"null", b"\xff\xfe", b"{}" * 10, b"[" * 2000, b" " * (LIMIT + 1)]
        )
    )
    return method, url, headers, body


def _send(client: httpx.Client, request: tuple[str, str, dict, bytes]) -> httpx.Response:
    method, url, headers, body = request
    return client.request(method, url, headers=headers, content=body or None)


def _check(response: httpx.Response, request: tuple[str, str, dict, bytes]) -> None:
    assert response.status_code < 500, (request, response.status_code, response.text)
    if response.status_code >= 400 and response.headers.get("content-type") == "application/json":
        body = response.json()
        assert isinstance(body, dict) and isinstance(body.get("error"), str), (request, body)
        assert "\n" not in body["error"], (request, body)  # one line, never a traceback


def _run(server: RunningServer, strategy: st.SearchStrategy, figures, log: _Records) -> None:
    sent = 0
    statuses: dict[int, int] = {}
    with httpx.Client(base_url=server.url, timeout=30) as client:

        @FUZZ
        @given(strategy)
        def property(request: tuple[str, str, dict, bytes]) -> None:
            nonlocal sent
            response = _send(client, request)
            sent += 1
            statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
            _check(response, request)

        property()
        # Whatever was sent, the models still answer.
        client.post("/v2/repository/models/spare/load")
        for name in NAMES:
            assert client.get(f"/v2/models/{name}/ready").status_code == 200
        answer = client.post("/v2/models/iris/infer", json={"inputs": [IRIS_ROW]})
        assert answer.json()["outputs"][0]["data"] == [0]
    problems = log.problems()
    assert not problems, "\n".join(problems[:5])
    assert sent >= EXAMPLES // 2  # hypothesis ran the property, not a handful of examples
    figures("server fuzz", "requests", sent)
    figures("server fuzz", "5xx", sum(n for s, n in statuses.items() if s >= 500))
    figures("server fuzz", "tracebacks logged", len(problems))
    figures("server fuzz", "4xx", sum(n for s, n in statuses.items() if 400 <= s < 500))


def test_fuzz_requests_from_the_openapi_document(server, log, figures) -> None:
    document = httpx.get(f"{server.url}/openapi.json").json()
    assert len(document["paths"]) >= 15  # every route is in it
    _run(server, schema_requests(document), figures, log)


def test_fuzz_mutated_valid_requests(server, log, figures) -> None:
    _run(server, mutated_requests(), figures, log)


def test_fuzz_binary_and_raw_requests(server, log, figures) -> None:
    _run(server, binary_requests() | raw_requests(), figures, log)
