"""The server driven by tritonclient (JSON and binary tensor data) and plain HTTP: health,
metadata, inference on a forest and on a hand-built four-input model, predict, metrics, docs."""

from __future__ import annotations

from pathlib import Path

import httpx
import numpy as np
import pandas as pd
import pytest
import tritonclient.http as triton

from onnxbridge import Bundle, Predictor

from .conftest import multi_input_expected

IRIS_ROWS = np.array([[5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3], [5.9, 3.0, 4.2, 1.5]])


@pytest.fixture
def iris_server(start_server, iris_bundle: Bundle):
    return start_server(iris_bundle.path)


@pytest.fixture
def repo_server(start_server, repository: Path):
    return start_server(repository)


def test_health_and_server_metadata(iris_server) -> None:
    client = triton.InferenceServerClient(iris_server.host)
    assert client.is_server_live()
    assert client.is_server_ready()
    meta = client.get_server_metadata()
    assert meta["name"] == "onnxbridge"
    assert {"binary_tensor_data", "model_repository"} <= set(meta["extensions"])


def test_model_metadata_lists_v2_datatypes_and_variable_dims(repo_server) -> None:
    client = triton.InferenceServerClient(repo_server.host)
    meta = client.get_model_metadata("iris")
    assert meta["name"] == "iris" and meta["versions"] == ["1"]
    assert meta["platform"] == "onnxruntime_onnx"
    assert meta["inputs"] == [{"name": "input", "datatype": "FP32", "shape": [-1, 4]}]
    assert {o["name"]: (o["datatype"], o["shape"]) for o in meta["outputs"]} == {
        "label": ("INT64", [-1]),
        "probabilities": ("FP32", [-1, 3]),
    }
    multi = client.get_model_metadata("multi")
    assert multi["versions"] == ["1", "2"]
    assert [(i["name"], i["datatype"], i["shape"]) for i in multi["inputs"]] == [
        ("num", "FP64", [-1, 2]),
        ("cat", "BYTES", [-1, 1]),
        ("count", "INT64", [-1, 1]),
        ("flag", "BOOL", [-1, 1]),
    ]
    assert client.get_model_metadata("multi", model_version="1")["name"] == "multi"
    assert client.is_model_ready("multi", model_version="2")


@pytest.mark.parametrize("fast", [True, False], ids=["fast-path", "starlette-route"])
@pytest.mark.parametrize("binary", [False, True], ids=["json", "binary"])
def test_tritonclient_infer_matches_predictor(
    iris_server, iris_bundle: Bundle, binary, fast
) -> None:
    iris_server.app.fast_infer = fast
    client = triton.InferenceServerClient(iris_server.host)
    rows = IRIS_ROWS.astype(np.float32)
    inp = triton.InferInput("input", list(rows.shape), "FP32")
    inp.set_data_from_numpy(rows, binary_data=binary)
    outputs = [
        triton.InferRequestedOutput("label", binary_data=binary),
        triton.InferRequestedOutput("probabilities", binary_data=binary),
    ]
    result = client.infer("iris-rf", [inp], outputs=outputs, request_id="req-7")
    expected_label, expected_proba = Predictor(iris_bundle.onnx_path).run({"input": rows})
    np.testing.assert_array_equal(result.as_numpy("label"), expected_label)
    np.testing.assert_allclose(result.as_numpy("probabilities"), expected_proba, rtol=0, atol=1e-7)
    response = result.get_response()
    assert response["id"] == "req-7"
    assert response["model_name"] == "iris-rf" and response["model_version"] == "1"


@pytest.mark.parametrize("binary", [False, True], ids=["json", "binary"])
def test_multi_input_mixed_types_fed_by_name(repo_server, binary) -> None:
    client = triton.InferenceServerClient(repo_server.host)
    num = np.array([[1.5, 2.25], [-3.0, 0.5], [1e10, 1.0]])
    cat = ["a", "b", "zzz ünïcode"]
    count = np.array([[5], [7], [-2]], dtype=np.int64)
    flag = np.array([[True], [False], [True]])
    tensors = {
        "flag": ("BOOL", flag),
        "count": ("INT64", count),
        "cat": ("BYTES", np.array([[c.encode()] for c in cat], dtype=object)),
        "num": ("FP64", num),
    }
    inputs = []
    for name, (datatype, array) in tensors.items():  # not in graph order: matched by name
        inp = triton.InferInput(name, list(array.shape), datatype)
        inp.set_data_from_numpy(array, binary_data=binary)
        inputs.append(inp)
    outputs = [
        triton.InferRequestedOutput(n, binary_data=binary)
        for n in ("total", "code", "count_plus", "not_flag", "cat_echo")
    ]
    for version, offset in (("1", 0), ("2", 100), ("", 100)):
        result = client.infer("multi", inputs, model_version=version, outputs=outputs)
        expected = multi_input_expected(num, cat, count, flag, offset)
        np.testing.assert_allclose(result.as_numpy("total"), expected["total"], rtol=1e-15)
        for name in ("code", "count_plus", "not_flag"):
            np.testing.assert_array_equal(result.as_numpy(name), expected[name], err_msg=name)
        echoed = [
            [v.decode() if isinstance(v, bytes) else v for v in row]
            for row in result.as_numpy("cat_echo").tolist()
        ]
        assert echoed == [[c] for c in cat]
        assert result.get_response()["model_version"] == (version or "2")


