"""Models whose tensors live in ONNX external data (``model.onnx`` + ``model.onnx.data``).

A small forest converted with ``--external-data`` goes through every command — inspect,
predict, validate, bench, tune, serve (a real server, a real request) and score — and answers
exactly as the same forest converted without it. A data file reached outside the model's folder,
missing or cut short is refused with one line.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import numpy as np
import onnx
import onnxruntime as ort
import pandas as pd
import pytest
from onnx import TensorProto, external_data_helper, helper, numpy_helper

import onnxbridge
from cli_support import assert_one_line_error, run
from onnxbridge import Bundle, OnnxModelError, Predictor, inspect_model, score, train_bundle
from onnxbridge._onnxfile import (
    PROTOBUF_LIMIT,
    loadable,
    model_files,
    model_sha256,
    needs_external_data,
    read_model_bytes,
    save_model,
)
from onnxbridge.errors import BundleError
from onnxbridge.runtime import SessionSettings
from wait_support import free_port, wait_for_ready

# A forest in double precision: its thresholds and leaf weights are tensors (ai.onnx.ml 3's
# *_as_tensor attributes), so there is something to keep in external data.
SPEC = "RandomForestClassifier(n_estimators=10, random_state=0)"


@pytest.fixture(scope="module")
def masters(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two copies of one trained bundle, converted with and without --external-data."""
    root = tmp_path_factory.mktemp("external")
    train_bundle("iris", SPEC, root / "plain")
    shutil.copytree(root / "plain", root / "external")
    for name, extra in (("plain", []), ("external", ["--external-data"])):
        code = _cli("convert", root / name, "--precision", "double", *extra)
        assert code == 0
    return {"plain": root / "plain", "external": root / "external"}


@pytest.fixture
def pair(masters: dict[str, Path], tmp_path: Path) -> dict[str, Path]:
    """Fresh copies of both bundles for one test."""
    return {name: Path(shutil.copytree(path, tmp_path / name)) for name, path in masters.items()}


def _cli(*args: object) -> int:
    from onnxbridge._cli.main import main

    return main([str(a) for a in args])


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --- the files ---------------------------------------------------------------------------------


def test_convert_writes_both_files_and_the_card_hashes_both(pair: dict[str, Path]) -> None:
    external, plain = pair["external"], pair["plain"]
    assert (external / "model.onnx.data").stat().st_size > 0
    assert not (plain / "model.onnx.data").exists()
    assert (external / "model.onnx").stat().st_size < (plain / "model.onnx").stat().st_size
    files = json.loads((external / "card.json").read_text())["files"]
    assert files["model.onnx"] == _sha(external / "model.onnx")
    assert files["model.onnx.data"] == _sha(external / "model.onnx.data")
    assert "model.onnx.data" not in json.loads((plain / "card.json").read_text())["files"]
    assert model_files(external / "model.onnx") == [
        external / "model.onnx",
        external / "model.onnx.data",
    ]
    assert model_files(plain / "model.onnx") == [plain / "model.onnx"]


def test_convert_json_names_the_data_file(
    pair: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "convert", pair["plain"], "--precision", "double",
                       "--external-data", "--json")  # fmt: skip
    assert code == 0
    assert json.loads(out)["external_data"] == [str(pair["plain"] / "model.onnx.data")]
    code, out, _ = run(capsys, "convert", pair["plain"], "--precision", "double")
    assert code == 0 and "model.onnx.data" not in out


def test_reconverting_without_the_flag_removes_the_data_file_and_its_hash(
    pair: dict[str, Path],
) -> None:
    external = pair["external"]
    assert _cli("convert", external, "--precision", "double") == 0
    assert not (external / "model.onnx.data").exists()
    assert "model.onnx.data" not in json.loads((external / "card.json").read_text())["files"]
    assert _sha(external / "model.onnx") == _sha(pair["plain"] / "model.onnx")


