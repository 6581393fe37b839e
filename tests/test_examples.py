"""The scripts in examples/ run as a user would run them and print what they claim.

Each runs in a subprocess from the repository root; the assertions read its output and the bundle it
wrote. Timings are checked for shape and sanity only (positive, finite), never for speed.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
TIMEOUT = 600  # seconds; the slowest example takes well under a minute


def run_example(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, (
        f"{name} exited with {result.returncode}\nstdout:\n{result.stdout}\n"
        f"stderr:\n{result.stderr}"
    )
    # Tests run with warnings as errors; an example a user copies should not warn either.
    assert "Warning" not in result.stderr, result.stderr
    return result


def test_logistic_regression_is_equivalent(tmp_path: Path) -> None:
    out = tmp_path / "logreg"
    result = run_example("logistic_regression.py", "--out", str(out))

    assert re.search(r"^verdict: EQUIVALENT$", result.stdout, re.MULTILINE), result.stdout
    assert re.search(r"^\s+label\s+ok\s+0 of 45 labels differ$", result.stdout, re.MULTILINE)
    match = re.search(r"^\s+probabilities\s+ok\s+max \|diff\| (\S+),", result.stdout, re.MULTILINE)
    assert match, result.stdout
    assert 0 <= float(match.group(1)) <= 1e-5

    # The bundle is where --out said, converted, with the verdict written to its report.
    bundle = out / "iris-logreg"
    assert (bundle / "model.onnx").is_file()
    report = json.loads((bundle / "reports" / "validation.json").read_text())
    assert report["verdict"] == "EQUIVALENT"
    assert [o["name"] for o in report["outputs"]] == ["label", "probabilities"]


def test_logistic_regression_can_be_rerun_into_the_same_folder(tmp_path: Path) -> None:
    out = tmp_path / "logreg"
    run_example("logistic_regression.py", "--out", str(out))
    result = run_example("logistic_regression.py", "--out", str(out))
    assert "verdict: EQUIVALENT" in result.stdout


def test_logistic_regression_refuses_a_folder_it_did_not_write(tmp_path: Path) -> None:
    stranger = tmp_path / "logreg" / "iris-logreg"
    stranger.mkdir(parents=True)
    (stranger / "notes.txt").write_text("not a bundle")

    result = subprocess.run(
        [sys.executable, str(EXAMPLES / "logistic_regression.py"), "--out", str(stranger.parent)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )

    assert result.returncode == 2
    assert "is not empty and is not a bundle" in result.stderr
    assert (stranger / "notes.txt").read_text() == "not a bundle"


def test_speed_ratio_reports_three_forests(tmp_path: Path) -> None:
    result = run_example(
        "speed_ratio.py", "--out", str(tmp_path / "speed"), "--repeat", "2", "--json"
    )

    payload = json.loads(result.stdout)  # --json prints nothing but the JSON
    assert payload["repeat"] == 2
    results = payload["results"]
    assert [r["trees"] for r in results] == [10, 50, 100]
    for r in results:
        assert r["verdict"] == "EQUIVALENT"
        assert r["rows"] == 10_000
        for side in ("sklearn", "onnxruntime"):
            timing = r[side]
            assert timing["repeat"] == 2
            assert math.isfinite(timing["median"]) and timing["median"] > 0
            assert timing["q1"] <= timing["median"] <= timing["q3"]
        assert math.isfinite(r["ratio"]) and r["ratio"] > 0
        assert r["ratio"] == pytest.approx(r["sklearn"]["median"] / r["onnxruntime"]["median"])
        assert (tmp_path / "speed" / f"iris-rf{r['trees']}" / "model.onnx").is_file()


def test_speed_ratio_rejects_a_zero_repeat(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / "speed_ratio.py"), "--out", str(tmp_path), "--repeat", "0"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )

    assert result.returncode == 2  # argparse's usage error
    assert "--repeat: must be >= 1, got 0" in result.stderr


def test_pipeline_operators_accounts_for_the_scaler(tmp_path: Path) -> None:
    result = run_example("pipeline_operators.py", "--out", str(tmp_path / "pipe"))

    # Operator lines are "  <op type>  <count>" under "<N> nodes, by operator", and add up to N.
    listing = result.stdout.split(" nodes, by operator (op type, count):\n")
    assert len(listing) == 2, result.stdout
    n_nodes = int(listing[0].split()[-1])
    operators = {
        op: int(count)
        for op, count in re.findall(r"^  (\S+)\s+(\d+)\b", listing[1].split("\n\n")[0], re.M)
    }
    assert sum(operators.values()) == n_nodes, result.stdout
    # The StandardScaler is folded into the LogisticRegression's coefficients (convert/_folding.py).
    assert "ai.onnx.ml.Scaler" not in operators, result.stdout
    assert operators.get("ai.onnx.ml.LinearClassifier") == 1, result.stdout
    assert re.search(
        r"^  ai\.onnx\.ml\.LinearClassifier\s+1\s+<- LogisticRegression, with the StandardScaler "
        r"folded into its coefficients$",
        result.stdout,
        re.MULTILINE,
    ), result.stdout
    assert "conversion note: folded the scaling (Scaler) into LinearClassifier" in result.stdout
    assert re.search(r"^verdict: EQUIVALENT$", result.stdout, re.MULTILINE), result.stdout
