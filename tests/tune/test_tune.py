"""onnxbridge tune: measured winners stored in the model and card, used by Predictor and
predict; accelerators recorded only when equivalent and faster."""

from __future__ import annotations

import importlib.util
import json
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import onnxbridge.engines._build as accelerators
from onnxbridge import Bundle, Predictor, convert_bundle, train_bundle, tune_model, validate_bundle
from onnxbridge.bundle import ONNX_NAME
from onnxbridge.engines._build import (
    AcceleratorCandidate,
    AcceleratorCheck,
    check_candidate,
    choose_accelerator,
    probe_rows,
)
from onnxbridge.errors import DataError
from onnxbridge.runtime._router import Router
from onnxbridge.runtime._settings import SessionSettings, TuningSpec, available_cores
from onnxbridge.tune import boundary_limit, read_tuning
from onnxbridge.tune._candidates import LARGE_BYTES, LARGE_CONTENDERS, large_rows_for
from onnxbridge.tune._search import pick_score
from tuning_support import FAST

TUNE = {**FAST, "throughput_rows": 200}


def test_tune_stores_the_winners_where_predictor_reads_them(any_bundle: Bundle) -> None:
    report = tune_model(any_bundle.path, **TUNE)
    spec = report.spec
    assert [r.regime for r in report.regimes] == ["latency", "throughput"]
    for regime in report.regimes:
        assert regime.winner in {c.settings for c in regime.candidates}
        labels = {c.settings.label() for c in regime.candidates}
        # Threads 1..cores × spinning, ORT's defaults, then modes and optimisation levels.
        assert "1 thread, no spin, sequential, opt all" in labels
        assert "auto threads, spin, sequential, opt all" in labels
        assert any(label.endswith("opt disabled") for label in labels)
    # engines="onnxruntime" by default: no compiled engine built, tried or recorded.
    assert report.accelerators == [] and report.accelerators_skipped == []
    assert spec.accelerator is None
    assert spec.latency == report.regimes[0].winner
    assert spec.throughput == report.regimes[1].winner
    assert 1 <= spec.latency_max_rows <= 200
    # The model carries it, the card carries it, the card's hash of model.onnx is current.
    assert read_tuning(any_bundle.onnx_path) == spec
    bundle = Bundle.open(any_bundle.path)
    bundle.check_file(ONNX_NAME)
    assert bundle.card["tuning"]["latency"] == spec.latency.to_dict()
    assert bundle.card["tuning"]["report"] == "reports/tune.json"
    saved = json.loads((bundle.reports_dir / "tune.json").read_text())
    assert saved["spec"] == spec.to_dict()
    # Throughput candidates were also timed on 100-row calls (between the two regimes' sizes).
    latency_saved, throughput_saved = saved["regimes"]
    assert all("mid_timing" not in c for c in latency_saved["candidates"])
    assert all(
        c["mid_rows"] == 100 and "median" in c["mid_timing"] for c in throughput_saved["candidates"]
    )
    predictor = Predictor(any_bundle.onnx_path)
    assert predictor.tuning == spec
    assert predictor.settings_for(1) == spec.latency.clamped()
    assert predictor.settings_for(10_000) == spec.throughput.clamped()
    # Only metadata changed: the model still validates.
    assert validate_bundle(any_bundle.path).verdict == "EQUIVALENT"


def test_candidates_that_run_a_100_row_call_alike_share_its_timing(tmp_path: Path) -> None:
    bundle, _ = train_bundle("diabetes", "Ridge()", tmp_path / "ridge")
    convert_bundle(bundle)
    report = tune_model(bundle.path, regime="throughput", write=False, **TUNE)
    step2 = [c for c in report.regimes[0].candidates if c.step == 2]
    winner = step2[0]
    (dot,) = [c for c in step2 if c.settings == replace(winner.settings, linear_gemv=True)]
    # Dot products serve large calls only: a tuned model runs a 100-row call on the graph as it
    # is, so the dot-product candidate was not timed apart there.
    model = bundle.onnx_path.read_bytes()

    def at_100(settings: SessionSettings) -> SessionSettings:
        return Router(model, TuningSpec(settings, settings, 1)).settings_for(100)

    assert at_100(dot.settings) == at_100(winner.settings)
    assert dot.mid is not None and dot.mid is winner.mid
    assert dot.timing is not winner.timing


def test_a_candidate_is_judged_by_its_worse_size() -> None:
    # Scores are the worse of a candidate's two ratios to the best: the cheapest candidate
    # within the margin of the best score wins.
    assert pick_score([1.5, 1.01, 1.0], 0.02) == 1
    assert pick_score([1.0, 1.0], 0.02) == 0
    assert pick_score([1.3, 1.2, 1.0], 0.02) == 2