def _matmul_model(columns: int = 1000) -> onnx.ModelProto:
    weights = numpy_helper.from_array(
        np.arange(4 * columns, dtype=np.float32).reshape(4, columns), "W"
    )
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, columns])],
        [weights],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def test_save_model_keeps_the_model_and_writes_what_onnxruntime_reads(tmp_path: Path) -> None:
    model = _matmul_model()
    before = model.SerializeToString()
    written = save_model(model, tmp_path / "m.onnx", external_data=True)
    assert written == [tmp_path / "m.onnx", tmp_path / "m.onnx.data"]
    assert model.SerializeToString() == before  # its tensors came back
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx", "m.onnx.data"]
    x = np.ones((2, 4), np.float32)
    session = ort.InferenceSession(str(tmp_path / "m.onnx"))
    expected = ort.InferenceSession(before).run(None, {"x": x})[0]
    np.testing.assert_array_equal(session.run(None, {"x": x})[0], expected)
    whole = read_model_bytes(tmp_path / "m.onnx")
    assert whole is not None
    np.testing.assert_array_equal(ort.InferenceSession(whole).run(None, {"x": x})[0], expected)
    # Saved again in one file: the stale data file goes.
    assert save_model(model, tmp_path / "m.onnx") == [tmp_path / "m.onnx"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]
    assert (tmp_path / "m.onnx").read_bytes() == before


def _file_size_limit(limit: int) -> None:
    # Without this, the kernel kills the process with SIGXFSZ instead of failing the write.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


