"""Dynamic batching: concurrent small requests of a tree model run as one session call, and the
answers are bit-for-bit those of one call per request; models where that cannot be guaranteed
(linear models, ``Sigmoid``, more than one intra-op thread) are never merged."""

from __future__ import annotations

import threading
from pathlib import Path

import httpx
import numpy as np
import onnxruntime as ort
import pandas as pd
import pytest
import tritonclient.http as triton
from sklearn.datasets import make_classification
from sklearn.ensemble import GradientBoostingClassifier, RandomForestClassifier
from sklearn.linear_model import LogisticRegression

from onnxbridge import convert_estimator
from onnxbridge.errors import InferenceError
from onnxbridge.serve._model import MERGE_MAX_ROWS, ServedModel
from onnxbridge.serve._runner import InferenceRunner

WIDTH = 8


def _data() -> tuple[pd.DataFrame, np.ndarray]:
    X, y = make_classification(n_samples=600, n_features=WIDTH, random_state=0)
    return pd.DataFrame(X, columns=[f"c{i}" for i in range(WIDTH)]), y


def _save(estimator, folder: Path) -> Path:
    frame, y = _data()
    estimator.fit(frame, y)
    folder.mkdir(parents=True)
    path = folder / "model.onnx"
    path.write_bytes(convert_estimator(estimator, frame[:50]).model.SerializeToString())
    return path


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A repository: ``forest`` (mergeable), ``linear`` and ``boosted`` (Sigmoid): not."""
    root = tmp_path_factory.mktemp("batching")
    _save(RandomForestClassifier(n_estimators=30, random_state=0), root / "forest")
    _save(LogisticRegression(max_iter=500), root / "linear")
    _save(GradientBoostingClassifier(n_estimators=10, random_state=0), root / "boosted")
    return root


def _rows(n: int, seed: int) -> np.ndarray:
    return (np.random.default_rng(seed).normal(size=(n, WIDTH)) * 2).astype(np.float32)


def _calls(sizes: list[int], seed: int) -> list[tuple[list[str], dict[str, np.ndarray]]]:
    names = ["label", "probabilities"]
    return [(names, {"input": _rows(n, seed + i)}) for i, n in enumerate(sizes)]


def _assert_identical(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    assert len(got) == len(want)
    for a, b in zip(got, want, strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert np.array_equal(a, b), np.abs(a.astype(float) - b.astype(float)).max()


def test_forest_merged_results_are_bit_identical_to_one_call_each(models: Path) -> None:
    model = ServedModel("forest", "1", models / "forest" / "model.onnx", {})
    assert model.mergeable and model.merge_max_rows == MERGE_MAX_ROWS
    assert model.predictor.settings_for(1).intra_op_num_threads == 1  # the untuned default
    for seed, sizes in enumerate([[1] * 8, [1, 3, 1, 7, 2], [1] * 70, [5, 64, 1, 30, 40]]):
        calls = _calls(sizes, seed * 100)
        merged = model.run_merged(calls)
        assert len(merged) == len(calls)
        for (names, feeds), answer in zip(calls, merged, strict=True):
            _assert_identical(answer, model.run(names, feeds))
    # Merged calls: 8 ones -> 1; five requests of 14 rows -> 1; 70 ones -> 64 + 6: 2;
    # 5 | 64 | 1+30 | 40 (at most 64 rows a call, in order) -> 1 (the others run alone).
    assert model.merged_calls == 1 + 1 + 2 + 1


def test_linear_model_is_not_merged_because_merging_changes_its_bits(models: Path) -> None:
    model = ServedModel("linear", "1", models / "linear" / "model.onnx", {})
    assert ("ai.onnx.ml", "LinearClassifier") in model.operators
    assert not model.mergeable
    assert model.merge_key(["label", "probabilities"], {"input": _rows(1, 0)}) is None
    # Why: one call on 64 rows differs from 64 one-row calls in the last bit for some rows.
    session = model.predictor.session_for(1)
    rows = _rows(64 * 20, 1)
    differs = 0
    for start in range(0, len(rows), 64):
        block = rows[start : start + 64]
        merged = session.run(["probabilities"], {"input": block})[0]
        single = np.concatenate(
            [session.run(["probabilities"], {"input": r[None]})[0] for r in block]
        )
        differs += int(not np.array_equal(merged, single))
    assert differs > 0
    # run_merged on a model that may not merge still answers each call on its own, exactly.
    calls = _calls([1, 2, 1], 7)
    for (names, feeds), answer in zip(calls, model.run_merged(calls), strict=True):
        _assert_identical(answer, model.run(names, feeds))
    assert model.merged_calls == 0


def test_sigmoid_and_several_intra_op_threads_are_not_merged(models: Path) -> None:
    boosted = ServedModel("boosted", "1", models / "boosted" / "model.onnx", {})
    assert ("", "Sigmoid") in boosted.operators and not boosted.mergeable
    forest_two = ServedModel(
        "forest", "1", models / "forest" / "model.onnx", {"intra_op_num_threads": 2}
    )
    assert forest_two.predictor.settings_for(1).intra_op_num_threads == 2
    assert not forest_two.mergeable


def test_runner_merges_waiting_jobs_and_isolates_a_failing_merge() -> None:
    import asyncio

    seen: list[list[tuple]] = []

    def merge(calls: list[tuple]) -> list:
        seen.append(calls)
        if any(args[0] == "boom" for args in calls):
            raise InferenceError("merged call failed")
        return [args[0] * 10 for args in calls]

    def alone(value):
        if value == "boom":
            raise InferenceError("this request's own error")
        return value * 10

    runner = InferenceRunner(1)
    gate = threading.Event()

    async def main() -> list:
        loop = asyncio.get_running_loop()
        blocker = runner.submit(gate.wait)  # holds the worker so the next jobs queue up
        futures = [runner.submit_mergeable(alone, (i,), merge, "k") for i in range(1, 5)]
        futures.append(runner.submit_mergeable(alone, (5,), merge, "other"))
        await loop.run_in_executor(None, gate.set)
        await blocker
        first = await asyncio.gather(*futures)
        gate.clear()
        blocker = runner.submit(gate.wait)
        bad = [runner.submit_mergeable(alone, (v,), merge, "k") for v in (1, "boom", 2)]
        await loop.run_in_executor(None, gate.set)
        await blocker
        return [first, await asyncio.gather(*bad, return_exceptions=True)]

    try:
        first, second = asyncio.run(main())
    finally:
        runner.close()
    assert first == [10, 20, 30, 40, 50]
    assert [len(c) for c in seen] == [4, 3]  # key "k" merged; "other" (alone) ran by itself
    assert second[0] == 10 and second[2] == 20
    assert isinstance(second[1], InferenceError)
    assert "this request's own error" in str(second[1])


def _expected(path: Path, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One ONNX Runtime call per row, one intra-op thread: the reference answers."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    out = [session.run(None, {"input": row[None]}) for row in rows]
    return np.concatenate([o[0] for o in out]), np.concatenate([o[1] for o in out])


@pytest.mark.parametrize("name", ["forest", "linear"])
def test_concurrent_requests_answer_exactly_one_by_one(start_server, models: Path, name) -> None:
    """8 threads of tritonclient (JSON and binary) against a server with one inference thread:
    requests queue up and the forest's may be merged; every answer equals its own one-row call."""
    server = start_server(models, inference_threads=1)
    rows = _rows(8 * 40, 11)
    labels, probabilities = _expected(models / name / "model.onnx", rows)
    answers: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    errors: list[BaseException] = []

    def client(worker: int) -> None:
        try:
            connection = triton.InferenceServerClient(server.host)
            for i in range(worker, len(rows), 8):
                binary = i % 2 == 0
                tensor = triton.InferInput("input", [1, WIDTH], "FP32")
                tensor.set_data_from_numpy(rows[i : i + 1], binary_data=binary)
                outputs = [
                    triton.InferRequestedOutput(o, binary_data=binary)
                    for o in ("label", "probabilities")
                ]
                result = connection.infer(name, [tensor], outputs=outputs)
                answers[i] = (result.as_numpy("label"), result.as_numpy("probabilities"))
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=client, args=(w,)) for w in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors
    assert sorted(answers) == list(range(len(rows)))
    for i in range(len(rows)):
        label, proba = answers[i]
        assert label.tolist() == [labels[i]]
        assert proba.dtype == np.float32 and np.array_equal(proba[0], probabilities[i])
    model = server.app.state.dataplane.repository.get_model(name)
    if name == "forest":
        # Whether requests met in the queue depends on the machine; what holds either way is
        # that every merged call answered at least two requests.
        assert model.merged_requests >= 2 * model.merged_calls
    else:
        assert model.merged_calls == 0


