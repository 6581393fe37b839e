"""Bad values through every path: a value the model's input cannot take is refused everywhere.

The same values — a float64 number beyond float32's range (``1e300``) and ``inf`` / ``-inf`` —
go through the ``predict`` command (a real subprocess on a CSV file), the Python API
(``Predictor.predict`` on a DataFrame, one row and a large array), ``score`` (stopping, and
skipping bad rows) and a real uvicorn server (``/infer`` with JSON and with binary tensors,
``/predict``), plus BOOL bytes other than 0 / 1 in ``/infer``'s binary extension. Each path
must refuse each value naming where it is (row and column, or input and index), and the server
must keep serving. Figures: paths tried, values refused, values answered (must be 0).
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import numpy as np
import onnx
import pandas as pd
import pytest

import onnxbridge
from onnxbridge import BadRowError, Predictor, SchemaMismatchError, score
from onnxbridge.serve._settings import ServeSettings
from serve.conftest import RunningServer, multi_input_model

AREA = "bad values"
COLUMNS = ["sepal length (cm)", "sepal width (cm)", "petal length (cm)", "petal width (cm)"]
# (text in a file, the value, what the refusal says about it)
TABLE_VALUES = [
    ("1e300", 1e300, "1e+300 is out of range for float32"),
    ("inf", np.inf, "inf is not a finite number the model can score"),
    ("-inf", -np.inf, "-inf is not a finite number the model can score"),
]


class Tally:
    """Counts what each path did with each bad value."""

    def __init__(self) -> None:
        self.paths: set[str] = set()
        self.refused = 0
        self.answered: list[str] = []

    def refused_by(self, path: str) -> None:
        self.paths.add(path)
        self.refused += 1

    def answered_by(self, path: str, what: str) -> None:
        self.paths.add(path)
        self.answered.append(f"{path}: {what}")

    def assert_none_answered(self) -> None:
        assert self.answered == [], f"bad values answered: {self.answered}"


@pytest.fixture(scope="module")
def tally() -> Tally:
    return Tally()


@pytest.fixture
def record(tally: Tally, figures: Callable[[str, str, int | float | str], None]) -> Iterator[Tally]:
    """The module's tally; its counts of this test go to the figures when the test ends."""
    paths, refused, answered = len(tally.paths), tally.refused, len(tally.answered)
    yield tally
    figures(AREA, "paths", len(tally.paths) - paths)
    figures(AREA, "refused", tally.refused - refused)
    figures(AREA, "answered", len(tally.answered) - answered)


def _rows(n: int) -> pd.DataFrame:
    rng = np.random.RandomState(0)
    low, high = np.array([4.3, 2.0, 1.0, 0.1]), np.array([7.9, 4.4, 6.9, 2.5])
    frame = pd.DataFrame(low + rng.rand(n, 4) * (high - low), columns=COLUMNS)
    frame.insert(0, "id", np.arange(n))
    return frame


def _csv_with(path: Path, n: int, row: int, text: str) -> Path:
    """``n`` rows in a CSV file whose data row ``row`` (from 1) has ``text`` as petal length."""
    frame = _rows(n).astype({COLUMNS[2]: object})
    frame.loc[row - 1, COLUMNS[2]] = text
    frame.to_csv(path, index=False)
    return path


