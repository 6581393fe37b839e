"""The model repository: layouts, name checks, a model that fails to load, load and unload
through tritonclient, and reloads while requests run."""

from __future__ import annotations

import threading
from pathlib import Path

import httpx
import numpy as np
import onnx
import pytest
import tritonclient.http as triton
from tritonclient.utils import InferenceServerException

from onnxbridge.errors import ModelNotFoundError, RepositoryError
from onnxbridge.serve._repository import ModelRepository, check_model_name, detect_layout

from .conftest import multi_input_model


def test_layouts(tmp_path: Path, iris_bundle, repository: Path) -> None:
    assert detect_layout(iris_bundle.onnx_path) == "file"
    assert detect_layout(iris_bundle.path) == "bundle"
    assert detect_layout(repository) == "repository"
    assert ModelRepository(iris_bundle.onnx_path).model_names() == ["model"]
    assert ModelRepository(iris_bundle.path).model_names() == ["iris-rf"]
    assert ModelRepository(repository).model_names() == ["iris", "iris-lr", "multi"]
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(RepositoryError, match=r"is not a \.onnx file"):
        detect_layout(tmp_path / "notes.txt")
    with pytest.raises(RepositoryError, match="does not exist"):
        detect_layout(tmp_path / "missing")


@pytest.mark.parametrize(
    "name", ["..", "a/../b", "../etc", ".hidden", "a b", "", "x" * 129, "a..b"]
)
def test_names_that_could_escape_are_refused(name: str) -> None:
    with pytest.raises(RepositoryError, match="is not allowed"):
        check_model_name(name)


def test_symlink_out_of_the_repository_is_refused(
    tmp_path: Path, repository: Path, iris_bundle
) -> None:
    (repository / "escape").symlink_to(iris_bundle.path)
    repo = ModelRepository(repository)
    with pytest.raises(RepositoryError, match="outside the repository"):
        repo.load("escape")
    with pytest.raises(ModelNotFoundError, match="has no folder of that name"):
        repo.load("absent")


def test_broken_model_reported_without_taking_down_the_others(
    start_server, repository: Path
) -> None:
    (repository / "broken").mkdir()
    (repository / "broken" / "model.onnx").write_bytes(b"not an onnx file")
    (repository / "empty").mkdir()
    server = start_server(repository)
    client = triton.InferenceServerClient(server.host)
    assert not client.is_server_ready()  # strict readiness: a model failed
    ready = httpx.get(f"{server.url}/v2/health/ready")
    assert ready.status_code == 503
    assert "broken: model 'broken' version 1 failed to load" in ready.json()["error"]
    assert "empty: model 'empty': folder" in ready.json()["error"]
    assert not client.is_model_ready("broken")
    answer = httpx.get(f"{server.url}/v2/models/broken/ready")
    assert answer.status_code == 503 and answer.json()["ready"] is False
    assert "is not a loadable ONNX model" in answer.json()["error"]
    infer = httpx.post(f"{server.url}/v2/models/broken/infer", json={"inputs": []})
    assert infer.status_code == 503
    assert (
        "not ready" in infer.json()["error"]
        and "POST /v2/repository/models/broken/load" in infer.json()["error"]
    )
    index = {row["name"]: row for row in client.get_model_repository_index()}
    assert (
        index["broken"]["state"] == "UNAVAILABLE" and "failed to load" in index["broken"]["reason"]
    )
    assert index["iris"]["state"] == "READY"
    assert client.is_model_ready("iris")
    # load reports the error, and the server keeps serving the others.
    with pytest.raises(InferenceServerException, match="failed to load"):
        client.load_model("broken")
    response = httpx.post(f"{server.url}/v2/repository/models/broken/load")
    assert response.status_code == 400 and set(response.json()) == {"error"}
    assert client.is_model_ready("multi")
    # Fix it on disk and load it: the server becomes ready without a restart.
    onnx.save(multi_input_model(), repository / "broken" / "model.onnx")
    (repository / "empty" / "model.onnx").write_bytes(
        (repository / "broken" / "model.onnx").read_bytes()
    )
    client.load_model("broken")
    client.load_model("empty")
    assert client.is_model_ready("broken") and client.is_server_ready()


