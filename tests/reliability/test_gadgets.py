"""Gadgets: .skops files whose objects act when they are restored or collected.

Each gadget is a real object of numpy or scikit-learn whose ``__del__`` or ``__setstate__`` deletes
a folder or opens a network connection, stored by skops on an otherwise ordinary fitted model.
Every command that loads a model file runs in its own process on the gadget file (or on a bundle
whose model.skops is the gadget, with a card.json that matches it) and must refuse it: exit 2, one
``error:`` line naming the type, and nothing touched — the victim folder, every file of the test
folder, and no connection made to the listening socket the gadget points at.
"""

from __future__ import annotations

import contextlib
import select
import shutil
import socket
import subprocess
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import skops.io as sio
from sklearn.linear_model import LogisticRegression

from gadget_support import bundle_with, cli, snapshot
from onnxbridge import Bundle, Predictor, UnsafeModelFileError, load_estimator
from onnxbridge.engines import AcceleratedPredictor

AREA = "gadgets"


@dataclass
class Gadget:
    """A gadget object, the type name skops gives it, and how to see that it acted."""

    name: str
    obj: Any
    type_name: str
    acted: Callable[[], bool]
    defuse: Callable[[], None]


@dataclass
class Listener:
    """A TCP socket listening on 127.0.0.1 that closes every connection it accepts (so that a
    gadget waiting for an answer gets one and does not hang its process)."""

    server: socket.socket
    accepted: int = 0

    def serve(self) -> None:
        while True:
            try:
                connection, _ = self.server.accept()
            except OSError:  # closed at the end of the test
                return
            self.accepted += 1
            connection.close()

    def connected(self) -> bool:
        """Whether anything connected: accepted already, or still waiting in the queue."""
        readable, _, _ = select.select([self.server], [], [], 0)
        return self.accepted > 0 or bool(readable)


@pytest.fixture
def listener() -> Iterator[Listener]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    state = Listener(server)
    thread = threading.Thread(target=state.serve, daemon=True)
    thread.start()
    yield state
    with contextlib.suppress(OSError):  # wakes the accept() of the serving thread
        server.shutdown(socket.SHUT_RDWR)
    server.close()
    thread.join()


def _victim(folder: Path) -> Path:
    folder.mkdir()
    (folder / "precious.txt").write_text("keep me")
    return folder


def _datasource(kind: str, victim: Path) -> Gadget:
    # DataSource.__del__ removes its destination folder when it believes it made it
    # (numpy.lib._datasource): set the folder and the flag, and collecting it deletes the folder.
    from numpy.lib import _datasource

    cls = getattr(_datasource, kind)
    obj = cls.__new__(cls)
    obj._destpath = str(victim)
    obj._istmpdest = True

    def defuse() -> None:
        obj._istmpdest = False  # this process's own copy must not delete anything

    return Gadget(
        f"numpy {kind}.__del__ deletes a folder",
        obj,
        f"{cls.__module__}.{kind}",
        lambda: not (victim / "precious.txt").is_file(),
        defuse,
    )


def _scoring_monitor(listener: Listener) -> Gadget:
    # ScoringMonitor.__setstate__ connects to the listener address it holds (to see whether it can
    # reuse it) and, failing that, opens a listening socket of its own.
    from sklearn.callback._scoring_monitor import ScoringMonitor
    from sklearn.callback._transport import ListenerHandle

    obj = ScoringMonitor.__new__(ScoringMonitor)
    obj.__dict__.update(
        {"_listener_handle": ListenerHandle(listener.server.getsockname(), b"k" * 32), "_log": []}
    )
    return Gadget(
        "scikit-learn ScoringMonitor.__setstate__ opens a connection",
        obj,
        "sklearn.callback._scoring_monitor.ScoringMonitor",
        listener.connected,
        lambda: None,
    )


GADGETS = ["DataSource", "Repository", "ScoringMonitor"]


def _gadget(which: str, tmp_path: Path, listener: Listener) -> Gadget:
    if which == "ScoringMonitor":
        return _scoring_monitor(listener)
    return _datasource(which, _victim(tmp_path / "victim"))


def _gadget_file(gadget: Gadget, bundle: Bundle, tmp_path: Path) -> Path:
    """A fitted model carrying ``gadget``, saved with skops; this test's own copy defused."""
    X, y = bundle.load_holdout()
    model = LogisticRegression(max_iter=500).fit(X, y)
    model.cache_ = gadget.obj  # any attribute: skops stores the whole __dict__
    path = tmp_path / "gadget.skops"
    sio.dump(model, path)
    gadget.defuse()
    del model
    return path