def test_cli_predict_refuses_each_bad_value(
    _iris_bundle_master: Path, tmp_path: Path, record: Tally
) -> None:
    # A real process running this checkout's code.
    env = {**os.environ, "PYTHONPATH": str(Path(onnxbridge.__file__).parents[1])}
    command = [sys.executable, "-c", "from onnxbridge._cli.main import run; run()", "predict"]
    for text, _, said in TABLE_VALUES:
        data = _csv_with(tmp_path / f"rows-{text}.csv", 20, 7, text)
        out = tmp_path / f"pred-{text}.csv"
        proc = subprocess.run(
            [
                *command,
                str(_iris_bundle_master),
                "--data",
                str(data),
                "--out",
                str(out),
                "--ignore-extra",
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        lines = proc.stderr.splitlines()
        if proc.returncode == 0:
            record.answered_by("cli predict", text)
            continue
        assert proc.returncode == 2 and len(lines) == 1, proc.stderr
        assert lines[0].startswith(
            f"error: bad value in row 7, column 'petal length (cm)': {said}"
        ), lines[0]
        assert not out.exists()
        record.refused_by("cli predict")
    record.assert_none_answered()


def test_python_api_refuses_each_bad_value(_iris_bundle_master: Path, record: Tally) -> None:
    predictor = Predictor(_iris_bundle_master / "model.onnx")
    for _, value, said in TABLE_VALUES:
        frame = _rows(3000).drop(columns="id")
        frame.iloc[2999, 2] = value
        shapes = {
            "python DataFrame": frame,
            "python one row": frame.iloc[[2999]].to_numpy(),
            "python large array": frame.to_numpy(),
        }
        for path, data in shapes.items():
            row = 1 if path == "python one row" else 3000
            try:
                predictor.predict(data)
            except SchemaMismatchError as exc:
                assert f"bad value in row {row}, column 'petal length (cm)': {said}" in str(exc)
                record.refused_by(path)
            else:
                record.answered_by(path, str(value))
    record.assert_none_answered()


def test_score_makes_each_bad_value_a_bad_row(
    _iris_bundle_master: Path, tmp_path: Path, record: Tally
) -> None:
    model = _iris_bundle_master / "model.onnx"
    for text, _, said in TABLE_VALUES:
        data = _csv_with(tmp_path / f"rows-{text}.csv", 200, 150, text)
        try:
            score(model, data, tmp_path / f"stop-{text}", keep=["id"], batch_size=64)
        except BadRowError as exc:
            assert (exc.row, exc.column) == (150, "petal length (cm)")
            assert f"row 150, column 'petal length (cm)': value '{text}' is" in str(exc)
            record.refused_by("score")
        else:
            record.answered_by("score", text)
        out = tmp_path / f"skip-{text}"
        result = score(model, data, out, keep=["id"], batch_size=64, on_error="skip")
        bad = pd.read_parquet(out / "_bad_rows" / "part-00000.parquet")
        if result.bad_rows == 1 and bad["row"].tolist() == [150]:
            assert said.split(" is ", 1)[1] in bad["reason"][0]
            record.refused_by("score --on-error skip")
        else:
            record.answered_by("score --on-error skip", text)
    record.assert_none_answered()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, _iris_bundle_master: Path):
    root = tmp_path_factory.mktemp("values") / "repo"
    root.mkdir()
    shutil.copytree(_iris_bundle_master, root / "iris")
    (root / "multi").mkdir()
    onnx.save(multi_input_model(), root / "multi" / "model.onnx")
    running = RunningServer(ServeSettings(model_path=root))
    yield running
    running.stop()


def _refused(response: httpx.Response, fragments: list[str]) -> bool:
    if response.status_code == 200:
        return False
    assert response.status_code == 422, response.text
    body = response.json()
    assert set(body) == {"error"}
    for fragment in fragments:
        assert fragment in body["error"], (fragment, body["error"])
    return True


def _binary(header: dict, blob: bytes) -> tuple[bytes, dict[str, str]]:
    text = json.dumps(header).encode()
    return text + blob, {"Inference-Header-Content-Length": str(len(text))}


def test_server_refuses_each_bad_value(server: RunningServer, record: Tally) -> None:
    base = f"{server.url}/v2/models"
    good = {"name": "input", "datatype": "FP32", "shape": [1, 4], "data": [5.1, 3.5, 1.4, 0.2]}

    def tried(path: str, response: httpx.Response, fragments: list[str]) -> None:
        if _refused(response, fragments):
            record.refused_by(path)
        else:
            record.answered_by(path, response.text[:80])
        # ... and the server keeps serving.
        assert httpx.post(f"{base}/iris/infer", json={"inputs": [good]}).status_code == 200

    # JSON has no infinity: the values it can carry that FP32 cannot hold.
    for value, shown in ((1e300, "1e+300"), (-1e300, "-1e+300"), (3.5e38, "3.5e+38")):
        tensor = {**good, "shape": [2, 4], "data": [1, 2, 3, 4, 1, 2, value, 4]}
        response = httpx.post(f"{base}/iris/infer", json={"inputs": [tensor]})
        said = f"'input' at index [1, 2]: {shown} is out of range for FP32"
        tried("/infer JSON", response, [said])
    for _, value, said in TABLE_VALUES:
        if np.isfinite(value):
            continue  # FP32 bytes cannot hold 1e300
        blob = struct.pack("<8f", 1, 2, 3, 4, 1, 2, value, 4)
        header = {
            "inputs": [
                {
                    "name": "input",
                    "datatype": "FP32",
                    "shape": [2, 4],
                    "parameters": {"binary_data_size": len(blob)},
                }
            ]
        }
        content, headers = _binary(header, blob)
        response = httpx.post(f"{base}/iris/infer", content=content, headers=headers)
        tried("/infer binary", response, [f"'input' at index [1, 2]: {said}"])
    for byte in (2, 255):
        inputs = [
            {"name": "num", "datatype": "FP64", "shape": [2, 2], "data": [1.0, 2.0, 3.0, 4.0]},
            {"name": "cat", "datatype": "BYTES", "shape": [2, 1], "data": ["a", "b"]},
            {"name": "count", "datatype": "INT64", "shape": [2, 1], "data": [3, 4]},
            {
                "name": "flag",
                "datatype": "BOOL",
                "shape": [2, 1],
                "parameters": {"binary_data_size": 2},
            },
        ]
        content, headers = _binary({"inputs": inputs}, bytes([1, byte]))
        response = httpx.post(f"{base}/multi/infer", content=content, headers=headers)
        tried("/infer binary BOOL", response, [f"'flag' at index [1, 0]: {byte} is not a boolean"])
    for _, value, said in TABLE_VALUES:
        if not np.isfinite(value):
            continue  # JSON has no infinity
        row = dict(zip(COLUMNS, [5.1, 3.5, value, 0.2], strict=True))
        response = httpx.post(f"{base}/iris/predict", json=[dict(row, **{COLUMNS[2]: 1.0}), row])
        tried("/predict", response, [f"bad value in row 2, column 'petal length (cm)': {said}"])
    record.assert_none_answered()