def test_non_strict_readiness(start_server, repository: Path) -> None:
    (repository / "broken").mkdir()
    (repository / "broken" / "model.onnx").write_bytes(b"junk")
    server = start_server(repository, strict_readiness=False)
    assert triton.InferenceServerClient(server.host).is_server_ready()


def test_load_errors(start_server, repository: Path, iris_bundle) -> None:
    server = start_server(repository)
    url = f"{server.url}/v2/repository/models"
    missing = httpx.post(f"{url}/nope/load")
    assert missing.status_code == 404 and "has no folder of that name" in missing.json()["error"]
    bad = httpx.post(f"{url}/a..b/load")
    assert bad.status_code == 400 and "model name 'a..b' is not allowed" in bad.json()["error"]
    (repository / "escape").symlink_to(iris_bundle.path)
    escape = httpx.post(f"{url}/escape/load")
    assert escape.status_code == 400 and "outside the repository" in escape.json()["error"]
    params = httpx.post(f"{url}/iris/load", json={"parameters": {"config": "{}"}})
    assert params.status_code == 422 and "not supported" in params.json()["error"]
    unload = httpx.post(f"{url}/nope/unload")
    assert unload.status_code == 404 and "is not loaded" in unload.json()["error"]


def test_unload_then_load(start_server, repository: Path) -> None:
    server = start_server(repository)
    client = triton.InferenceServerClient(server.host)
    client.unload_model("iris")
    assert not client.is_model_ready("iris")
    response = httpx.get(f"{server.url}/v2/models/iris")
    assert response.status_code == 404 and "unknown model 'iris'" in response.json()["error"]
    index = {row["name"]: row["state"] for row in client.get_model_repository_index()}
    assert index == {"iris": "UNLOADED", "iris-lr": "READY", "multi": "READY"}
    assert client.is_server_ready()  # an unloaded model does not count against readiness
    client.load_model("iris")
    assert client.is_model_ready("iris")


def _multi_inputs(n: int) -> list:
    values = {
        "num": ("FP64", np.ones((n, 2))),
        "cat": ("BYTES", np.array([[b"a"]] * n, dtype=object)),
        "count": ("INT64", np.zeros((n, 1), dtype=np.int64)),
        "flag": ("BOOL", np.zeros((n, 1), dtype=bool)),
    }
    inputs = []
    for name, (datatype, array) in values.items():
        inp = triton.InferInput(name, list(array.shape), datatype)
        inp.set_data_from_numpy(array, binary_data=True)
        inputs.append(inp)
    return inputs


def test_reload_and_unload_while_requests_run(start_server, repository: Path) -> None:
    """Requests during reloads all succeed, each answered by one complete model version."""
    server = start_server(repository)
    (repository / "multi" / "2").rename(repository / "multi-v2-spare")  # serve version 1 only
    triton.InferenceServerClient(server.host).load_model("multi")
    seen: list[int] = []
    failures: list[str] = []
    stop = threading.Event()

    def hammer() -> None:
        client = triton.InferenceServerClient(server.host)
        inputs = _multi_inputs(50)
        for _ in range(400):
            if stop.is_set():
                return
            try:
                result = client.infer("multi", inputs)
            except InferenceServerException as exc:
                failures.append(str(exc))
                continue
            codes = set(result.as_numpy("code").ravel().tolist())
            if len(codes) != 1:
                failures.append(f"mixed answer {codes}")
            seen.extend(codes)

    threads = [threading.Thread(target=hammer) for _ in range(3)]
    for thread in threads:
        thread.start()
    admin = triton.InferenceServerClient(server.host)
    for round_ in range(6):
        # Swap version 1's file between offsets 0 and 100, and reload it under the clients.
        onnx.save(multi_input_model(100 * (round_ % 2)), repository / "multi" / "1" / "model.onnx")
        admin.load_model("multi")
        admin.unload_model("iris")  # another model coming and going meanwhile
        admin.load_model("iris")
    stop.set()
    for thread in threads:
        thread.join(timeout=120)
    assert failures == []
    assert set(seen) <= {1, 101} and len(seen) > 0
    final = admin.infer("multi", _multi_inputs(1)).as_numpy("code").ravel().tolist()
    assert final == [101]  # the last reload (round 5: offset 100) is what serves now