def test_bad_request_beside_merged_ones_gets_its_own_4xx(start_server, models: Path) -> None:
    server = start_server(models, inference_threads=1)
    url = f"{server.url}/v2/models/forest/infer"
    good = {"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, WIDTH],
                        "data": _rows(1, 3).ravel().tolist()}]}  # fmt: skip
    bad = {"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, WIDTH],
                       "data": [1.0] * (WIDTH - 1)}]}  # fmt: skip
    statuses: list[tuple[int, dict]] = []

    def post(body: dict) -> None:
        response = httpx.post(url, json=body, timeout=30)
        statuses.append((response.status_code, response.json()))

    threads = [threading.Thread(target=post, args=(b,)) for b in [good, bad] * 4]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    ok = [s for s in statuses if s[0] == 200]
    refused = [s for s in statuses if s[0] != 200]
    assert len(ok) == 4 and len(refused) == 4
    assert all(body["outputs"][0]["name"] == "label" for _, body in ok)
    for status, body in refused:
        assert status == 422 and set(body) == {"error"}
        assert "shape [1, 8] needs 8 values, but 'data' has 7" in body["error"]


def test_no_merge_requests_runs_every_request_alone(start_server, models: Path) -> None:
    server = start_server(models, inference_threads=1, merge_requests=False)
    url = f"{server.url}/v2/models/forest/infer"
    rows = _rows(16, 5)
    labels, probabilities = _expected(models / "forest" / "model.onnx", rows)
    answers: dict[int, dict] = {}

    def post(i: int) -> None:
        body = {"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, WIDTH],
                            "data": rows[i].tolist()}]}  # fmt: skip
        answers[i] = httpx.post(url, json=body, timeout=30).json()

    threads = [threading.Thread(target=post, args=(i,)) for i in range(len(rows))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    for i in range(len(rows)):
        label, proba = answers[i]["outputs"]
        assert label["data"] == [labels[i]]
        assert np.array_equal(np.asarray(proba["data"], dtype=np.float32), probabilities[i])
    assert server.app.state.dataplane.repository.get_model("forest").merged_calls == 0
