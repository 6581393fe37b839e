"""Tables at 80 columns (a pipe, a CI log): no column dropped, no cell cut, no line too long.

Each command runs in a real subprocess whose standard output is a pipe, with ``COLUMNS`` set
(rich reads it; without it a pipe gets 80 columns). The same columns must appear at 200.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from onnxbridge import Bundle

# The smallest measurements bench and tune take: these tests check the layout, not the speed.
FAST = ["--repeat", "1", "--min-time", "0.001", "--no-progress"]
# 100,000 rows per call gives the widest row counts and per-row times.
SIZES = ["--batch-sizes", "1,100000"]
SECONDS = re.compile(r"^\d[\d.,]* (ns|µs|ms|s)$")


def _run(cwd: Path, columns: str | None, *args: str) -> str:
    """``onnxbridge ARGS`` with its output piped; returns standard output."""
    env = {k: v for k, v in os.environ.items() if k not in {"COLUMNS", "FORCE_COLOR"}}
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    if columns is not None:
        env["COLUMNS"] = columns
    done = subprocess.run(
        [sys.executable, "-m", "onnxbridge._cli.main", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=300,
        check=False,
    )
    assert done.returncode in (0, 1), done.stderr
    return done.stdout


def _tables(out: str) -> list[tuple[list[str], list[list[str]]]]:
    """Each boxed table of ``out`` as (column headers, body rows of cells).

    A header written over two lines is joined with a space, column by column.
    """
    tables: list[tuple[list[str], list[list[str]]]] = []
    header: list[list[str]] = []
    rows: list[list[str]] = []
    for line in out.splitlines():
        if line.startswith("┏"):
            header, rows = [], []
        elif line.startswith("┃"):
            header.append([cell.strip() for cell in line.strip("┃").split("┃")])
        elif line.startswith("│"):
            rows.append([cell.strip() for cell in line.strip("│").split("│")])
        elif line.startswith("└"):
            names = [" ".join(p for p in parts if p) for parts in zip(*header, strict=True)]
            tables.append((names, rows))
    return tables


def _assert_fits(out: str, columns: int) -> None:
    assert out.strip()
    too_long = [line for line in out.splitlines() if len(line) > columns]
    assert not too_long, "\n".join(too_long)
    assert "…" not in out


@pytest.fixture
def workdir(iris_bundle: Bundle) -> Path:
    """The folder holding the Iris bundle as ``iris-rf``: commands name it by a short path."""
    return iris_bundle.path.parent


BENCH_HEADERS = ["rows", "engine", "per call ±IQR/2", "per row", "rows/s", "×sklearn"]


@pytest.mark.parametrize("columns", ["80", "200"])
@pytest.mark.parametrize(
    ("target", "extra", "headers", "engines"),
    [
        ("iris-rf", [], BENCH_HEADERS, {"sklearn", "ort-default", "ort-1t", "onnxbridge"}),
        ("iris-rf", ["--threads", "1,2"], BENCH_HEADERS, {"ort-1t", "ort-2t"}),
        # A bare .onnx file has no scikit-learn model to compare with.
        ("iris-rf/model.onnx", [], BENCH_HEADERS[:-1], {"ort-default", "onnxbridge"}),
    ],
    ids=["bundle", "threads", "onnx-file"],
)
def test_bench_table_keeps_every_column(
    workdir: Path,
    columns: str,
    target: str,
    extra: list[str],
    headers: list[str],
    engines: set[str],
) -> None:
    out = _run(workdir, columns, "bench", target, *SIZES, *extra, *FAST)
    _assert_fits(out, int(columns))
    (names, rows), *_ = _tables(out)
    assert names == headers
    assert engines <= {row[1] for row in rows}
    assert {row[0] for row in rows if row[0]} == {"1", "100,000"}
    for row in rows:
        assert SECONDS.match(row[3]), row
    assert "report: iris-rf/reports/bench.json" in out


@pytest.mark.parametrize("columns", ["80", "200"])
def test_bench_sweep_tables_cut_no_cell(workdir: Path, columns: str) -> None:
    out = _run(
        workdir,
        columns,
        "bench",
        "iris-rf",
        "--batch-sizes",
        "1",
        "--threads",
        "1",
        "--sweep",
        "n_estimators=2,4",
        "--sweep-batch-sizes",
        "1,100000",
        *FAST,
    )
    _assert_fits(out, int(columns))
    _, variants, timings = _tables(out)
    assert variants[0] == ["n_estimators", ".onnx", "load", "convert"]
    assert [row[0] for row in variants[1]] == ["2", "4"]
    for row in variants[1]:
        assert re.match(r"^[\d.]+ (B|KiB|MiB)$", row[1]), row
        assert all(SECONDS.match(cell) for cell in row[2:]), row
    names, rows = timings
    assert names == ["n_estimators", "rows", "sklearn", "ort-default", "onnxbridge", "×sklearn"]
    assert [row[:2] for row in rows] == [["2", "1"], ["", "100,000"], ["4", "1"], ["", "100,000"]]
    for row in rows:
        assert all(SECONDS.match(cell) for cell in row[2:5]), row
        assert re.match(r"^[\d.,]+$", row[5]), row


@pytest.mark.parametrize("columns", ["80", "200"])
def test_tune_lists_its_settings_under_the_table(workdir: Path, columns: str) -> None:
    out = _run(workdir, columns, "tune", "iris-rf", "--throughput-rows", "1000", "--dry-run", *FAST)
    _assert_fits(out, int(columns))
    tables = _tables(out)
    (latency, _), (throughput, _) = tables
    assert latency == ["step", "settings", "median ±IQR/2", "vs best in step", ""]
    # Step two's close candidates are also timed on 10 times the rows, when several are close.
    large = ["at 10,000 rows"] if "at 10,000 rows" in throughput else []
    assert throughput == [
        "step",
        "settings",
        "median ±IQR/2",
        "vs best in step",
        "at 100 rows",
        *large,
        "",
    ]
    # Every settings id of a table is spelled out in the list under it.
    legend = dict(re.findall(r"^  ([A-Z]+)  (\d+ threads?|auto threads)", out, re.MULTILINE))
    for _, rows in tables:
        ids = {row[1] for row in rows}
        assert ids and ids <= set(legend)
        assert sum(row[-1] == "← chosen" for row in rows) == 1
        assert all(SECONDS.match(row[2].split(" ±")[0]) for row in rows)
    assert re.search(r"^latency: chose [A-Z]+ \(", out, re.MULTILINE)
    assert re.search(r"^throughput: chose [A-Z]+ \(", out, re.MULTILINE)


@pytest.mark.parametrize("columns", ["80", "200", None])
def test_validate_tables_keep_output_names_whole(workdir: Path, columns: str | None) -> None:
    out = _run(workdir, columns, "validate", "iris-rf")
    _assert_fits(out, int(columns or 80))
    (headline, outputs), (probes, _) = _tables(out)
    assert headline == ["output", "agreement", "differ", "max |Δ|", "mean |Δ|", "max rel Δ", "ok"]
    assert [row[0] for row in outputs] == ["label", "probabilities"]
    assert probes[:2] == ["probe set", "rows"] and "sk~ort" in probes


@pytest.mark.parametrize("columns", ["80", "200"])
def test_inspect_tables_fit(workdir: Path, iris_bundle: Bundle, columns: str) -> None:
    out = _run(workdir, columns, "inspect", "iris-rf/model.onnx")
    _assert_fits(out, int(columns))
    rows = [line.split() for line in out.splitlines()]
    assert ["Operator", "Trees", "Nodes", "Leaves", "depth", "Targets", "transform"] in rows
    forest = iris_bundle.load_estimator()
    trees = [tree.tree_ for tree in forest.estimators_]
    expected = [
        "TreeEnsembleClassifier",
        str(len(trees)),
        str(sum(t.node_count for t in trees)),
        str(sum(t.n_leaves for t in trees)),
        str(max(t.max_depth for t in trees)),
        str(forest.n_classes_),
        "NONE",
    ]
    assert expected in rows
    assert ["ai.onnx.ml.TreeEnsembleClassifier", "1"] in rows
