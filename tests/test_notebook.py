"""examples/tutorial.ipynb runs top to bottom, twice in one folder, and is stored without outputs.

The notebook is executed with nbclient on an IPython kernel of this interpreter, in a fresh working
folder; the assertions read the outputs a user would see and the files the notebook wrote. Cells
are found by their ids, which the notebook keeps stable.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient

REPO = Path(__file__).resolve().parents[1]
NOTEBOOK = REPO / "examples" / "tutorial.ipynb"
KERNEL = "onnxbridge-tests"
CELL_TIMEOUT = 600  # seconds; the whole notebook takes well under a minute


def _kernel_specs(folder: Path) -> Path:
    """A kernel spec for this interpreter, under ``folder/kernels`` (a ``JUPYTER_PATH`` entry)."""
    spec = folder / "kernels" / KERNEL
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(
        json.dumps({"argv": argv, "display_name": KERNEL, "language": "python"})
    )
    return folder


def _execute(workdir: Path) -> nbformat.NotebookNode:
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(
        notebook,
        kernel_name=KERNEL,
        timeout=CELL_TIMEOUT,
        resources={"metadata": {"path": str(workdir)}},
    )
    # Raises CellExecutionError, naming the cell, if any cell fails; shuts the kernel down.
    client.execute()
    return notebook


@pytest.fixture(scope="module")
def executed(tmp_path_factory: pytest.TempPathFactory) -> tuple[nbformat.NotebookNode, Path]:
    """The notebook run twice in one working folder (a re-run must work); the second run."""
    workdir = tmp_path_factory.mktemp("tutorial")
    specs = _kernel_specs(tmp_path_factory.mktemp("jupyter"))
    with pytest.MonkeyPatch.context() as patch:
        # The kernel runs this interpreter, whatever kernels the machine has installed.
        patch.setenv("JUPYTER_PATH", str(specs))
        # Connection files and IPython's profile go to temp folders, not the user's home.
        patch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path_factory.mktemp("runtime")))
        patch.setenv("IPYTHONDIR", str(tmp_path_factory.mktemp("ipython")))
        _execute(workdir)
        return _execute(workdir), workdir


def _cell(notebook: nbformat.NotebookNode, cell_id: str) -> nbformat.NotebookNode:
    (cell,) = [c for c in notebook.cells if c.get("id") == cell_id]
    return cell


def _stdout(cell: nbformat.NotebookNode) -> str:
    return "".join(o.text for o in cell.outputs if o.output_type == "stream" and o.name == "stdout")


def _data(cell: nbformat.NotebookNode, mime: str) -> list[Any]:
    return [
        o.data[mime]
        for o in cell.outputs
        if o.output_type in ("execute_result", "display_data") and mime in o.data
    ]


def test_notebook_is_stored_without_outputs() -> None:
    raw = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    notebook = nbformat.from_dict(raw)
    nbformat.validate(notebook)
    code = [c for c in raw["cells"] if c["cell_type"] == "code"]
    assert code
    for cell in code:
        assert cell["outputs"] == [], cell["id"]
        assert cell["execution_count"] is None, cell["id"]
    assert raw["metadata"]["kernelspec"]["name"] == "python3"
    ids = [c["id"] for c in raw["cells"]]
    assert len(ids) == len(set(ids))


def test_every_cell_ran_without_error_or_warning(executed) -> None:
    notebook, _ = executed
    code = [c for c in notebook.cells if c.cell_type == "code"]
    assert [c.execution_count for c in code] == list(range(1, len(code) + 1))
    for cell in code:
        assert not [o for o in cell.outputs if o.output_type == "error"], cell.id
        stderr = "".join(
            o.text for o in cell.outputs if o.output_type == "stream" and o.name == "stderr"
        )
        assert "Warning" not in stderr and "Traceback" not in stderr, (cell.id, stderr)


def test_forest_is_trained_converted_and_inspected(executed) -> None:
    notebook, workdir = executed
    assert "test accuracy: " in _stdout(_cell(notebook, "train"))
    bundle = workdir / "runs" / "tutorial" / "iris-rf"
    assert f"wrote {Path('runs/tutorial/iris-rf/model.onnx')}" in _stdout(
        _cell(notebook, "convert")
    )
    assert (bundle / "model.onnx").is_file()

    (summary,) = _data(_cell(notebook, "inspect"), "text/html")
    assert "<table" in summary and "float32[N,4]" in summary
    assert "ai.onnx.ml.TreeEnsembleClassifier" in summary and "Tree ensembles" in summary


def test_onnxruntime_agrees_with_scikit_learn(executed) -> None:
    notebook, _ = executed
    (frame,) = _data(_cell(notebook, "predict"), "text/html")
    assert "proba_0" in frame and "label" in frame

    out = _stdout(_cell(notebook, "compare"))
    assert "labels identical: True" in out
    match = re.search(r"max \|Δp\|: (\S+)", out)
    assert match, out
    assert 0 <= float(match.group(1)) <= 1e-6


def test_validation_report_renders_as_html(executed) -> None:
    notebook, workdir = executed
    cell = _cell(notebook, "validate")
    assert "verdict: EQUIVALENT" in _stdout(cell)
    (report,) = _data(cell, "text/html")
    assert "<table" in report and "EQUIVALENT" in report
    assert "probabilities" in report and "thresholds" in report
    saved = workdir / "runs" / "tutorial" / "iris-rf" / "reports" / "validation.json"
    assert json.loads(saved.read_text())["verdict"] == "EQUIVALENT"


def test_benchmark_shows_table_and_plot(executed) -> None:
    notebook, workdir = executed
    assert _data(_cell(notebook, "bench"), "text/plain")
    cell = _cell(notebook, "bench-table")
    (table,) = _data(cell, "text/html")
    for engine in ("sklearn", "ort-default", "ort-1t", "onnxbridge"):
        assert engine in table
    assert _data(cell, "image/png")
    reports = workdir / "runs" / "tutorial" / "iris-rf" / "reports"
    bench = json.loads((reports / "bench.json").read_text())
    assert bench["batch_sizes"] == [1, 100, 10_000]


def test_exercises(executed) -> None:
    notebook, workdir = executed
    logreg = _cell(notebook, "ex1")
    assert "verdict: EQUIVALENT" in _stdout(logreg)
    (report,) = _data(logreg, "text/html")
    assert "EQUIVALENT" in report and "iris-logreg" in report

    (speed,) = _data(_cell(notebook, "ex2"), "text/html")
    assert speed.count("EQUIVALENT") == 3
    assert _data(_cell(notebook, "ex2-plot"), "image/png")
    for trees in (10, 50, 100):
        assert (workdir / "runs" / "tutorial" / f"iris-rf{trees}" / "model.onnx").is_file()

    pipeline = _cell(notebook, "ex3")
    assert "note: folded the scaling" in _stdout(pipeline)
    (operators,) = _data(pipeline, "text/html")
    assert "ai.onnx.ml.Scaler" in operators and "ai.onnx.ml.LinearClassifier" in operators
    summary = _cell(notebook, "ex3-summary")
    html = _data(summary, "text/html")
    assert len(html) == 2 and "ai.onnx.ml.LinearClassifier" in html[0]
    assert "verdict: EQUIVALENT" in _stdout(summary)
