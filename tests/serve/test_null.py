"""``null`` in the float data of a v2 JSON infer request is a missing value (NaN) where the
model's source takes one in that column, refused (422, naming input and column) where it does
not, and refused everywhere by a server run with ``strict_v2``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import numpy as np
import pandas as pd
import pytest
import tritonclient.http as triton
from sklearn.compose import ColumnTransformer
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

from onnxbridge import Predictor, convert_estimator
from wait_support import free_port, wait_for_ready

ROWS = pd.DataFrame({"a": [0.5, -1.0, 2.0], "b": [1.5, np.nan, 0.0], "city": ["paris", "", "oslo"]})


@pytest.fixture(scope="module")
def mixed_model(tmp_path_factory) -> Path:
    """A model whose source refuses NaN in 'a' (no imputer) and takes it in 'b' and 'city'."""
    rng = np.random.RandomState(0)
    n = 300
    X = pd.DataFrame(
        {
            "a": rng.randn(n),
            "b": rng.randn(n),
            "city": rng.choice(["paris", "rome", "oslo"], n).astype(object),
        }
    )
    X.loc[rng.rand(n) < 0.1, "b"] = np.nan
    X.loc[rng.rand(n) < 0.1, "city"] = np.nan
    y = ((X["a"] > 0) | X["city"].isna()).astype(int)
    pipe = make_pipeline(
        ColumnTransformer(
            [
                ("a", StandardScaler(), ["a"]),
                ("b", make_pipeline(SimpleImputer(), StandardScaler()), ["b"]),
                ("city", OneHotEncoder(handle_unknown="ignore"), ["city"]),
            ]
        ),
        LogisticRegression(),
    ).fit(X, y)
    result = convert_estimator(pipe, X.head(50))
    assert result.metadata.missing_by_column == {
        "a": "refused",
        "b": "accepted",
        "city": "accepted",
    }
    return result.save(tmp_path_factory.mktemp("null") / "mixed.onnx")


def _request(a: list, b: list, city: list) -> dict:
    n = len(a)
    return {
        "inputs": [
            {"name": "a", "datatype": "FP32", "shape": [n, 1], "data": a},
            {"name": "b", "datatype": "FP32", "shape": [n, 1], "data": b},
            {"name": "city", "datatype": "BYTES", "shape": [n, 1], "data": city},
        ]
    }


def _outputs(body: dict) -> dict[str, np.ndarray]:
    return {o["name"]: np.asarray(o["data"]).reshape(o["shape"]) for o in body["outputs"]}


def test_null_is_a_missing_value_where_the_source_takes_one(start_server, mixed_model) -> None:
    server = start_server(mixed_model)
    body = _request([0.5, -1.0, 2.0], [1.5, None, 0.0], ["paris", "", "oslo"])
    response = httpx.post(f"{server.url}/v2/models/mixed/infer", json=body)
    assert response.status_code == 200, response.text
    expected = Predictor(mixed_model).predict(ROWS)
    got = _outputs(response.json())
    np.testing.assert_array_equal(got["label"], expected.labels)
    np.testing.assert_allclose(got["probabilities"], expected.probabilities, rtol=0, atol=1e-7)


def test_null_where_the_source_refuses_it_names_input_and_column(start_server, mixed_model) -> None:
    server = start_server(mixed_model)
    body = _request([0.5, None, None], [1.5, 1.0, 0.0], ["paris", "rome", "oslo"])
    response = httpx.post(f"{server.url}/v2/models/mixed/infer", json=body)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert set(response.json()) == {"error"}
    assert "input 'a' holds 2 NaN values" in error
    assert "column 'a' (2)" in error
    assert "refuses missing values" in error
    # ... and the server keeps serving.
    ok = _request([0.5], [1.0], ["rome"])
    assert httpx.post(f"{server.url}/v2/models/mixed/infer", json=ok).status_code == 200


def test_binary_nan_is_judged_per_column_too(start_server, mixed_model) -> None:
    server = start_server(mixed_model)

    def send(a: float, b: float) -> httpx.Response:
        blob = np.array([[a]], dtype="<f4").tobytes() + np.array([[b]], dtype="<f4").tobytes()
        header = {
            "inputs": [
                {
                    "name": "a",
                    "datatype": "FP32",
                    "shape": [1, 1],
                    "parameters": {"binary_data_size": 4},
                },
                {
                    "name": "b",
                    "datatype": "FP32",
                    "shape": [1, 1],
                    "parameters": {"binary_data_size": 4},
                },
                {"name": "city", "datatype": "BYTES", "shape": [1, 1], "data": ["rome"]},
            ]
        }
        text = json.dumps(header).encode()
        return httpx.post(
            f"{server.url}/v2/models/mixed/infer",
            content=text + blob,
            headers={"Inference-Header-Content-Length": str(len(text))},
        )

    assert send(1.0, np.nan).status_code == 200
    refused = send(np.nan, 1.0)
    assert refused.status_code == 422
    assert "column 'a' (1)" in refused.json()["error"]


def test_strict_v2_refuses_null(start_server, mixed_model) -> None:
    server = start_server(mixed_model, strict_v2=True)
    body = _request([0.5], [None], ["paris"])
    response = httpx.post(f"{server.url}/v2/models/mixed/infer", json=body)
    assert response.status_code == 422, response.text
    assert "null is not a value" in response.json()["error"]


@pytest.mark.parametrize("strict", [False, True], ids=["default", "strict-v2"])
def test_tritonclient_request_is_answered_either_way(start_server, mixed_model, strict) -> None:
    server = start_server(mixed_model, strict_v2=strict)
    client = triton.InferenceServerClient(server.host)
    rows = ROWS.assign(b=[1.5, 1.0, 0.0], city=["paris", "rome", "oslo"])
    inputs = []
    for name, datatype in (("a", "FP32"), ("b", "FP32"), ("city", "BYTES")):
        values = rows[[name]].to_numpy()
        values = values.astype(np.float32) if datatype == "FP32" else values.astype(object)
        tensor = triton.InferInput(name, list(values.shape), datatype)
        tensor.set_data_from_numpy(values, binary_data=False)
        inputs.append(tensor)
    result = client.infer("mixed", inputs)
    expected = Predictor(mixed_model).predict(rows)
    np.testing.assert_array_equal(result.as_numpy("label"), expected.labels)


@pytest.mark.parametrize("strict", [False, True], ids=["default", "strict-v2"])
def test_serve_command_strict_v2_flag(iris_bundle, strict: bool) -> None:
    """`onnxbridge serve --strict-v2`: the Iris forest takes NaN, so only the flag refuses null."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONNXBRIDGE_SERVE_")}
    command = [sys.executable, "-m", "onnxbridge._cli.main", "serve", str(iris_bundle.path)]
    command += ["--port", str(port)] + (["--strict-v2"] if strict else [])
    process = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_ready(process, url)
        tensor = {"name": "input", "datatype": "FP32", "shape": [1, 4]}
        body = {"inputs": [{**tensor, "data": [6.7, None, 5.2, 2.3]}]}
        answer = httpx.post(f"{url}/v2/models/iris-rf/infer", json=body)
    finally:
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=30)
    if strict:
        assert answer.status_code == 422, answer.text
        assert "null is not a value" in answer.json()["error"]
    else:
        assert answer.status_code == 200, answer.text
        expected = Predictor(iris_bundle.onnx_path).predict(
            np.array([[6.7, np.nan, 5.2, 2.3]], dtype=np.float32)
        )
        assert answer.json()["outputs"][0]["data"] == expected.labels.tolist()


def test_inputs_of_one_table_with_different_row_counts_are_a_422(start_server, mixed_model):
    # onnxbridge's converter leaves the rows dimension unnamed; the inputs are still columns of
    # one table, so the server says which disagree instead of ONNX Runtime failing mid-graph.
    server = start_server(mixed_model)
    body = _request([0.5, -1.0], [1.5, 0.0], ["paris"])
    body["inputs"][2]["shape"] = [1, 1]
    response = httpx.post(f"{server.url}/v2/models/mixed/infer", json=body)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert "input 'city' has 1 along dimension 'rows' but input 'a' has 2" in error
    ok = _request([1.0], [1.0], ["oslo"])
    assert httpx.post(f"{server.url}/v2/models/mixed/infer", json=ok).status_code == 200
