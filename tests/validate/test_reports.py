"""validation.json (versioned schema), validation.html (self-contained, renders in Chromium)."""

from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from onnxbridge import Bundle, validate_bundle
from onnxbridge.validate._report import REPORT_SCHEMA_VERSION

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_json_report_schema(iris_bundle: Bundle) -> None:
    validate_bundle(iris_bundle)
    saved = json.loads((iris_bundle.reports_dir / "validation.json").read_text())
    assert saved["schema_version"] == REPORT_SCHEMA_VERSION == 2
    # Schema 1's keys keep their meaning: scikit-learn vs onnxruntime on the holdout.
    assert (saved["verdict"], saved["rows"], saved["n_rows"]) == ("EQUIVALENT", "holdout", 45)
    assert [o["name"] for o in saved["outputs"]] == ["label", "probabilities"]
    assert set(saved["runtimes"]) == {"sklearn", "onnxruntime", "reference"}
    assert saved["tolerances"]["probabilities"] == {"atol": 1e-5, "rtol": 1e-5}
    names = [p["name"] for p in saved["probe_sets"]]
    assert names == [
        "holdout",
        "range",
        "thresholds",
        "edge",
        "missing",
        "strings",
        "categories",
        "batch",
    ]
    holdout = saved["probe_sets"][0]
    assert [p["name"] for p in holdout["pairs"]] == [
        "sklearn~onnxruntime",
        "sklearn~reference",
        "onnxruntime~reference",
    ]
    assert holdout["pairs"][0]["outputs"][1]["status"] == "OK"
    assert saved["failing_probe_sets"] == [] and saved["warning_probe_sets"] == []
    assert saved["probe_sets"][0]["fails_verdict"] is False
    assert "diff_samples" not in saved
    card = Bundle.open(iris_bundle.path).card["validation"]
    assert card["verdict"] == "EQUIVALENT" and card["failing_probe_sets"] == []


def test_html_report_is_self_contained(iris_bundle: Bundle) -> None:
    (iris_bundle.reports_dir).mkdir(exist_ok=True)
    bench = iris_bundle.reports_dir / "bench.png"
    bench.write_bytes(PNG_MAGIC + b"not really a plot")
    validate_bundle(iris_bundle)
    page = (iris_bundle.reports_dir / "validation.html").read_text()
    assert "<title>onnxbridge validation: EQUIVALENT</title>" in page
    # No network: nothing loaded from anywhere but the page itself.
    assert not re.search(r"(src|href)=['\"]?(https?:|//)", page)
    assert "<script" not in page and "<link" not in page
    images = re.findall(r"src='data:image/png;base64,([A-Za-z0-9+/=]+)'", page)
    assert len(images) == 2  # the histograms, and bench.png
    assert all(base64.b64decode(i).startswith(PNG_MAGIC) for i in images)
    assert base64.b64decode(images[1]) == bench.read_bytes()
    for text in ("thresholds", "sklearn~reference", "Nothing to diagnose.", "verdict: EQUIVALENT"):
        assert text in page


@pytest.mark.skipif(
    CHROMIUM is None, reason="Chromium is not installed (apt-get install -y chromium)"
)
def test_html_report_renders_in_headless_chromium(iris_bundle: Bundle, tmp_path: Path) -> None:
    validate_bundle(iris_bundle)
    page = iris_bundle.reports_dir / "validation.html"
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={tmp_path / 'profile'}",
    ]
    shot = tmp_path / "report.png"
    subprocess.run(
        [CHROMIUM, *flags, "--window-size=1280,2000", f"--screenshot={shot}", page.as_uri()],
        check=True,
        capture_output=True,
        timeout=120,
    )
    assert shot.read_bytes().startswith(PNG_MAGIC) and shot.stat().st_size > 20_000
    dom = subprocess.run(
        [CHROMIUM, *flags, "--dump-dom", page.as_uri()],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    assert "<title>onnxbridge validation: EQUIVALENT</title>" in dom
    assert re.search(r'<span id="verdict"[^>]*>verdict: EQUIVALENT</span>', dom), dom[:2000]


def test_no_html_flag_writes_json_only(iris_bundle: Bundle) -> None:
    validate_bundle(iris_bundle, probes=["holdout"])
    assert (iris_bundle.reports_dir / "validation.html").is_file()
    # A page from the earlier run would contradict the new validation.json: it goes.
    validate_bundle(iris_bundle, html=False)
    assert (iris_bundle.reports_dir / "validation.json").is_file()
    assert not (iris_bundle.reports_dir / "validation.html").exists()
