"""``--trust NAME`` on the commands that load a bundle's model.skops (convert, validate, bench,
tune): a bundle whose model holds a name outside the reviewed list is refused without the flag
(exit 2, one line naming it, nothing touched) and runs with it; the trust is never written into
the bundle, so the next command without the flag is refused again.

The model: ``SelectKBest(f_regression, k=5) | Ridge()`` on the diabetes data. It converts and
validates, and its score function is not on the list (the list names ``f_classif``, the default).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from gadget_support import cli, snapshot
from onnxbridge import (
    Bundle,
    UnsafeModelFileError,
    bench_model,
    convert_bundle,
    train_bundle,
    validate_bundle,
)

AREA = "gadgets"
NAME = "sklearn.feature_selection._univariate_selection.f_regression"


@pytest.fixture(scope="module")
def _kbest_master(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A trained diabetes bundle whose model.skops is replaced by SelectKBest(f_regression) |
    Ridge fitted on the same rows, with card.json's hash updated to match (as a user re-saving
    their own model would)."""
    from sklearn.feature_selection import SelectKBest, f_regression
    from sklearn.linear_model import Ridge
    from sklearn.pipeline import make_pipeline

    from onnxbridge import save_estimator

    out = tmp_path_factory.mktemp("kbest") / "diabetes-kbest"
    bundle, result = train_bundle("diabetes", "Ridge()", out)
    model = make_pipeline(SelectKBest(f_regression, k=5), Ridge()).fit(
        result.X_train, result.y_train
    )
    save_estimator(model, bundle.model_path)
    card = json.loads(bundle.card_path.read_text())
    card["files"]["model.skops"] = hashlib.sha256(bundle.model_path.read_bytes()).hexdigest()
    bundle.card_path.write_text(json.dumps(card, indent=2))
    return out


@pytest.fixture
def kbest_bundle(_kbest_master: Path, tmp_path: Path) -> Path:
    import shutil

    out = tmp_path / "diabetes-kbest"
    shutil.copytree(_kbest_master, out)
    return out


def _converted(bundle: Path) -> Path:
    convert_bundle(bundle, trusted=(NAME,))
    return bundle


BENCH = ["--batch-sizes", "1", "--threads", "1", "--repeat", "1", "--min-time", "0.001"]
# tune loads model.skops only to build accelerators (--engines all).
TUNE = ["--regime", "latency", "--engines", "all", "--throughput-rows", "50", "--repeat", "1"]
COMMANDS = {
    "convert": (["convert", "{bundle}"], False, "wrote "),
    "validate": (["validate", "{bundle}", "--no-html"], True, "EQUIVALENT"),
    "bench": (["bench", "{bundle}", *BENCH, "--no-progress"], True, "sklearn"),
    "tune": (
        ["tune", "{bundle}", *TUNE, "--min-time", "0.001", "--no-progress", "--dry-run"],
        True,
        "latency",
    ),
}


@pytest.mark.parametrize("command", COMMANDS)
def test_a_bundle_command_refuses_an_unlisted_name_and_runs_with_trust(
    command: str, kbest_bundle: Path, figures
) -> None:
    template, needs_onnx, success = COMMANDS[command]
    if command == "tune":
        pytest.importorskip("tl2cgen")
    if needs_onnx:
        _converted(kbest_bundle)
    args = [arg.format(bundle=kbest_bundle) for arg in template]
    before = snapshot(kbest_bundle)

    refused = cli(*args)
    figures(AREA, "commands run", 1)
    lines = [line for line in refused.stderr.splitlines() if line.strip()]
    assert refused.returncode == 2, refused.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), refused.stderr
    assert f"does not trust: {NAME};" in lines[0] and "--trust NAME" in lines[0], lines[0]
    assert "Traceback" not in refused.stderr
    assert snapshot(kbest_bundle) == before
    figures(AREA, "refused", 1)

    trusted = cli(*args, "--trust", NAME)
    figures(AREA, "commands run", 1)
    assert trusted.returncode == 0, trusted.stderr
    assert success in trusted.stdout, trusted.stdout
    figures(AREA, "trusted bundle commands run", 1)
    # Trust is per command: nothing in the bundle records it.
    assert NAME not in (kbest_bundle / "card.json").read_text()


def test_trust_is_never_stored(kbest_bundle: Path) -> None:
    # After a trusted convert, the next command without the flag is refused again.
    ok = cli("convert", kbest_bundle, "--trust", NAME)
    assert ok.returncode == 0, ok.stderr
    again = cli("validate", kbest_bundle)
    assert again.returncode == 2, again.stderr
    assert f"does not trust: {NAME};" in again.stderr


def test_the_python_api_takes_trusted(kbest_bundle: Path, figures) -> None:
    with pytest.raises(UnsafeModelFileError, match=f"does not trust: {NAME};"):
        Bundle.open(kbest_bundle).load_estimator()
    with pytest.raises(UnsafeModelFileError, match=f"does not trust: {NAME};"):
        convert_bundle(kbest_bundle)
    assert not (kbest_bundle / "model.onnx").exists()
    figures(AREA, "refused", 2)

    assert type(Bundle.open(kbest_bundle).load_estimator(trusted=[NAME])).__name__ == "Pipeline"
    convert_bundle(kbest_bundle, trusted=(NAME,))
    with pytest.raises(UnsafeModelFileError, match=f"does not trust: {NAME};"):
        validate_bundle(kbest_bundle, write_report=False)
    report = validate_bundle(kbest_bundle, trusted=(NAME,), html=False)
    assert report.verdict == "EQUIVALENT"
    bench = bench_model(
        kbest_bundle,
        batch_sizes=[1],
        threads=[1],
        repeat=1,
        min_time=0.001,
        write=False,
        trusted=(NAME,),
    )
    assert "sklearn" in bench.engines
    # A lone name is one name (not its letters).
    assert Bundle.open(kbest_bundle).load_estimator(trusted=NAME) is not None