def test_large_calls_size_is_ten_times_the_throughput_size_within_bounds() -> None:
    assert large_rows_for(10_000, 112) == 100_000
    assert large_rows_for(200, 16) == 2_000
    assert large_rows_for(50_000, 112) == 100_000  # at most 100 000 rows
    assert large_rows_for(100_000, 112) == 0  # nothing larger to time
    assert large_rows_for(10_000, 3_136) == LARGE_BYTES // 3_136  # 784 float32 features
    assert large_rows_for(10_000, LARGE_BYTES // 5_000) == 0


def test_close_throughput_candidates_are_judged_on_large_calls_too(iris_bundle: Bundle) -> None:
    saved = tune_model(iris_bundle.path, regime="throughput", write=False, **TUNE).to_dict()
    step2 = [c for c in saved["regimes"][0]["candidates"] if c["step"] == 2]

    def ratios(values: list[float]) -> list[float]:
        return [v / min(values) for v in values]

    scores = [
        max(a, b)
        for a, b in zip(
            ratios([c["median"] for c in step2]),
            ratios([c["mid_timing"]["median"] for c in step2]),
            strict=True,
        )
    ]
    close = [i for i, x in enumerate(scores) if x <= min(scores) * LARGE_CONTENDERS]
    timed = [i for i, c in enumerate(step2) if "large_timing" in c]
    # Exactly the close candidates were timed on 2 000-row calls (ten times 200), when there
    # were several, and the winner is the cheapest within the margin of the worst of three.
    assert timed == (close if len(close) > 1 else [])
    assert all(step2[i]["large_rows"] == 2_000 for i in timed)
    if timed:
        for i, ratio in zip(
            timed, ratios([step2[i]["large_timing"]["median"] for i in timed]), strict=True
        ):
            scores[i] = max(scores[i], ratio)
    winner = step2[pick_score(scores, 0.02)]
    assert winner["settings"] == saved["spec"]["throughput"]


def test_one_regime_keeps_the_other(iris_bundle: Bundle) -> None:
    first = tune_model(iris_bundle.path, regime="throughput", **TUNE).spec
    assert first.latency == SessionSettings.onnxbridge_default()
    assert first.latency_max_rows == 100  # not measured: the documented default
    second = tune_model(iris_bundle.path, regime="latency", **TUNE).spec
    assert second.throughput == first.throughput
    assert [
        r.regime
        for r in tune_model(iris_bundle.path, regime="latency", write=False, **TUNE).regimes
    ] == ["latency"]


def test_dry_run_stores_nothing(iris_bundle: Bundle) -> None:
    before = iris_bundle.onnx_path.read_bytes()
    report = tune_model(iris_bundle.path, write=False, **TUNE)
    assert report.spec.latency is not None
    assert iris_bundle.onnx_path.read_bytes() == before
    assert "tuning" not in Bundle.open(iris_bundle.path).card
    assert not (iris_bundle.reports_dir / "tune.json").exists()


def test_bare_onnx_file_is_tuned_in_place(iris_bundle: Bundle, tmp_path: Path) -> None:
    model = tmp_path / "m.onnx"
    shutil.copy(iris_bundle.onnx_path, model)
    report = tune_model(model, **TUNE)
    assert read_tuning(model) == report.spec
    assert (tmp_path / "reports" / "tune.json").is_file()
    X = np.random.RandomState(0).uniform(0, 8, size=(5, 4))
    np.testing.assert_array_equal(
        Predictor(model).predict(X).labels, Predictor(iris_bundle.onnx_path).predict(X).labels
    )


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"regime": "fast"}, r"regime='fast' is not one of latency, throughput, both"),
        ({"engines": "gpu"}, r"engines='gpu' is not one of onnxruntime, all"),
        ({"latency_rows": 0}, r"latency_rows=0 is not allowed: it must be a whole number >= 1"),
        (
            {"latency_rows": 500, "throughput_rows": 100},
            r"latency_rows=500 must be smaller than throughput_rows=100",
        ),
        ({"margin": 2.0}, r"margin=2.0 is not allowed: it must be between 0 and 1"),
    ],
)
def test_bad_options_are_named(iris_bundle: Bundle, kwargs: dict, pattern: str) -> None:
    with pytest.raises(DataError, match=pattern):
        tune_model(iris_bundle.path, **{**TUNE, **kwargs})


def test_accelerators_need_the_source_model(iris_bundle: Bundle, tmp_path: Path) -> None:
    model = tmp_path / "m.onnx"
    shutil.copy(iris_bundle.onnx_path, model)
    with pytest.raises(DataError, match=r"engines='all' builds accelerators from the source"):
        tune_model(model, engines="all", **TUNE)