# Every command that loads a model file, on the gadget file ({file}) or on a bundle whose
# model.skops is the gadget ({bundle}); {onnx}, {sample} and {data} are the legitimate iris files.
COMMANDS = {
    "convert-file": ["convert", "{file}", "--sample", "{sample}", "--out", "{out}"],
    "validate-reference": ["validate", "{onnx}", "--reference", "{file}", "--data", "{data}"],
    "convert-bundle": ["convert", "{bundle}"],
    "validate-bundle": ["validate", "{bundle}"],
    "bench-bundle": ["bench", "{bundle}", "--batch-sizes", "1", "--threads", "1", "--repeat", "1"],
}


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("which", GADGETS)
def test_every_command_refuses_a_gadget_and_touches_nothing(
    which: str, command: str, iris_bundle: Bundle, tmp_path: Path, listener: Listener, figures
) -> None:
    gadget = _gadget(which, tmp_path, listener)
    gadget_file = _gadget_file(gadget, iris_bundle, tmp_path)
    # The file really carries the gadget: skops names its type as one it does not trust.
    assert gadget.type_name in sio.get_untrusted_types(file=gadget_file)
    figures(AREA, "gadgets built", 1)

    X, y = iris_bundle.load_holdout()
    paths = {
        "file": gadget_file,
        "sample": tmp_path / "sample.csv",
        "data": tmp_path / "data.csv",
        "out": tmp_path / "out.onnx",
        "onnx": iris_bundle.onnx_path,
        "bundle": bundle_with(iris_bundle, gadget_file, tmp_path / "gadget-bundle"),
    }
    X.to_csv(paths["sample"], index=False)
    X.assign(target=y).to_csv(paths["data"], index=False)
    args = [arg.format(**paths) for arg in COMMANDS[command]]
    before = snapshot(tmp_path)

    result = cli(*args)
    figures(AREA, "commands run", 1)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "does not trust" in lines[0] and gadget.type_name in lines[0], lines[0]
    assert "--trust NAME" in lines[0]
    figures(AREA, "refused", 1)
    touched = sorted(set(before.items()) ^ set(snapshot(tmp_path).items()))
    figures(AREA, "files touched", len(touched))
    assert not touched
    figures(AREA, "gadget actions", int(gadget.acted()))
    assert not gadget.acted(), gadget.name


def test_tune_with_engines_refuses_a_gadget_bundle(
    iris_bundle: Bundle, tmp_path: Path, listener: Listener, figures
) -> None:
    # tune --engines all loads the model to compile its trees (after timing the sessions).
    pytest.importorskip("tl2cgen")
    gadget = _gadget("DataSource", tmp_path, listener)
    gadget_file = _gadget_file(gadget, iris_bundle, tmp_path)
    figures(AREA, "gadgets built", 1)
    bad_bundle = bundle_with(iris_bundle, gadget_file, tmp_path / "gadget-bundle")
    before = snapshot(tmp_path)
    result = cli(
        "tune",
        bad_bundle,
        "--engines",
        "all",
        "--throughput-rows",
        "100",
        "--repeat",
        "2",
        "--min-time",
        "0.002",
        "--no-progress",
    )
    figures(AREA, "commands run", 1)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "does not trust: numpy.lib.npyio.DataSource" in lines[0], lines[0]
    figures(AREA, "refused", 1)
    touched = sorted(set(before.items()) ^ set(snapshot(tmp_path).items()))
    figures(AREA, "files touched", len(touched))
    assert not touched
    assert not gadget.acted()


@pytest.mark.parametrize("which", GADGETS)
def test_the_python_loader_refuses_a_gadget(
    which: str, iris_bundle: Bundle, tmp_path: Path, listener: Listener, figures
) -> None:
    gadget = _gadget(which, tmp_path, listener)
    gadget_file = _gadget_file(gadget, iris_bundle, tmp_path)
    with pytest.raises(UnsafeModelFileError, match=r"does not trust: .*" + gadget.type_name):
        load_estimator(gadget_file)
    figures(AREA, "refused", 1)
    assert not gadget.acted(), gadget.name


