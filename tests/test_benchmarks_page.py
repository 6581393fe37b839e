"""docs/benchmarks.md is what benchmarks/report.py makes of benchmarks/results/*.json, within 400
lines; benchmarks/reference.py's results render on it and flag lines more than 10 % slower."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from datetime import date
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
PAGE = ROOT / "docs" / "benchmarks.md"


def _script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        f"bench_{name}", ROOT / "benchmarks" / f"{name}.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


report = _script("report")
reference = _script("reference")


def test_the_page_is_what_report_makes_of_the_results() -> None:
    text = report.render(report.load_results(RESULTS))
    assert PAGE.read_text(encoding="utf-8") == text, "run: python benchmarks/report.py"
    assert text.count("\n") <= report.MAX_LINES
    done = subprocess.run(
        [sys.executable, "benchmarks/report.py", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout
    assert "is up to date" in done.stdout


def test_check_fails_on_a_page_that_differs_and_leaves_it_alone(tmp_path: Path) -> None:
    page = tmp_path / "benchmarks.md"
    stale = PAGE.read_text(encoding="utf-8").replace("**met**", "**not met**", 1)
    page.write_text(stale, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "benchmarks/report.py", "--check", "--page", str(page)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1
    assert "differs from the results; run python benchmarks/report.py" in done.stdout
    assert page.read_text(encoding="utf-8") == stale
    assert report.main(["--page", str(page)]) == 0  # without --check: rewritten
    assert page.read_text(encoding="utf-8") == PAGE.read_text(encoding="utf-8")


def test_every_results_file_says_command_date_machine_and_goals() -> None:
    files = sorted(RESULTS.glob("*.json"))
    assert len(files) >= 10
    for path in files:
        result = json.loads(path.read_text(encoding="utf-8"))
        assert result["name"] == path.stem and result["title"]
        assert result["runs"], path
        for run in result["runs"]:
            assert run["commands"] and all(c.strip() for c in run["commands"])
            assert date.fromisoformat(run["date"]) <= date.today()
            assert run["machine"]["cores"] >= 1
        for goal in result["goals"]:
            assert goal["goal"] and goal["result"] and goal["met"] in (True, False, None)
    page = PAGE.read_text(encoding="utf-8")
    assert page.count("\n## ") == len(files)
    for path in files:
        result = json.loads(path.read_text(encoding="utf-8"))
        for line in report.goal_lines(result["goals"]):
            assert f"\n{line}\n" in page


def _line(ratio: float, **key: Any) -> dict[str, Any]:
    base = 1e-3 if key.get("unit", "s") == "s" else 10_000.0
    current = base * ratio if key.get("unit", "s") == "s" else base / ratio
    return {
        "unit": "s",
        **key,
        "baseline": {"median": base, "min": base, "max": base},
        "current": {"median": current, "min": current, "max": current},
        "ratio": ratio,
    }


def _full_measurements(slow: float) -> dict[str, Any]:
    """Every line of a full run, all at ratio 1.00 but rf100 at 100 000 rows at ``slow``."""
    predict = [
        _line(slow if (model, rows) == ("rf100", 100_000) else 1.0, model=model, rows=rows)
        for model in reference.MODELS
        for rows in reference.SIZES
    ]
    serve = [
        _line(1.0, measure="serve: 1 row JSON, c=8", unit="req/s"),
        _line(1.0, measure="serve: 1 000 rows binary, c=8", unit="rows/s"),
    ]
    score = [_line(1.0, measure="score: local engine, 10 000 000 rows", unit="rows/s")]
    code = [
        {"figure": "lines of runtime/", "baseline": 3431, "current": 2000},
        {"figure": "lines of tune/", "baseline": "967 (bench/tune.py)", "current": "600 (tune)"},
        {"figure": "lines of runtime/predictor.py", "baseline": 1094, "current": 420},
        {"figure": "len(onnxbridge.__all__)", "baseline": 78, "current": 40},
        {"figure": "CLI start-up / import numpy, pandas", "baseline": 1.8, "current": 1.2},
    ]
    return {"skipped": [], "predict": predict, "serve": serve, "score": score, "code": code}


def test_a_full_reference_table_fits_on_the_page(tmp_path: Path) -> None:
    results = tmp_path / "results"
    shutil.copytree(RESULTS, results)
    doc = reference.result(_full_measurements(1.0), ["python benchmarks/reference.py"], "commit x")
    (results / "reference.json").write_text(json.dumps(doc), encoding="utf-8")
    text = report.render(report.load_results(results))
    assert text.count("\n") <= report.MAX_LINES
    section = text.split("## Reference table: before and after\n")[1].split("\n## ")[0]
    assert "| rf100 | 1 → 1 ms (1.00) | 1 → 1 ms (1.00) |" in section
    assert "| lines of runtime/ | 3431 | 2000 | - |" in section
    assert "| serve: 1 row JSON, c=8 | 10 000 req/s | 10 000 req/s | 1.00 |" in section
    assert (
        "- **met**: no line more than 10 % slower than the baseline → 0 of 31 lines more" in section
    )
    # The reference table comes first, before every other benchmark.
    assert text.index("## Reference table") < text.index("## Reference model")


@pytest.mark.parametrize(("slow", "met"), [(1.10, True), (1.12, False)])
def test_a_line_more_than_10_percent_slower_is_flagged(slow: float, met: bool) -> None:
    doc = reference.result(_full_measurements(slow), ["python benchmarks/reference.py"], "x")
    (goal,) = doc["goals"]
    assert goal["met"] is met
    rows = doc["runs"][0]["parts"][0]["table"]["rows"]
    (rf100,) = [row for row in rows if row[0] == "rf100"]
    assert rf100[-1] == ("1 → 1.1 ms (1.10)" if met else "1 → 1.12 ms (**1.12**)")
    if not met:
        assert goal["result"] == (
            "1 of 31 lines more than 10 % slower; worst rf100, 100 000 rows, 1.12"
        )


def test_reference_refuses_a_missing_baseline_and_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "reference.json"
    done = subprocess.run(
        [
            sys.executable,
            "benchmarks/reference.py",
            "--baseline-src",
            str(tmp_path),
            "--out",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "error: --baseline-src must be the src folder of a checkout (it holds onnxbridge/); "
        "e.g. git worktree add ../before main"
    ]
    assert not out.exists()


def _results_copy(tmp_path: Path) -> tuple[Path, Path]:
    results = tmp_path / "results"
    shutil.copytree(RESULTS, results)
    return results, tmp_path / "benchmarks.md"


def test_record_keeps_a_command_output_as_the_latest_run(tmp_path: Path) -> None:
    results, page = _results_copy(tmp_path)
    before = json.loads((results / "serve_load.json").read_text(encoding="utf-8"))
    command = [sys.executable, "-c", "print('1 row JSON, c=8: 12 345 req/s')"]
    where = ["--results", str(results), "--page", str(page)]
    done = subprocess.run(
        [
            sys.executable,
            "benchmarks/record.py",
            "serve_load",
            "--run",
            "2",
            *where,
            "--",
            *command,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    after = json.loads((results / "serve_load.json").read_text(encoding="utf-8"))
    assert after["runs"][0] == before["runs"][0]  # the other run stays
    run = after["runs"][1]
    assert run["parts"] == [{"output": "1 row JSON, c=8: 12 345 req/s"}]
    assert run["commands"][0].endswith("-c 'print('\"'\"'1 row JSON, c=8: 12 345 req/s'\"'\"')'")
    assert run["machine"]["cores"] >= 1 and len(run["date"]) == 10
    assert [g["goal"] for g in after["goals"]] == [g["goal"] for g in before["goals"]]
    assert {g["met"] for g in after["goals"]} == {None}
    text = page.read_text(encoding="utf-8")
    assert "1 row JSON, c=8: 12 345 req/s" in text
    assert "- not judged: single-row JSON at c=8" in text


def test_record_changes_nothing_when_the_command_fails(tmp_path: Path) -> None:
    results, page = _results_copy(tmp_path)
    before = (results / "engines.json").read_text(encoding="utf-8")
    where = ["--results", str(results), "--page", str(page)]
    failing = [sys.executable, "-c", "raise SystemExit(3)"]
    done = subprocess.run(
        [sys.executable, "benchmarks/record.py", "engines", *where, "--", *failing],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 3
    assert "error: the command failed (3);" in done.stdout and "is unchanged" in done.stdout
    assert (results / "engines.json").read_text(encoding="utf-8") == before
    assert not page.exists()
