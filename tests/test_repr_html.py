"""Rich display in Jupyter: ``_repr_html_`` of the validation report and the inspect summary.

Each is rendered from a real validation or a real ONNX file and read back with the standard
library's HTML parser, so the assertions see the text a notebook shows, not the markup.
"""

from __future__ import annotations

import dataclasses
import re
from html.parser import HTMLParser
from pathlib import Path

import onnx
from onnx import TensorProto, helper

from onnxbridge import Bundle, convert_bundle, inspect_model, train_bundle, validate_bundle

HOSTILE = "<script>alert('x')</script>"


class _Page(HTMLParser):
    """Collects the text, the tags and the table cells of an HTML fragment."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.text: list[str] = []
        self.cells: list[str] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        if tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.cells.append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if self._cell is not None:
            self._cell.append(data)


def _parse(fragment: str) -> _Page:
    page = _Page()
    page.feed(fragment)
    page.close()
    return page


def _text(page: _Page) -> str:
    return " ".join(" ".join(page.text).split())


def test_equivalent_report_renders_verdict_tables_and_tolerance(iris_bundle: Bundle) -> None:
    report = validate_bundle(iris_bundle, write_report=False)
    fragment = report._repr_html_()
    page = _parse(fragment)
    text = _text(page)

    assert "table" in page.tags and "script" not in page.tags and "style" not in page.tags
    assert report.verdict == "EQUIVALENT" and "EQUIVALENT" in text.split()
    # The held-out comparison: one row per output, with its differing rows and status.
    label = page.cells.index("label")
    # Labels have no numeric differences: shown as "-".
    assert page.cells[label : label + 9] == [
        "label", "labels", "45", "0", "100.00%", "-", "-", "-", "OK",
    ]  # fmt: skip
    proba = page.cells.index("probabilities")
    (compared,) = [c for c in report.outputs if c.name == "probabilities"]
    assert page.cells[proba + 5] == f"{compared.max_abs_diff:.3g}"
    assert page.cells[proba + 8] == "OK"
    assert "45 holdout rows compared" in text
    assert "probabilities |Δ| ≤ 1e-05 + 1e-05·|a|" in text
    # One line per probe set, each with the runtimes compared.
    for probe in report.probe_sets:
        assert probe.name in page.cells
    assert "sklearn~onnxruntime, sklearn~reference, onnxruntime~reference" in page.cells
    assert "skipped: no string columns" in page.cells
    # Nothing loaded from elsewhere.
    assert not re.search(r"(src|href)\s*=", fragment)


def test_divergent_report_renders_failing_sets_and_diagnosis(tmp_path: Path) -> None:
    bundle, _ = train_bundle("diabetes", "LinearRegression()", tmp_path / "d")
    convert_bundle(bundle)
    report = validate_bundle(bundle, atol=0.0, rtol=0.0, write_report=False)
    assert report.verdict == "DIVERGENT" and report.diagnoses
    page = _parse(report._repr_html_())
    text = _text(page)

    assert "DIVERGENT" in text.split()
    assert "value |Δ| ≤ 0 + 0·|a|" in text
    holdout = page.cells.index("holdout")
    assert page.cells[holdout + 3].startswith("DIVERGENT")
    assert "Diagnosis" in text
    for diagnosis in report.diagnoses:
        assert diagnosis.summary in text
        assert f"next step: {diagnosis.next_step}" in text


def test_report_escapes_text_it_did_not_write(iris_bundle: Bundle) -> None:
    report = validate_bundle(iris_bundle, write_report=False)
    hostile = dataclasses.replace(
        report,
        model=HOSTILE,
        runtimes={
            **report.runtimes,
            "reference": {"available": False, "version": "?", "error": f"<b>{HOSTILE}</b>"},
        },
    )
    fragment = hostile._repr_html_()
    page = _parse(fragment)

    assert "<script>" not in fragment and "<b><script>" not in fragment
    assert "script" not in page.tags
    assert "&lt;script&gt;" in fragment
    text = _text(page)
    assert HOSTILE in text
    # The warning says what the verdict rests on, escaped like the rest.
    assert f"warning: compared on 2 of 3 runtimes: <b>{HOSTILE}</b>" in text


def _identity_model(path: Path, input_name: str) -> Path:
    value_in = helper.make_tensor_value_info(input_name, TensorProto.FLOAT, ["N", 2])
    value_out = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 2])
    graph = helper.make_graph(
        [helper.make_node("Identity", [input_name], ["y"])], "g", [value_in], [value_out]
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])
    model.producer_name = "a & b"
    model.doc_string = HOSTILE
    helper.set_model_props(model, {HOSTILE: "x" * 1000})
    onnx.save(model, path)
    return path


def test_summary_renders_file_validity_types_and_operators(iris_bundle: Bundle) -> None:
    summary = inspect_model(iris_bundle.onnx_path)
    page = _parse(summary._repr_html_())
    cells = page.cells

    assert "table" in page.tags
    assert cells[cells.index("onnx.checker") + 1] == "valid"
    assert cells[cells.index("ONNX Runtime") + 1] == "loads"
    assert cells[cells.index("SHA-256") + 1] == summary.sha256
    assert cells[cells.index("opsets") + 1] == ", ".join(
        f"{domain} {version}" for domain, version in summary.opsets.items()
    )
    assert "ai.onnx.ml" in summary.opsets
    assert cells[cells.index("input") : cells.index("input") + 3] == [
        "input",
        "input",
        "float32[N,4]",
    ]
    assert ["output", "label", "int64[N]", "output", "probabilities", "float32[N,3]"] == cells[
        cells.index("output") : cells.index("output") + 6
    ]
    tree_op = "ai.onnx.ml.TreeEnsembleClassifier"
    assert cells[cells.index(tree_op) + 1] == "1"  # operators table: one node
    (tree,) = summary.tree_ensembles
    second = cells.index(tree_op, cells.index(tree_op) + 1)  # tree-ensembles table
    assert cells[second + 1 : second + 4] == ["10", str(tree.n_nodes), str(tree.n_leaves)]
    assert "onnxbridge.task" in cells


def test_summary_of_an_invalid_model_says_why(iris_bundle: Bundle, tmp_path: Path) -> None:
    model = onnx.load(iris_bundle.onnx_path)
    model.graph.node[0].op_type = "NoSuchOp"
    path = tmp_path / "bad.onnx"
    onnx.save(model, path)
    page = _parse(inspect_model(path)._repr_html_())
    cells = page.cells

    assert cells[cells.index("onnx.checker") + 1].startswith("invalid")
    assert "No Op registered for NoSuchOp" in cells[cells.index("onnx.checker") + 1]
    assert cells[cells.index("ONNX Runtime") + 1].startswith("does not load")


def test_summary_escapes_names_from_the_file(tmp_path: Path) -> None:
    path = _identity_model(tmp_path / "hostile.onnx", HOSTILE)
    summary = inspect_model(path)
    fragment = summary._repr_html_()
    page = _parse(fragment)
    cells = page.cells

    assert "<script>" not in fragment and "script" not in page.tags
    assert cells[cells.index("input") : cells.index("input") + 3] == [
        "input",
        HOSTILE,
        "float32[N,2]",
    ]
    assert cells[cells.index("producer") + 1] == "a & b"
    assert cells[cells.index("doc string") + 1] == HOSTILE
    assert cells[cells.index("Identity") + 1] == "1"
    # Long metadata values are cut; to_dict() keeps them whole.
    value = cells[cells.index(HOSTILE, cells.index("Identity")) + 1]
    assert value == "x" * 299 + "…"


def test_without_a_source_model_the_report_names_the_runtimes_it_compared(
    iris_bundle: Bundle,
) -> None:
    from rich.console import Console

    from onnxbridge._cli.validate import print_validation
    from onnxbridge.validate import validate_model

    X, _ = iris_bundle.load_holdout()
    report = validate_model(iris_bundle.onnx_path, None, X, runtimes=["onnxruntime", "reference"])
    assert report.compared == "onnxruntime vs onnx.reference"
    html = report._repr_html_()
    assert "onnxruntime vs onnx.reference on the holdout rows" in html
    assert "scikit-learn" not in html and "(no source model)" in html
    console = Console(record=True, width=120)
    print_validation(report, console)
    assert "onnxruntime vs onnx.reference on " in console.export_text()