def test_a_full_disk_names_the_data_file_and_changes_nothing(pair: dict[str, Path]) -> None:
    plain = pair["plain"]
    before = {p.name: _sha(p) for p in plain.iterdir() if p.is_file()}
    package = str(Path(onnxbridge.__file__).resolve().parents[1])
    result = subprocess.run(
        [sys.executable, "-m", "onnxbridge._cli.main", "convert", str(plain), "--precision",
         "double", "--external-data"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": package},
        preexec_fn=lambda: _file_size_limit(2048),  # the data file is 3 320 bytes
        timeout=120,
    )  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.startswith(
        f"error: cannot write '{plain / 'model.onnx.data'}': File too large"
    ), result.stderr
    assert "Traceback" not in result.stderr
    assert {p.name: _sha(p) for p in plain.iterdir()} == before  # no leftovers either


def test_external_data_is_chosen_by_size() -> None:
    model = _matmul_model()
    assert not needs_external_data(model)
    assert needs_external_data(model, limit=8000)  # 16 000 bytes of weights
    assert not needs_external_data(model, limit=PROTOBUF_LIMIT)


def test_a_model_past_the_limit_opens_from_a_temporary_copy_with_external_data() -> None:
    model = _matmul_model()
    x = np.ones((2, 4), np.float32)
    with loadable(model) as small:
        assert isinstance(small, bytes)
        expected = ort.InferenceSession(small).run(None, {"x": x})[0]
    with loadable(model, limit=8000) as big:  # 16 000 bytes of weights
        assert isinstance(big, str)
        assert [p.name for p in model_files(big)] == ["model.onnx", "model.onnx.data"]
        onnx.checker.check_model(big)
        session = ort.InferenceSession(big)
    assert not Path(big).parent.exists()
    np.testing.assert_array_equal(session.run(None, {"x": x})[0], expected)


def test_the_model_hash_covers_the_data_file(pair: dict[str, Path]) -> None:
    onnx_file = pair["external"] / "model.onnx"
    before = model_sha256(onnx_file)
    data = pair["external"] / "model.onnx.data"
    data.write_bytes(data.read_bytes()[::-1])
    assert model_sha256(onnx_file) != before
    assert model_sha256(pair["plain"] / "model.onnx") == _sha(pair["plain"] / "model.onnx")


# --- every command ------------------------------------------------------------------------------


def test_inspect_reads_the_graph_and_lists_the_data_file(
    pair: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    external = inspect_model(pair["external"] / "model.onnx")
    plain = inspect_model(pair["plain"] / "model.onnx")
    size = (pair["external"] / "model.onnx.data").stat().st_size
    assert external.external_data == {"model.onnx.data": size}
    assert plain.external_data == {}
    assert external.valid and external.loads_in_onnxruntime
    assert external.tree_ensembles == plain.tree_ensembles
    assert external.operators == plain.operators
    page = re.sub(r"<td[^>]*>", "<td>", external._repr_html_())
    assert f"<td>external data model.onnx.data</td><td>{size} bytes</td>" in page
    code, out, _ = run(capsys, "inspect", pair["external"])
    assert code == 0
    assert f"model.onnx.data, {size / 1024:.1f} KiB ({size} bytes)" in out


def test_predict_score_and_the_python_api_answer_as_the_plain_model(
    pair: dict[str, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    holdout = pair["plain"] / "holdout.parquet"
    answers = {}
    for name, bundle in pair.items():
        code, out, err = run(capsys, "predict", bundle, "--data", holdout)
        assert code == 0, err
        answers[name] = out
        assert score(bundle, holdout, tmp_path / f"{name}.parquet").rows == 45
    assert answers["external"] == answers["plain"]
    pd.testing.assert_frame_equal(
        pd.read_parquet(tmp_path / "external.parquet"), pd.read_parquet(tmp_path / "plain.parquet")
    )


def test_graph_rewrites_run_on_a_model_with_external_data(
    pair: dict[str, Path], caplog: pytest.LogCaptureFixture
) -> None:
    rows, _ = Bundle.open(pair["plain"]).load_holdout()
    settings = SessionSettings(tree_block_nodes=16, intra_op_num_threads=1)
    with caplog.at_level("INFO", logger="onnxbridge"):
        external = Predictor(pair["external"] / "model.onnx", settings=settings)
        plain = Predictor(pair["plain"] / "model.onnx", settings=settings)
        assert external.settings_for(len(rows)).tree_block_nodes == 16  # the rewrite runs
        assert external.settings_for(len(rows)) == plain.settings_for(len(rows))
        np.testing.assert_array_equal(
            external.predict(rows).probabilities, plain.predict(rows).probabilities
        )
    assert "runs as it is" not in caplog.text
    assert "refused" not in caplog.text


def test_validate_and_golden_pass(
    pair: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    for args in (["validate", pair["external"]], ["validate", pair["external"], "--golden"]):
        code, out, err = run(capsys, *args)
        assert code == 0, err
        assert "verdict: EQUIVALENT" in out


def test_a_model_past_the_reference_limit_is_compared_without_it(
    pair: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from onnxbridge.validate import validate_bundle

    # The module of the validate package that holds the limit, whatever its name.
    (runtimes,) = [
        module
        for name, module in list(sys.modules.items())
        if name.startswith("onnxbridge.validate.") and hasattr(module, "REFERENCE_MAX_BYTES")
    ]
    size = sum(p.stat().st_size for p in pair["external"].glob("model.onnx*"))
    monkeypatch.setattr(runtimes, "REFERENCE_MAX_BYTES", size - 1)
    report = validate_bundle(pair["external"])
    assert report.verdict == "EQUIVALENT"
    assert report.runtimes["reference"]["available"] is False
    assert (
        f"the model is {size} bytes with its external data" in report.runtimes["reference"]["error"]
    )
    assert report.runtimes["onnxruntime"]["available"] is True


def test_bench_counts_both_files(pair: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "bench", pair["external"], "--batch-sizes", "1,10", "--threads",
                       "1", "--repeat", "1", "--min-time", "0.001", "--no-progress")  # fmt: skip
    assert code == 0, err
    report = json.loads((pair["external"] / "reports" / "bench.json").read_text())
    total = sum(p.stat().st_size for p in pair["external"].glob("model.onnx*"))
    assert report["facts"]["onnx_bytes"] == total


def test_tune_keeps_the_tensors_in_the_data_file(
    pair: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    external = pair["external"]
    data_hash = _sha(external / "model.onnx.data")
    code, _, err = run(capsys, "tune", external, "--throughput-rows", "200", "--repeat", "1",
                       "--min-time", "0.001", "--no-progress")  # fmt: skip
    assert code == 0, err
    assert _sha(external / "model.onnx.data") == data_hash
    assert model_files(external / "model.onnx")[1:] == [external / "model.onnx.data"]
    card = json.loads((external / "card.json").read_text())
    assert card["files"]["model.onnx"] == _sha(external / "model.onnx")
    assert "tuning" in card
    # The tuned model still loads its tensors and answers as before.
    rows, _ = Bundle.open(pair["plain"]).load_holdout()
    tuned = Predictor(external / "model.onnx")
    assert tuned.tuning is not None
    np.testing.assert_array_equal(
        tuned.predict(rows).probabilities,
        Predictor(pair["plain"] / "model.onnx").predict(rows).probabilities,
    )
    code, out, err = run(capsys, "validate", external)
    assert code == 0 and "verdict: EQUIVALENT" in out, err


def test_serve_answers_as_the_plain_model(pair: dict[str, Path]) -> None:
    rows, _ = Bundle.open(pair["plain"]).load_holdout()
    expected = Predictor(pair["plain"] / "model.onnx").predict(rows)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONNXBRIDGE_SERVE_")}
    command = [sys.executable, "-m", "onnxbridge._cli.main", "serve", str(pair["external"])]
    process = subprocess.Popen(
        [*command, "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_ready(process, url)
        values = rows.to_numpy(dtype=np.float64)
        body = {
            "inputs": [
                {"name": "input", "datatype": "FP64", "shape": list(values.shape),
                 "data": values.ravel().tolist()}
            ]
        }  # fmt: skip
        answers = [httpx.post(f"{url}/v2/models/external/infer", json=body).json()]
        # The data file rewritten in place (not renamed over) under the running server: it
        # answers from what it read, and goes on (a mapped file would change its answers, and
        # a cut one would end the process).
        data = pair["external"] / "model.onnx.data"
        with data.open("r+b") as handle:
            handle.write(b"\0" * data.stat().st_size)
        answers.append(httpx.post(f"{url}/v2/models/external/infer", json=body).json())
        with data.open("r+b") as handle:
            handle.truncate(0)
        answers.append(httpx.post(f"{url}/v2/models/external/infer", json=body).json())
        assert process.poll() is None
    finally:
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=30)
    for answer in answers:
        outputs = {output["name"]: output["data"] for output in answer["outputs"]}
        assert outputs["label"] == expected.labels.tolist()
        np.testing.assert_array_equal(
            np.array(outputs["probabilities"]), expected.probabilities.ravel()
        )


def test_a_repository_serves_the_model_and_refuses_broken_ones(
    pair: dict[str, Path], tmp_path: Path
) -> None:
    from onnxbridge.serve import ModelRepository

    root = tmp_path / "repo"
    root.mkdir()
    shutil.copytree(pair["external"], root / "good" / "1")
    shutil.copytree(pair["external"], root / "lost")
    (root / "lost" / "model.onnx.data").unlink()
    (root / "outside.data").write_bytes(b"\0" * 16000)
    (root / "escape").mkdir()
    _pointing_to(root / "escape", "../outside.data")
    repository = ModelRepository(root)
    entries = {entry.name: entry for entry in repository.load_all()}
    assert entries["good"].state == "READY"
    assert entries["lost"].state == "UNAVAILABLE"
    assert "'model.onnx.data', which is missing beside it" in entries["lost"].reason
    assert entries["escape"].state == "UNAVAILABLE"
    assert "refers to external data at '../outside.data'" in entries["escape"].reason
    rows, _ = Bundle.open(pair["plain"]).load_holdout()
    served = repository.get_model("good").predictor.predict(rows)
    expected = Predictor(pair["plain"] / "model.onnx").predict(rows)
    np.testing.assert_array_equal(served.probabilities, expected.probabilities)


def test_the_dask_engine_scores_it(pair: dict[str, Path], tmp_path: Path) -> None:
    holdout = pair["plain"] / "holdout.parquet"
    for name in ("external", "plain"):
        score(pair[name], holdout, tmp_path / f"scored-{name}", engine="dask", workers=1)
    pd.testing.assert_frame_equal(
        pd.read_parquet(tmp_path / "scored-external"), pd.read_parquet(tmp_path / "scored-plain")
    )


# --- refusals ---------------------------------------------------------------------------------


def _pointing_to(folder: Path, location: str) -> Path:
    """A model whose tensor ``W`` is read from ``location``."""
    model = _matmul_model()
    tensor = model.graph.initializer[0]
    external_data_helper.set_external_data(tensor, location, offset=0, length=16000)
    tensor.ClearField("raw_data")
    path = folder / "model.onnx"
    path.write_bytes(model.SerializeToString())
    return path


@pytest.mark.parametrize("location", ["../outside.data", "/etc/passwd", "sub/../../x.data"])
def test_data_outside_the_models_folder_is_refused(
    tmp_path: Path, location: str, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "outside.data").write_bytes(b"\0" * 16000)
    (tmp_path / "rows.csv").write_text("a,b,c,d\n1,2,3,4\n")
    folder = tmp_path / "model"
    folder.mkdir()
    path = _pointing_to(folder, location)
    expected = r"refers to external data at .* outside the model's folder"
    for opener in (inspect_model, Predictor, model_files):
        with pytest.raises(OnnxModelError, match=expected):
            opener(path)
    with pytest.raises(OnnxModelError, match=expected):
        score(path, tmp_path / "rows.csv", tmp_path / "out.parquet")
    for args in (["inspect", path], ["predict", path, "--data", tmp_path / "rows.csv"]):
        code, _, err = run(capsys, *args)
        assert_one_line_error(code, err, expected)


def test_a_data_file_linked_out_of_the_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "outside.data").write_bytes(b"\0" * 16000)
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "w.data").symlink_to(tmp_path / "outside.data")
    with pytest.raises(OnnxModelError, match=r"at 'w\.data' .* outside the model's folder"):
        Predictor(_pointing_to(folder, "w.data"))


def test_a_missing_data_file_stops_every_command(
    pair: dict[str, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    external = pair["external"]
    (external / "model.onnx.data").unlink()
    holdout = pair["plain"] / "holdout.parquet"
    for args in (
        ["inspect", external],
        ["predict", external, "--data", holdout],
        ["validate", external],
        ["score", external, holdout, "--output", tmp_path / "out.parquet"],
        ["bench", external],
        ["tune", external],
    ):
        code, _, err = run(capsys, *args)
        assert_one_line_error(code, err, r"'model\.onnx\.data', which is missing beside it")
    assert not (tmp_path / "out.parquet").exists()
    with pytest.raises(BundleError, match=r"which is missing beside it.*onnxbridge convert"):
        Bundle.open(external).check_file("model.onnx")


def test_a_cut_or_changed_data_file_is_refused(
    pair: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    data = pair["external"] / "model.onnx.data"
    whole = data.read_bytes()
    data.write_bytes(whole + b"x")
    code, _, err = run(capsys, "validate", pair["external"])
    assert_one_line_error(code, err, r"model\.onnx\.data in .* changed since it was recorded")
    data.write_bytes(whole[:100])
    code, _, err = run(capsys, "predict", pair["external"], "--data", data)
    assert_one_line_error(
        code, err, rf"which is damaged: 100 bytes, its tensors reach byte {len(whole)}"
    )


def test_a_location_key_written_with_a_long_length_is_still_checked(tmp_path: Path) -> None:
    # Protobuf reads a length written in more bytes than it needs ("\x88\x00" for 8) as the same
    # length, and so do onnx and ONNX Runtime: the reference must be found all the same.
    folder = tmp_path / "model"
    folder.mkdir()
    path = _pointing_to(folder, "../outside.data")
    (tmp_path / "outside.data").write_bytes(b"\0" * 16000)
    model = onnx.load(str(path), load_external_data=False)
    for entry in model.graph.initializer[0].external_data:
        if entry.key == "location":
            entry.key = "locationX"  # 9 bytes: its tag and length take 2, as long as below
    raw = model.SerializeToString()
    assert raw.count(b"\n\x09locationX") == 1
    path.write_bytes(raw.replace(b"\n\x09locationX", b"\n\x88\x00location"))
    assert onnx.load(str(path), load_external_data=False).graph.initializer[0].external_data
    with pytest.raises(OnnxModelError, match=r"outside the model's folder"):
        model_files(path)


def test_sparse_and_function_tensors_outside_the_folder_are_refused(tmp_path: Path) -> None:
    (tmp_path / "outside.data").write_bytes(b"\0" * 4096)
    values = numpy_helper.from_array(np.ones(256, dtype=np.float32), "values")
    external_data_helper.set_external_data(values, "../outside.data", offset=0, length=1024)
    values.ClearField("raw_data")
    indices = numpy_helper.from_array(np.arange(256, dtype=np.int64), "indices")
    sparse = helper.make_sparse_tensor(values, indices, [256])
    constant = helper.make_node("Constant", [], ["y"], sparse_value=sparse)
    function = helper.make_function("local", "F", [], ["y"], [constant], [])
    graph = helper.make_graph(
        [helper.make_node("F", [], ["y"], domain="local")],
        "g",
        [],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        sparse_initializer=[sparse],
    )
    for keep in ("sparse_initializer", "functions"):
        model = helper.make_model(
            graph,
            opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("local", 1)],
            functions=[function] if keep == "functions" else [],
        )
        if keep == "functions":
            model.graph.ClearField("sparse_initializer")
        folder = tmp_path / keep
        folder.mkdir()
        onnx.save_model(model, str(folder / "model.onnx"))
        with pytest.raises(OnnxModelError, match=r"at '\.\./outside\.data' .* outside"):
            model_files(folder / "model.onnx")


def test_an_offset_that_is_no_number_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = _matmul_model()
    tensor = model.graph.initializer[0]
    external_data_helper.set_external_data(tensor, "w.data", offset=0, length=16000)
    tensor.ClearField("raw_data")
    for entry in tensor.external_data:
        if entry.key == "offset":
            entry.value = "abc"
    (tmp_path / "w.data").write_bytes(b"\0" * 16000)
    path = tmp_path / "model.onnx"
    path.write_bytes(model.SerializeToString())
    code, _, err = run(capsys, "inspect", path)
    assert_one_line_error(code, err, r"offset 'abc' .* which are not byte counts")


def test_a_data_file_that_cannot_be_opened_is_a_one_line_error(
    pair: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from onnxbridge.serve import ModelRepository

    loop = pair["external"]
    (loop / "model.onnx.data").unlink()
    (loop / "model.onnx.data").symlink_to("model.onnx.data")  # a link to itself
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "w.data").mkdir()
    long = tmp_path / "long"
    long.mkdir()
    cases = [
        (loop / "model.onnx", r"in 'model\.onnx\.data', which cannot be read \(Too many levels"),
        (_pointing_to(folder, "w.data"), r"in 'w\.data', which is a folder, not the data file"),
        (_pointing_to(long, "w" * 300), r"in 'w{300}', which cannot be read"),
    ]
    for path, expected in cases:
        with pytest.raises(OnnxModelError, match=expected):
            Predictor(path)
        code, _, err = run(capsys, "inspect", path)
        assert_one_line_error(code, err, expected)
    code, _, err = run(capsys, "predict", loop, "--data", pair["plain"] / "holdout.parquet")
    assert_one_line_error(code, err, r"which cannot be read")
    # In a repository the model is refused and the others serve.
    root = tmp_path / "repo"
    root.mkdir()
    shutil.copytree(pair["plain"], root / "good")
    shutil.copytree(loop, root / "loop", symlinks=True)
    entries = {entry.name: entry for entry in ModelRepository(root).load_all()}
    assert entries["good"].state == "READY"
    assert entries["loop"].state == "UNAVAILABLE"
    assert "which cannot be read" in entries["loop"].reason


def test_a_data_file_linked_inside_the_folder_loads(pair: dict[str, Path]) -> None:
    # The data is found by the location the model names, even when that name is a link to
    # another file of the folder.
    external = pair["external"]
    (external / "model.onnx.data").rename(external / "weights-v1.bin")
    (external / "model.onnx.data").symlink_to("weights-v1.bin")
    rows, _ = Bundle.open(pair["plain"]).load_holdout()
    many = pd.concat([rows] * 200, ignore_index=True)  # large calls run the rewritten graph
    for given in (rows, many):
        expected = Predictor(pair["plain"] / "model.onnx").predict(given)
        got = Predictor(external / "model.onnx").predict(given)
        np.testing.assert_array_equal(got.probabilities, expected.probabilities)
    assert _cli("validate", external) == 0  # onnx.reference reads it too


def test_a_bundles_data_file_is_checked_by_the_name_the_model_reads(
    pair: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    # A link at model.onnx.data to another file of the folder, whose content changed: the
    # card's hash of model.onnx.data still catches it.
    external = pair["external"]
    (external / "model.onnx.data").rename(external / "real.data")
    (external / "model.onnx.data").symlink_to("real.data")
    content = bytearray((external / "real.data").read_bytes())
    content[:8] = b"\x00\x00\x48\x42" * 2  # 50.0 in float32
    (external / "real.data").write_bytes(bytes(content))
    code, _, err = run(capsys, "validate", external)
    assert_one_line_error(code, err, r"model\.onnx\.data in .* changed since it was recorded")
    # A card that does not record the data file the model reads is refused too.
    card_path = external / "card.json"
    card = json.loads(card_path.read_text())
    del card["files"]["model.onnx.data"]
    card_path.write_text(json.dumps(card))
    code, _, err = run(capsys, "validate", external)
    assert_one_line_error(code, err, r"reads its tensors from 'model\.onnx\.data', which card")


def test_a_length_of_zero_is_checked_as_the_tensors_own_size(tmp_path: Path) -> None:
    # ONNX Runtime reads a tensor's own size when its length is 0.
    path = _pointing_to(tmp_path, "w.data")
    model = onnx.load(str(path), load_external_data=False)
    for entry in model.graph.initializer[0].external_data:
        if entry.key == "offset":
            entry.value = "4000"
        if entry.key == "length":
            entry.value = "0"
    path.write_bytes(model.SerializeToString())
    (tmp_path / "w.data").write_bytes(b"\0" * 16000)
    with pytest.raises(OnnxModelError, match=r"damaged: 16000 bytes, its tensors reach byte 20000"):
        inspect_model(path)


def test_saving_where_a_folder_stands_changes_nothing(
    pair: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    external = pair["external"]
    (external / "model.onnx.data").unlink()
    (external / "model.onnx.data").mkdir()
    before = {p.name: _sha(p) for p in external.iterdir() if p.is_file()}
    code, _, err = run(capsys, "convert", external, "--precision", "double", "--external-data")
    assert_one_line_error(
        code, err, r"model\.onnx\.data' is a folder where a file is expected; pass a file's path"
    )
    assert {p.name: _sha(p) for p in external.iterdir() if p.is_file()} == before
    assert [p.name for p in external.iterdir() if p.name.startswith(".")] == []
    # Without external data the folder is left alone and the model is converted.
    assert _cli("convert", external, "--precision", "double") == 0
    assert (external / "model.onnx.data").is_dir()
    assert _cli("validate", external) == 0
    with pytest.raises(OSError, match="Is a directory"):
        save_model(_matmul_model(), tmp_path, external_data=True)
    # A long file name leaves room for the temporary folder beside it.
    long = tmp_path / "long" / ("m" * 240 + ".onnx")
    assert save_model(_matmul_model(), long, external_data=True)[0] == long
    assert sorted(p.name for p in long.parent.iterdir()) == [long.name, long.name + ".data"]


def test_a_file_at_the_data_files_name_that_no_model_reads_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "m.onnx"
    mine = tmp_path / "m.onnx.data"
    mine.write_text("mine")
    with pytest.raises(OnnxModelError, match=r"m\.onnx\.data' exists and is not the external"):
        save_model(_matmul_model(), path, external_data=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx.data"]
    save_model(_matmul_model(), path, external_data=False)
    assert mine.read_text() == "mine"
    # The data file of the model being replaced is replaced, and removed when none is needed.
    mine.unlink()
    save_model(_matmul_model(), path, external_data=True)
    save_model(_matmul_model(), path, external_data=True)
    assert mine.stat().st_size > 0
    save_model(_matmul_model(), path, external_data=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]


def test_a_bundle_left_without_its_model_converts_again(pair: dict[str, Path]) -> None:
    # An interrupted save can leave model.onnx.data without model.onnx: the card records the
    # data file, so it is the bundle's own and converting again replaces it.
    external = pair["external"]
    (external / "model.onnx").unlink()
    assert _cli("convert", external, "--precision", "double", "--external-data") == 0
    assert _cli("validate", external) == 0


def test_the_model_hash_does_not_change_with_the_onnx_file_name(pair: dict[str, Path]) -> None:
    onnx_file = pair["external"] / "model.onnx"
    copy = pair["external"] / "renamed.onnx"
    shutil.copyfile(onnx_file, copy)
    assert model_sha256(copy) == model_sha256(onnx_file)


def test_saving_over_a_model_with_external_data_never_pairs_old_and_new(tmp_path: Path) -> None:
    path = tmp_path / "model.onnx"
    save_model(_matmul_model(), path, external_data=True)
    before = Predictor(path).predict(np.ones((1, 4), dtype=np.float32)).values
    newer = _matmul_model()
    newer.graph.initializer[0].CopyFrom(
        numpy_helper.from_array(np.full((4, 1000), 2.0, dtype=np.float32), "W")
    )
    save_model(newer, path, external_data=True)
    after = Predictor(path).predict(np.ones((1, 4), dtype=np.float32)).values
    np.testing.assert_array_equal(after, np.full((1, 1000), 8.0, dtype=np.float32))
    assert not np.array_equal(before, after)