def test_requested_outputs_and_binary_data_output(iris_server) -> None:
    body = {
        "inputs": [
            {"name": "input", "datatype": "FP32", "shape": [1, 4], "data": [[5.1, 3.5, 1.4, 0.2]]}
        ],
        "outputs": [{"name": "probabilities"}],
    }
    answer = httpx.post(f"{iris_server.url}/v2/models/iris-rf/infer", json=body).json()
    assert [o["name"] for o in answer["outputs"]] == ["probabilities"]
    assert answer["outputs"][0]["shape"] == [1, 3]
    assert "id" not in answer
    # binary_data_output: every output as raw bytes after the JSON header.
    body = {**body, "outputs": None, "parameters": {"binary_data_output": True}}
    body.pop("outputs")
    response = httpx.post(f"{iris_server.url}/v2/models/iris-rf/infer", json=body)
    length = int(response.headers["inference-header-content-length"])
    header = httpx.Response(200, content=response.content[:length]).json()
    sizes = [o["parameters"]["binary_data_size"] for o in header["outputs"]]
    assert sizes == [8, 12]  # one INT64 label, three FP32 probabilities
    assert len(response.content) == length + sum(sizes)
    label = np.frombuffer(response.content[length : length + 8], dtype="<i8")
    assert label.tolist() == [0]


def test_predict_records_and_split_answer_by_class_name(iris_server, iris_bundle) -> None:
    names = Predictor(iris_bundle.onnx_path).feature_names
    frame = pd.DataFrame(IRIS_ROWS, columns=names)
    expected = Predictor(iris_bundle.onnx_path).predict(frame)
    records = frame.to_dict(orient="records")
    split = {"columns": names, "data": IRIS_ROWS.tolist()}
    for body in (records, split):
        answer = httpx.post(f"{iris_server.url}/v2/models/iris-rf/predict", json=body).json()
        assert answer["model_name"] == "iris-rf"
        predictions = answer["predictions"]
        assert [p["label"] for p in predictions] == expected.labels.tolist()
        for row, proba in zip(predictions, expected.probabilities, strict=True):
            assert list(row["probabilities"]) == [str(c) for c in expected.classes]
            np.testing.assert_allclose(list(row["probabilities"].values()), proba, atol=1e-7)


def test_predict_with_string_class_names(start_server, tmp_path, classification_csv) -> None:
    from onnxbridge import convert_bundle, train_bundle

    bundle, _ = train_bundle(
        str(classification_csv), "LogisticRegression()", tmp_path / "churn", target="segment"
    )
    convert_bundle(bundle)
    server = start_server(bundle.path)
    answer = httpx.post(
        f"{server.url}/v2/models/churn/predict", json=[{"tenure": 2.0, "spend": 1.0}]
    ).json()
    (row,) = answer["predictions"]
    assert row["label"] == "churn"
    assert sorted(row["probabilities"]) == ["churn", "stay", "upgrade"]
    assert abs(sum(row["probabilities"].values()) - 1) < 1e-6


def test_metrics_count_requests_errors_and_latency_per_model(iris_server) -> None:
    url = f"{iris_server.url}/v2/models/iris-rf/infer"
    good = {"inputs": [{"name": "input", "datatype": "FP32", "shape": [2, 4], "data": [1.0] * 8}]}
    for _ in range(3):
        assert httpx.post(url, json=good).status_code == 200
    assert httpx.post(url, json={"inputs": []}).status_code == 422
    text = httpx.get(f"{iris_server.url}/metrics").text
    assert 'onnxbridge_requests_total{endpoint="infer",model="iris-rf"} 4.0' in text
    assert (
        'onnxbridge_request_errors_total{endpoint="infer",model="iris-rf",status="422"} 1.0' in text
    )
    assert 'onnxbridge_request_duration_seconds_count{endpoint="infer",model="iris-rf"} 4.0' in text
    assert 'onnxbridge_inference_rows_total{model="iris-rf"} 6.0' in text


def test_openapi_document_and_offline_docs_page(iris_server) -> None:
    doc = httpx.get(f"{iris_server.url}/openapi.json").json()
    assert doc["openapi"].startswith("3.")
    for path in (
        "/v2/models/{name}/infer",
        "/v2/repository/models/{name}/load",
        "/v2/health/ready",
    ):
        assert path in doc["paths"]
    page = httpx.get(f"{iris_server.url}/docs")
    assert page.status_code == 200 and "openapi.json" in page.text
    # Works with no network: nothing loaded from elsewhere.
    assert "http://" not in page.text and "https://" not in page.text
    assert "<script src" not in page.text and "<link" not in page.text


def test_single_onnx_file_with_a_scalar_input(start_server, tmp_path: Path) -> None:
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["y"])],
        "neg",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, tmp_path / "neg.onnx")
    server = start_server(tmp_path / "neg.onnx")
    body = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [], "data": [3.5]}]}
    answer = httpx.post(f"{server.url}/v2/models/neg/infer", json=body).json()
    assert answer["outputs"] == [{"name": "y", "datatype": "FP32", "shape": [], "data": [-3.5]}]
    bad = httpx.post(
        f"{server.url}/v2/models/neg/infer",
        json={"inputs": [{"name": "x", "datatype": "FP32", "shape": [1], "data": [3.5]}]},
    )
    assert bad.status_code == 422 and "expects [] (-1: any size)" in bad.json()["error"]