# ------------------------------------------------------------------------------- accelerators
def _fast_but_wrong(n_classes: int) -> AcceleratorCandidate:
    """An engine that is faster than any real one and wrong: it always says class 0."""

    def predict(X: np.ndarray) -> np.ndarray:
        out = np.zeros((len(X), n_classes))
        out[:, 0] = 1.0
        return out

    return AcceleratorCandidate(engine="always-zero", predict=predict)


def test_a_non_equivalent_accelerator_is_never_chosen(iris_bundle: Bundle) -> None:
    predictor = Predictor(iris_bundle.onnx_path)
    X, _ = iris_bundle.load_holdout()
    probes = probe_rows(X, schema=iris_bundle.schema, estimator=iris_bundle.load_estimator())
    # validate's probe sets: the holdout, range rows, rows on every split threshold, edge values.
    assert len(probes) > len(X) + 1000
    assert probes.dtype == np.float32 and probes.shape[1] == 4
    assert np.float32(1e30) in probes
    check = check_candidate(_fast_but_wrong(3), predictor, probes)
    assert check.equivalent is False
    assert check.label_mismatches > 0 and check.max_abs_diff == pytest.approx(1.0)
    check.speedups = {1000: 50.0, 10_000: 80.0}  # far faster than ONNX Runtime
    slow_but_right = AcceleratorCheck(
        name="right",
        equivalent=True,
        label_mismatches=0,
        max_abs_diff=0.0,
        probe_rows=10,
        speedups={10_000: 1.01},
    )
    assert choose_accelerator([check, slow_but_right]) is None
    assert check.chosen is False and check.reason.startswith("not chosen: ")
    assert "labels differ" in check.reason
    assert "equivalent but not faster (1.01×" in slow_but_right.reason


def test_tune_refuses_a_forced_non_equivalent_candidate(
    iris_bundle: Bundle, monkeypatch: pytest.MonkeyPatch
) -> None:
    def build(estimator, workdir, *, n_classes, threads, precision):
        return [_fast_but_wrong(n_classes)], ["forced: the test's own candidate only"]

    monkeypatch.setattr(accelerators, "build_candidates", build)
    report = tune_model(iris_bundle.path, engines="all", **TUNE)
    assert report.spec.accelerator is None
    assert read_tuning(iris_bundle.onnx_path).accelerator is None
    (check,) = report.accelerators
    assert check["verdict"] == "DIVERGENT" and check["chosen"] is False
    # It was timed at every size from one row to the throughput size.
    assert sorted(int(k) for k in check["speedups"]) == [1, 100, 200]
    assert not (iris_bundle.path / "accelerators").exists()


def test_equivalent_and_faster_is_chosen() -> None:
    fast = AcceleratorCheck(
        name="a",
        equivalent=True,
        label_mismatches=0,
        max_abs_diff=1e-8,
        probe_rows=10,
        speedups={1000: 0.8, 10_000: 2.5},
    )
    faster = AcceleratorCheck(
        name="b",
        equivalent=True,
        label_mismatches=0,
        max_abs_diff=1e-8,
        probe_rows=10,
        speedups={1000: 1.5, 10_000: 3.0},
    )
    assert choose_accelerator([fast, faster]) is faster
    assert faster.chosen and not fast.chosen
    assert accelerators.min_rows_of(faster) == 1000
    assert accelerators.min_rows_of(fast) == 10_000
    # tune times from one row: compiled code that wins there serves every call (lleaves on
    # LightGBM); one that loses on small calls starts where it stays more than 5 % faster.
    fast.speedups = {1: 1.43, 100: 2.94, 1000: 3.84, 10_000: 8.82}
    assert accelerators.min_rows_of(fast) == 1
    fast.speedups = {1: 0.20, 100: 1.05, 1000: 1.29, 10_000: 1.47}
    assert accelerators.min_rows_of(fast) == 1000
    fast.speedups = {1: 1.30, 100: 0.90, 1000: 1.20, 10_000: 1.50}  # wins at 1 row, not at 100
    assert accelerators.min_rows_of(fast) == 1000


