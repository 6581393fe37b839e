"""SessionSettings and TuningSpec: validation, JSON round trips, real ORT session options."""

from __future__ import annotations

import json

import onnxruntime as ort
import pytest

from onnxbridge.errors import SessionSettingsError
from onnxbridge.runtime._settings import (
    SESSION_KEY,
    SessionSettings,
    TuningSpec,
    available_cores,
)


def test_defaults_are_onnxruntimes_own() -> None:
    options = SessionSettings().to_session_options()
    plain = ort.SessionOptions()
    assert options.intra_op_num_threads == plain.intra_op_num_threads == 0
    assert options.execution_mode == plain.execution_mode
    assert options.graph_optimization_level == plain.graph_optimization_level
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "1"


def test_every_setting_reaches_the_session_options() -> None:
    settings = SessionSettings(
        intra_op_num_threads=1,
        inter_op_num_threads=2,
        allow_spinning=False,
        execution_mode="parallel",
        graph_optimization_level="basic",
    )
    options = settings.to_session_options()
    assert options.intra_op_num_threads == 1
    assert options.inter_op_num_threads == 2
    assert options.execution_mode == ort.ExecutionMode.ORT_PARALLEL
    assert options.graph_optimization_level == ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    assert settings.label() == "1 thread, no spin, parallel ×2, opt basic"


def test_spinning_within_runs_only_stops_the_threads_after_each_run() -> None:
    settings = SessionSettings(intra_op_num_threads=2, spin_in_runs_only=True)
    options = settings.to_session_options()
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "1"
    assert options.get_session_config_entry("session.force_spinning_stop") == "1"
    assert settings.label() == "2 threads, spin in runs, sequential, opt all"
    # Without spinning the flag has nothing to stop; ONNX Runtime's defaults never set it.
    for plain in (SessionSettings(allow_spinning=False, spin_in_runs_only=True), SessionSettings()):
        with pytest.raises(RuntimeError, match="does not have configuration with key"):
            plain.to_session_options().get_session_config_entry("session.force_spinning_stop")
    assert SessionSettings.from_dict(json.loads(json.dumps(settings.to_dict()))) == settings
    # Settings stored before the field existed still read back (it defaults to off).
    old = {k: v for k, v in settings.to_dict().items() if k != "spin_in_runs_only"}
    assert SessionSettings.from_dict(old).spin_in_runs_only is False


def test_onnxbridge_default_is_one_thread_per_core_without_spinning() -> None:
    settings = SessionSettings.onnxbridge_default()
    assert settings.intra_op_num_threads == available_cores()
    assert settings.allow_spinning is False


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"intra_op_num_threads": -1}, r"intra_op_num_threads must be an integer >= 0.*-1"),
        ({"inter_op_num_threads": 1.5}, r"inter_op_num_threads must be an integer >= 0.*1\.5"),
        ({"intra_op_num_threads": 5000}, r"intra_op_num_threads must be at most 1024.*5000"),
        ({"allow_spinning": "yes"}, r"allow_spinning must be true or false, got 'yes'"),
        ({"spin_in_runs_only": 1}, r"spin_in_runs_only must be true or false, got 1"),
        ({"execution_mode": "fast"}, r"execution_mode 'fast' is not one of sequential, parallel"),
        ({"graph_optimization_level": 99}, r"graph_optimization_level 99 is not one of disabled"),
    ],
)
def test_bad_settings_are_refused(kwargs: dict, pattern: str) -> None:
    with pytest.raises(SessionSettingsError, match=pattern):
        SessionSettings(**kwargs)


def test_settings_round_trip_and_unknown_keys() -> None:
    settings = SessionSettings(intra_op_num_threads=2, allow_spinning=False)
    assert SessionSettings.from_dict(json.loads(json.dumps(settings.to_dict()))) == settings
    with pytest.raises(SessionSettingsError, match=r"unknown session setting\(s\) threads"):
        SessionSettings.from_dict({"threads": 2})
    with pytest.raises(SessionSettingsError, match=r"must be a JSON object, got list"):
        SessionSettings.from_dict([2])


def test_clamped_never_exceeds_the_cores() -> None:
    settings = SessionSettings(intra_op_num_threads=64, inter_op_num_threads=64)
    clamped = settings.clamped(cores=2)
    assert (clamped.intra_op_num_threads, clamped.inter_op_num_threads) == (2, 2)
    assert SessionSettings(intra_op_num_threads=1).clamped(cores=2).intra_op_num_threads == 1


def test_tuning_spec_rule_and_json() -> None:
    spec = TuningSpec(
        latency=SessionSettings(intra_op_num_threads=1, allow_spinning=False),
        throughput=SessionSettings(intra_op_num_threads=2, allow_spinning=False),
        latency_max_rows=100,
        accelerator={"engine": "tl2cgen", "min_rows": 1000},
        measured={"cores": 2},
    )
    assert spec.settings_for(1) is spec.latency
    assert spec.settings_for(100) is spec.latency
    assert spec.settings_for(101) is spec.throughput
    assert spec.regime_for(101) == "throughput"
    again = TuningSpec.from_json(spec.to_json())
    assert again == spec
    assert TuningSpec.find_in_props({SESSION_KEY: spec.to_json()}) == spec
    assert TuningSpec.find_in_props({"other": "x"}) is None


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        ("{not json", r"onnxbridge.session entry is not valid JSON.*re-run `onnxbridge tune`"),
        ('{"latency": {}}', r"need 'latency' and 'throughput' entries"),
        (
            '{"latency": {}, "throughput": {"intra_op_num_threads": -2}}',
            r"intra_op_num_threads must be an integer >= 0",
        ),
        (
            '{"latency": {}, "throughput": {}, "latency_max_rows": -1}',
            r"latency_max_rows must be an integer >= 0, got -1",
        ),
    ],
)
def test_damaged_specs_are_refused(text: str, pattern: str) -> None:
    with pytest.raises(SessionSettingsError, match=pattern):
        TuningSpec.from_json(text)
