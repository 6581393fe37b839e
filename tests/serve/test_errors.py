"""Every bad input gets a 4xx ``{"error": ...}`` that says what was wrong and what was expected,
never a 500 and never ``{"detail": ...}``; the server keeps serving after each."""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

import httpx
import numpy as np
import onnx
import pytest

from onnxbridge.serve._settings import ServeSettings

from .conftest import RunningServer, multi_input_model

LIMIT = 64 * 1024


@pytest.fixture(scope="module")
def server(tmp_path_factory, _iris_bundle_master: Path, refusing_bundle_master: Path):
    root = tmp_path_factory.mktemp("errors") / "repo"
    root.mkdir()
    shutil.copytree(_iris_bundle_master, root / "iris")
    shutil.copytree(refusing_bundle_master, root / "iris-lr")
    (root / "multi").mkdir()
    onnx.save(multi_input_model(), root / "multi" / "model.onnx")
    running = RunningServer(ServeSettings(model_path=root, max_request_bytes=LIMIT))
    yield running
    running.stop()


def _row(data=None, **override):
    tensor = {"name": "input", "datatype": "FP32", "shape": [1, 4], "data": data or [1, 2, 3, 4.5]}
    tensor.update(override)
    return {"inputs": [tensor]}


MULTI_OK = [
    {"name": "num", "datatype": "FP64", "shape": [1, 2], "data": [1.0, 2.0]},
    {"name": "cat", "datatype": "BYTES", "shape": [1, 1], "data": ["a"]},
    {"name": "count", "datatype": "INT64", "shape": [1, 1], "data": [3]},
    {"name": "flag", "datatype": "BOOL", "shape": [1, 1], "data": [True]},
]


def _multi(**replace):
    inputs = [dict(t) for t in MULTI_OK]
    for t in inputs:
        t.update(replace.get(t["name"], {}))
    return {"inputs": [t for t in inputs if t.get("name") is not None]}