def test_installed_compilers_are_checked_for_real(iris_bundle: Bundle) -> None:
    report = tune_model(iris_bundle.path, engines="all", **TUNE)
    assert any(line.startswith("lleaves: ") for line in report.accelerators_skipped)
    if importlib.util.find_spec("tl2cgen") is None:
        assert "tl2cgen: not installed (pip install tl2cgen)" in report.accelerators_skipped
        assert report.spec.accelerator is None
        return
    names = {c["name"]: c for c in report.accelerators}
    assert "tl2cgen-1t" in names, report.accelerators_skipped
    for check in names.values():
        # Compiled trees on float32 rows: the same decisions, probabilities within 1e-5.
        assert check["verdict"] == "EQUIVALENT", check
        assert check["max_abs_diff"] < 1e-5
    chosen = [c for c in names.values() if c["chosen"]]
    accelerator = report.spec.accelerator
    if chosen:
        assert accelerator is not None and accelerator["engine"] == "tl2cgen"
        assert accelerator["verdict"] == "EQUIVALENT"
        library = iris_bundle.path / accelerator["library"]
        assert library.is_file()
        Bundle.open(iris_bundle.path).check_file(accelerator["library"])
    else:
        assert accelerator is None


def test_score_runs_the_tuned_model(iris_bundle: Bundle, tmp_path: Path) -> None:
    import pandas as pd

    from onnxbridge import score

    spec = tune_model(iris_bundle.path, **TUNE).spec
    X, _ = iris_bundle.load_holdout()
    rows = pd.concat([X] * 5, ignore_index=True)
    rows.to_parquet(tmp_path / "rows.parquet")
    result = score(iris_bundle.path, tmp_path / "rows.parquet", tmp_path / "out.parquet")
    assert result.rows == len(rows)
    scored = pd.read_parquet(tmp_path / "out.parquet")
    plain = Predictor(iris_bundle.onnx_path, tuned=False).predict(rows).to_frame()
    assert (scored["label"].to_numpy() == plain["label"].to_numpy()).all()
    np.testing.assert_allclose(scored["proba_0"], plain["proba_0"], atol=1e-6)
    # score opens Predictor with one intra-op thread (which also turns a tuned row split off:
    # score runs its batches side by side itself): those fields are score's, the rest is tuned.
    used = Predictor(iris_bundle.onnx_path, intra_op_num_threads=1)
    own = {"intra_op_num_threads": 1, "row_split": 0}
    assert used.settings_for(1) == replace(spec.latency, **own).clamped()
    assert used.settings_for(10_000) == replace(spec.throughput, **own).clamped()


def _split(*timings: tuple[int, float, float]) -> list[dict[str, float]]:
    return [{"rows": n, "latency": lat, "throughput": thr} for n, lat, thr in timings]


@pytest.mark.parametrize(
    ("timings", "expected"),
    [
        # Latency faster everywhere / nowhere: every size, or none above the latency size.
        (((10, 1.0, 2.0), (100, 3.0, 4.0), (1000, 10.0, 20.0)), 1000),
        (((10, 2.0, 1.0), (100, 4.0, 3.0), (1000, 20.0, 10.0)), 1),
        # The usual crossing between 100 and 1 000 rows.
        (((10, 1.0, 2.0), (100, 3.0, 4.0), (1000, 30.0, 20.0)), 100),
        # One noisy size does not cut the latency regime short (a tune run on the reference
        # forest): stopping at the first loss gave 1 row and 100-row calls 1.10x slower.
        (((10, 13.7, 12.5), (100, 33.3, 36.7), (1000, 165.0, 176.0)), 1000),
        # Equal everywhere: the smallest boundary.
        (((10, 1.0, 1.0), (100, 2.0, 2.0)), 1),
    ],
)
def test_the_boundary_comes_closest_to_the_faster_regime_at_every_size(
    timings: tuple[tuple[int, float, float], ...], expected: int
) -> None:
    assert boundary_limit(1, _split(*timings)) == expected


def test_a_boundary_without_timings_is_the_latency_size() -> None:
    assert boundary_limit(7, []) == 7


@pytest.mark.skipif(available_cores() < 2, reason="rows are split across two cores or more")
def test_a_row_split_candidate_shares_the_100_row_timing_of_its_unsplit_twin(
    diabetes_bundle: Bundle,
) -> None:
    report = tune_model(diabetes_bundle.path, regime="throughput", write=False, **TUNE)
    step2 = [c for c in report.regimes[0].candidates if c.step == 2]
    winner = step2[0]
    (split,) = [
        c for c in step2 if c.settings == replace(winner.settings, row_split=available_cores())
    ]
    # A 100-row call is too small for two parts: it runs unsplit, exactly as the twin's does,
    # so the two were timed once there.
    model = diabetes_bundle.onnx_path.read_bytes()
    router = Router(model, TuningSpec(split.settings, split.settings, 1))
    assert router.settings_for(100) == winner.settings
    assert split.mid is not None and split.mid is winner.mid
    assert split.timing is not winner.timing