def test_a_gadget_is_refused_even_beside_trusted_names(
    iris_bundle: Bundle, tmp_path: Path, listener: Listener
) -> None:
    # Trusting other names never trusts the gadget's: trust is by exact name, not by module.
    gadget = _gadget("DataSource", tmp_path, listener)
    gadget_file = _gadget_file(gadget, iris_bundle, tmp_path)
    with pytest.raises(UnsafeModelFileError, match=r"numpy\.lib\.npyio\.DataSource"):
        load_estimator(gadget_file, trusted=("numpy.lib.npyio.Repository", "numpy.mean"))
    assert not gadget.acted()
    np.testing.assert_equal((tmp_path / "victim" / "precious.txt").read_text(), "keep me")


def test_a_trusted_partial_never_trusts_the_function_it_wraps(
    iris_bundle: Bundle, tmp_path: Path, figures
) -> None:
    # functools.partial is on the list (HistGradientBoosting keeps one around check_array); skops
    # loads the function inside it as a node of its own, checked against the same list.
    from functools import partial

    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import FunctionTransformer

    victim = _victim(tmp_path / "victim")
    X, y = iris_bundle.load_holdout()
    model = make_pipeline(FunctionTransformer(), LogisticRegression(max_iter=500)).fit(X, y)
    model.steps[0][1].func = partial(shutil.rmtree, str(victim))
    gadget_file = tmp_path / "partial.skops"
    sio.dump(model, gadget_file)
    figures(AREA, "gadgets built", 1)
    with pytest.raises(UnsafeModelFileError, match=r"does not trust: shutil\.rmtree;"):
        load_estimator(gadget_file)
    figures(AREA, "refused", 1)
    assert (victim / "precious.txt").read_text() == "keep me"


# --------------------------------------------------------------------------- native code
_CONSTRUCTOR = r"""
#include <stdio.h>
__attribute__((constructor)) static void gadget(void) {
    FILE *f = fopen(MARKER, "w");
    if (f) { fputs("ran", f); fclose(f); }
}
"""


def _native_gadget_bundle(bundle: Bundle, tmp_path: Path) -> tuple[Path, Path]:
    """``bundle`` with a recorded "accelerator" whose library runs code as it is opened (a C
    constructor that writes a marker file), hashed in card.json as tune records it."""
    from engines_support import record_engine

    marker = tmp_path / "marker.txt"
    source_file = tmp_path / "gadget.c"
    source_file.write_text(_CONSTRUCTOR)
    library = tmp_path / "build" / "tl2cgen.so"
    library.parent.mkdir()
    subprocess.run(
        ["gcc", "-shared", "-fPIC", f'-DMARKER="{marker}"', "-o", library, source_file],
        check=True,
        capture_output=True,
    )
    record = record_engine(bundle, {"engine": "tl2cgen", "threads": 1, "min_rows": 1}, library)
    return marker, bundle.path / record["library"]


def test_a_recorded_library_never_loads_without_trust_native(
    iris_bundle: Bundle, tmp_path: Path, figures
) -> None:
    pytest.importorskip("tl2cgen")
    marker, library = _native_gadget_bundle(iris_bundle, tmp_path)
    figures(AREA, "gadgets built", 1)
    X, _ = iris_bundle.load_holdout()
    rows = tmp_path / "rows.parquet"
    X.to_parquet(rows)
    out = tmp_path / "scores.parquet"
    before = snapshot(tmp_path)

    result = cli("score", iris_bundle.path, rows, "--output", out, "--accelerator")
    figures(AREA, "commands run", 1)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "native code" in lines[0] and "--trust-native" in lines[0], lines[0]
    figures(AREA, "refused", 1)
    touched = sorted(set(before.items()) ^ set(snapshot(tmp_path).items()))
    figures(AREA, "files touched", len(touched))
    assert not touched and not marker.exists() and not out.exists()

    with pytest.raises(UnsafeModelFileError, match=r"native code.*trust_native=True"):
        AcceleratedPredictor.load(Predictor(iris_bundle.onnx_path))
    figures(AREA, "refused", 1)
    assert not marker.exists()
    assert str(library) not in Path("/proc/self/maps").read_text()

    # The flag is what opens it: the same command with it runs the library's code.
    result = cli(
        "score", iris_bundle.path, rows, "--output", out, "--accelerator", "--trust-native"
    )
    assert marker.read_text() == "ran", result.stderr