# (path, json body, expected status, fragments the message must contain)
JSON_CASES = [
    ("iris/infer", _row(name="x"), 422, ["no input 'x'", "'input' (FP32, shape [-1, 4])"]),
    ("iris/infer", _row(datatype="FP64"), 422, ["datatype 'FP64'", "expects FP32"]),
    ("iris/infer", _row(datatype="FLOAT"), 422, ["datatype 'FLOAT'", "expects FP32"]),
    ("iris/infer", _row(shape=[1, 3]), 422, ["shape [1, 3]", "expects [-1, 4]"]),
    ("iris/infer", _row(shape=[4]), 422, ["shape [4]", "expects [-1, 4]"]),
    ("iris/infer", _row(shape=[2, 4]), 422, ["shape [2, 4] needs 8 values", "has 4"]),
    ("iris/infer", _row(shape=[1, -4]), 422, ["'shape' must be a list of non-negative"]),
    ("iris/infer", _row(shape="1x4"), 422, ["'shape' must be a list"]),
    ("iris/infer", _row(shape=[0, 4], data=[]), 422, ["holds no values", "at least one row"]),
    ("iris/infer", _row(data=["a", "b", "c", "d"]), 422, ["FP32 and takes numbers", "strings"]),
    (
        "iris-lr/infer",
        _row(data=[1, None, 3, 4]),
        422,
        ["input 'input' holds 1 NaN value", "'sepal width (cm)' (1)", "refuses missing values"],
    ),
    # null reads as NaN in float data (not strict): only the text is refused.
    ("iris/infer", _row(data=["a", None, 3, 4]), 422, ["takes numbers", "NoneType, int, str"]),
    ("iris/infer", _row(data=[[1, 2], [3, 4, 5]], shape=[1, 4]), 422, ["nested unevenly"]),
    ("iris/infer", _row(data=[[1, 2], [3, 4]]), 422, ["needs 4 values", "nested as [2, 2]"]),
    ("iris/infer", {"inputs": []}, 422, ["'inputs' must be a non-empty list"]),
    ("iris/infer", {"input": []}, 422, ["'inputs' must be a non-empty list"]),
    ("iris/infer", [1, 2], 422, ["must be a JSON object", "got a JSON list"]),
    ("iris/infer", {"inputs": [5]}, 422, ["each input must be an object"]),
    ("iris/infer", {**_row(), "id": 5}, 422, ["'id' must be a string"]),
    ("iris/infer", {**_row(), "parameters": []}, 422, ["'parameters' must be a JSON object"]),
    (
        "iris/infer",
        {**_row(), "parameters": {"binary_data_output": "yes"}},
        422,
        ["'binary_data_output' must be true or false"],
    ),
    (
        "iris/infer",
        {"inputs": _row()["inputs"] * 2},
        422,
        ["input 'input' is given twice"],
    ),
    (
        "iris/infer",
        {**_row(), "outputs": [{"name": "nope"}]},
        422,
        ["no output 'nope'", "'label' (INT64, shape [-1])"],
    ),
    (
        "iris/infer",
        {**_row(), "outputs": [{"name": "label"}, {"name": "label"}]},
        422,
        ["output 'label' is asked for twice", "name each output once"],
    ),
    (
        "iris/infer",
        {**_row(), "outputs": [{"parameters": {}}]},
        422,
        ["has no output None", "'label' (INT64, shape [-1])"],
    ),
    (
        "iris/infer",
        {"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 4]}]},
        422,
        ["neither 'data' nor parameters.binary_data_size"],
    ),
    ("iris/infer", _row(data=[1e39, 1, 1, 1]), 422, ["1e+39 is out of range for FP32"]),
    (
        "iris/infer",
        _row(data=[1, 2, 1e300, 4]),
        422,
        ["input 'input' at index [0, 2]: 1e+300 is out of range for FP32", "finite numbers"],
    ),
    (
        "iris-lr/infer",
        _row(data=[[1, 2, 3, 4], [1, -1e300, 3, 4]], shape=[2, 4]),
        422,
        ["at index [1, 1]: -1e+300 is out of range for FP32"],
    ),
    (
        "iris/predict",
        [
            {
                "sepal length (cm)": 1,
                "sepal width (cm)": 2,
                "petal length (cm)": 1e300,
                "petal width (cm)": 4,
            }
        ],
        422,
        ["bad value in row 1, column 'petal length (cm)': 1e+300 is out of range for float32"],
    ),
    (
        "iris-lr/predict",
        {
            "columns": [
                "sepal length (cm)",
                "sepal width (cm)",
                "petal length (cm)",
                "petal width (cm)",
            ],
            "data": [[1, 2, 3, 4], [1e39, 2, 3, 4]],
        },
        422,
        ["bad value in row 2, column 'sepal length (cm)': 1e+39 is out of range for float32"],
    ),
    (
        "multi/infer",
        _multi(count={"shape": [1, 1], "data": [2**63]}),
        422,
        ["'count' at index [0, 0]: 9223372036854775808 is out of range for INT64"],
    ),
    (
        "multi/infer",
        _multi(count={"data": [-(2**63) - 1]}),
        422,
        ["INT64 and takes integers"],
    ),
    ("multi/infer", _multi(cat={"name": None}), 422, ["needs input 'cat' (BYTES, shape [-1, 1])"]),
    ("multi/infer", _multi(cat={"data": [3]}), 422, ["BYTES and takes strings", "int"]),
    ("multi/infer", _multi(count={"data": [1.5]}), 422, ["INT64 and takes integers", "1.5"]),
    ("multi/infer", _multi(count={"data": [2**70]}), 422, ["INT64 and takes integers"]),
    ("multi/infer", _multi(flag={"data": [1]}), 422, ["BOOL and takes true/false"]),
    (
        "multi/infer",
        _multi(num={"shape": [2, 2], "data": [1, 2, 3, 4]}),
        422,
        ["has 1 along dimension 'N'", "has 2", "needs them equal"],
    ),
    ("nope/infer", _row(), 404, ["unknown model 'nope'", "iris"]),
    ("iris/versions/7/infer", _row(), 404, ["has no version '7'", "versions served: 1"]),
    ("iris/predict", [{"petal length (cm)": 1.0}], 422, ["missing columns", "sepal length"]),
    ("iris/predict", {"rows": []}, 422, ["send records", '"columns"']),
    ("iris/predict", [], 422, ["no rows to predict"]),
    (
        "iris/predict",
        {"columns": ["a", "b"], "data": [[1]]},
        422,
        ["rows of 2 values each"],
    ),
    ("iris/predict", [{"a": [1, 2]}], 422, ["must be numbers, strings, booleans or null"]),
]


def _assert_error(response: httpx.Response, status: int, fragments: list[str]) -> None:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"}, body
    for fragment in fragments:
        assert fragment in body["error"], (fragment, body["error"])


@pytest.mark.parametrize(
    ("path", "body", "status", "fragments"),
    JSON_CASES,
    ids=[f"{i}-{c[0]}" for i, c in enumerate(JSON_CASES)],
)
def test_bad_json_request(server, path, body, status, fragments) -> None:
    response = httpx.post(f"{server.url}/v2/models/{path}", json=body)
    _assert_error(response, status, fragments)
    # ... and the server keeps serving.
    assert httpx.post(f"{server.url}/v2/models/iris/infer", json=_row()).status_code == 200


def test_nan_refused_only_where_the_source_model_refuses_it(server) -> None:
    header = b'{"inputs":[{"name":"input","datatype":"FP32","shape":[1,4],'
    header += b'"parameters":{"binary_data_size":16}}]}'
    nan_row = np.array([[np.nan, 1, 2, 3]], dtype="<f4").tobytes()
    headers = {"Inference-Header-Content-Length": str(len(header))}
    refused = httpx.post(
        f"{server.url}/v2/models/iris-lr/infer", content=header + nan_row, headers=headers
    )
    _assert_error(refused, 422, ["1 NaN value", "refuses missing values"])
    accepted = httpx.post(
        f"{server.url}/v2/models/iris/infer", content=header + nan_row, headers=headers
    )
    assert accepted.status_code == 200, accepted.text
    for value in (np.inf, -np.inf):
        inf_row = np.array([[1, 1, 2, value]], dtype="<f4").tobytes()
        for model in ("iris", "iris-lr"):
            refused = httpx.post(
                f"{server.url}/v2/models/{model}/infer", content=header + inf_row, headers=headers
            )
            _assert_error(
                refused,
                422,
                [f"input 'input' at index [0, 3]: {value} is not a finite number", "FP32 takes"],
            )
    predict = httpx.post(
        f"{server.url}/v2/models/iris-lr/predict",
        json=[
            {
                "sepal length (cm)": None,
                "sepal width (cm)": 1,
                "petal length (cm)": 1,
                "petal width (cm)": 1,
            }
        ],
    )
    _assert_error(predict, 422, ["missing values (NaN)", "?allow_missing=true"])


def _binary(header: dict, blob: bytes, length: int | None = None) -> tuple[bytes, dict]:
    import json

    text = json.dumps(header).encode()
    return text + blob, {
        "Inference-Header-Content-Length": str(len(text) if length is None else length)
    }


def _binary_input(size: int, datatype="FP32", name="input", shape=(1, 4)) -> dict:
    return {
        "inputs": [
            {
                "name": name,
                "datatype": datatype,
                "shape": list(shape),
                "parameters": {"binary_data_size": size},
            }
        ]
    }


def _bool_flags(blob: bytes) -> tuple[bytes, dict]:
    """The multi model's four inputs, ``flag`` [2, 1] BOOL sent as the raw bytes ``blob``."""
    header = _multi(flag={"shape": [2, 1], "data": None})
    for tensor in header["inputs"]:
        if tensor["name"] != "flag":
            tensor["shape"] = [2, *tensor["shape"][1:]]
            tensor["data"] = tensor["data"] * 2
    flag = next(t for t in header["inputs"] if t["name"] == "flag")
    del flag["data"]
    flag["parameters"] = {"binary_data_size": len(blob)}
    return _binary(header, blob)


BINARY_CASES = [
    ("multi", *_bool_flags(bytes([1, 2])), 422, ["'flag' at index [1, 0]: 2 is not a boolean"]),
    ("multi", *_bool_flags(bytes([255, 0])), 422, ["'flag' at index [0, 0]: 255 is not a"]),
    (
        "iris",
        *_binary(_binary_input(16), struct.pack("<4f", 1, 2, float("-inf"), 4)),
        422,
        ["'input' at index [0, 2]: -inf is not a finite number the model can score"],
    ),
    ("iris", *_binary(_binary_input(16), b"\0" * 12), 422, ["runs past the end", "12 bytes left"]),
    (
        "iris",
        *_binary(_binary_input(12), b"\0" * 12),
        422,
        ["needs 16 bytes", "binary_data_size is 12"],
    ),
    ("iris", *_binary(_binary_input(16), b"\0" * 20), 422, ["4 bytes after the JSON header"]),
    (
        "iris",
        *_binary(_binary_input(16), b"\0" * 16, length=10**6),
        400,
        ["Inference-Header-Content-Length is '1000000'"],
    ),
    ("iris", *_binary(_binary_input(16), b"\0" * 16, length=5), 400, ["not valid JSON"]),
    (
        "iris",
        *_binary(_binary_input(-1), b""),
        422,
        ["binary_data_size must be a non-negative integer"],
    ),
    (
        "multi",
        *_binary(
            {
                "inputs": [
                    {
                        "name": "cat",
                        "datatype": "BYTES",
                        "shape": [1, 1],
                        "parameters": {"binary_data_size": 6},
                    },
                ]
            },
            struct.pack("<I", 9) + b"ab",
        ),
        422,
        ["BYTES data must be elements of a 4-byte little-endian length"],
    ),
    (
        "multi",
        *_binary(
            {
                "inputs": [
                    {
                        "name": "cat",
                        "datatype": "BYTES",
                        "shape": [1, 1],
                        "parameters": {"binary_data_size": 6},
                    },
                ]
            },
            struct.pack("<I", 2) + b"\xff\xfe",
        ),
        422,
        ["not UTF-8 text"],
    ),
]


@pytest.mark.parametrize(
    ("model", "content", "headers", "status", "fragments"),
    BINARY_CASES,
    ids=[str(i) for i in range(len(BINARY_CASES))],
)
def test_bad_binary_request(server, model, content, headers, status, fragments) -> None:
    response = httpx.post(f"{server.url}/v2/models/{model}/infer", content=content, headers=headers)
    _assert_error(response, status, fragments)
    assert httpx.get(f"{server.url}/v2/health/live").status_code == 200


@pytest.mark.parametrize("fast", [True, False], ids=["fast-path", "starlette-route"])
def test_malformed_json(server, fast) -> None:
    server.app.fast_infer = fast
    response = httpx.post(f"{server.url}/v2/models/iris/infer", content=b'{"inputs": [')
    _assert_error(response, 400, ["not valid JSON", '{"inputs"'])
    response = httpx.post(f"{server.url}/v2/models/iris/predict", content=b"[{")
    _assert_error(response, 400, ["not valid JSON", "records"])
    response = httpx.post(f"{server.url}/v2/models/iris/infer", content=b"")
    _assert_error(response, 400, ["not valid JSON"])
    server.app.fast_infer = True


@pytest.mark.parametrize("fast", [True, False], ids=["fast-path", "starlette-route"])
def test_body_over_the_limit_is_413_declared_or_streamed(server, fast) -> None:
    server.app.fast_infer = fast
    big = b"[" + b"1," * LIMIT + b"1]"
    response = httpx.post(f"{server.url}/v2/models/iris/infer", content=big)
    _assert_error(
        response, 413, [f"over this server's limit of {LIMIT} bytes", "--max-request-bytes"]
    )

    def chunks():  # no Content-Length: the limit holds while reading
        for _ in range(8):
            yield b" " * (LIMIT // 4)

    response = httpx.post(f"{server.url}/v2/models/iris/infer", content=chunks())
    _assert_error(response, 413, [f"limit of {LIMIT} bytes"])
    assert httpx.post(f"{server.url}/v2/models/iris/infer", json=_row()).status_code == 200
    server.app.fast_infer = True


@pytest.mark.parametrize("fast", [True, False], ids=["fast-path", "starlette-route"])
def test_compressed_body_refused(server, fast) -> None:
    server.app.fast_infer = fast
    response = httpx.post(
        f"{server.url}/v2/models/iris/infer", content=b"x", headers={"Content-Encoding": "gzip"}
    )
    _assert_error(response, 400, ["Content-Encoding 'gzip' is not supported"])
    server.app.fast_infer = True


def test_unknown_route_and_wrong_method(server) -> None:
    _assert_error(httpx.get(f"{server.url}/v1/models"), 404, ["no route '/v1/models'", "/v2"])
    _assert_error(
        httpx.get(f"{server.url}/v2/models/iris/infer"), 405, ["GET is not allowed", "POST"]
    )
    _assert_error(httpx.get(f"{server.url}/v2/models/nope"), 404, ["unknown model 'nope'"])
    _assert_error(httpx.get(f"{server.url}/v2/models/iris/versions/3"), 404, ["no version '3'"])
    _assert_error(httpx.get(f"{server.url}/v2/models/nope/ready"), 404, ["unknown model 'nope'"])


def test_bad_query_flag(server) -> None:
    response = httpx.post(f"{server.url}/v2/models/iris/predict?ignore_extra=maybe", json=[{}])
    _assert_error(response, 422, ["'maybe' is not allowed", "true or false"])


@pytest.mark.parametrize("fast", [True, False], ids=["fast-path", "starlette-route"])
def test_an_empty_outputs_list_asks_for_every_output(server, fast) -> None:
    """``"outputs": []`` was a 500 (a traceback in the log); it names no output, so every
    tensor output is sent, as when the field is left out (Triton does the same)."""
    server.app.fast_infer = fast
    every = httpx.post(f"{server.url}/v2/models/iris/infer", json=_row())
    empty = httpx.post(f"{server.url}/v2/models/iris/infer", json={**_row(), "outputs": []})
    server.app.fast_infer = True
    assert every.status_code == 200, every.text
    assert empty.status_code == 200, empty.text
    assert empty.json() == every.json()
    assert [o["name"] for o in empty.json()["outputs"]] == ["label", "probabilities"]


@pytest.mark.parametrize("parameters", [5, "ab", [1]])
def test_load_parameters_that_are_not_an_object(server, parameters) -> None:
    """A load body with ``parameters`` of another type was a TypeError 500 (or a message
    listing a string's letters)."""
    response = httpx.post(
        f"{server.url}/v2/repository/models/iris/load", json={"parameters": parameters}
    )
    _assert_error(response, 422, ["load 'parameters' must be a JSON object", repr(parameters)])
    assert httpx.post(f"{server.url}/v2/models/iris/infer", json=_row()).status_code == 200


def test_an_error_names_the_query_flag_a_client_sets(server) -> None:
    """The predict endpoint's fix for extra columns is a query flag, not --ignore-extra."""
    row = {
        "sepal length (cm)": 5.1,
        "sepal width (cm)": 3.5,
        "petal length (cm)": 1.4,
        "petal width (cm)": 0.2,
        "flower_id": 7,
    }
    response = httpx.post(f"{server.url}/v2/models/iris/predict", json=[row])
    _assert_error(response, 422, ["unexpected columns: 'flower_id'", "?ignore_extra=true"])
    assert "--ignore-extra" not in response.json()["error"]
    fixed = httpx.post(f"{server.url}/v2/models/iris/predict?ignore_extra=true", json=[row])
    assert fixed.status_code == 200, fixed.text
