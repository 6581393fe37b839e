"""Benchmark: reading an XGBoost and a LightGBM model of about 1 M nodes into a tree spec.

Models (fitted once, cached in ``benchmarks/data/``, ``random_state=0``; fitting takes minutes)
on ``make_regression(60_000, 20)`` with 10 % of the values missing, about 1 M nodes each: an
XGBRegressor of 200 trees of depth 13 (about 2 400 leaves a tree) and an LGBMRegressor of 100
trees of 5 000 leaves.

Each measurement runs in a fresh process that loads the cached model and reads it once with
``from_xgboost`` / ``from_lightgbm`` (the step of a conversion that turns the library's model
into arrays; the graph is not built). Time is that call's wall clock; memory is its peak: the
process's RSS high-water mark (``VmHWM``, reset after the model is loaded) minus the RSS
before the call. With ``--heap`` a second process per round reads again under
``tracemalloc`` (which slows the reader down, so its time is not used) for the peak of the
Python heap: Python objects and numpy arrays, not the libraries' own C++ buffers.

``--src LABEL=PATH`` (repeatable) reads with the onnxbridge found in ``PATH`` (a ``src``
folder, e.g. an older commit's ``git archive``), to compare two versions in the same run;
the default is this checkout's ``src``.

    PYTHONPATH=src .venv/bin/python benchmarks/booster_readers.py [--repeat 3]
        [--models xgboost,lightgbm] [--heap] [--src before=/tmp/old/src --src after=src]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "data"
SRC = Path(__file__).resolve().parent.parent / "src"
TREES = 100
LEAVES = 5_000


def _data() -> tuple[Any, Any]:
    import numpy as np
    from sklearn.datasets import make_regression

    X, y = make_regression(n_samples=60_000, n_features=20, noise=5.0, random_state=0)
    rng = np.random.RandomState(0)
    X[rng.rand(*X.shape) < 0.1] = np.nan
    return X, y


def _fitted(name: str) -> Any:
    """The cached model, fitted (and cached) on first use."""
    import joblib

    path = DATA / f"booster_readers_{name}.joblib"
    if path.is_file():
        return joblib.load(path)
    X, y = _data()
    if name == "xgboost":
        from xgboost import XGBRegressor

        model = XGBRegressor(
            n_estimators=2 * TREES,
            tree_method="hist",
            max_depth=13,
            min_child_weight=0.0,
            random_state=0,
            n_jobs=2,
        )
    else:
        from lightgbm import LGBMRegressor

        model = LGBMRegressor(
            n_estimators=TREES,
            num_leaves=LEAVES,
            min_child_samples=2,
            random_state=0,
            n_jobs=2,
            verbose=-1,
        )
    model.fit(X, y)
    DATA.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".tmp")
    joblib.dump(model, partial)
    partial.replace(path)
    return model


def _status_mib(field: str) -> float:
    with open("/proc/self/status") as f:
        line = next(line for line in f if line.startswith(field + ":"))
    return int(line.split()[1]) / 1024


def _reset_peak() -> bool:
    """Reset this process's RSS high-water mark (Linux); False where that is not allowed."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return False
    return True


def child(name: str, heap: bool) -> None:
    """One measurement (in its own process): prints a JSON line."""
    import tracemalloc

    from onnxbridge.convert import _tree_ensemble

    model = _fitted(name)
    read = _tree_ensemble.from_xgboost if name == "xgboost" else _tree_ensemble.from_lightgbm
    reset = _reset_peak()
    before = _status_mib("VmRSS")
    if heap:
        tracemalloc.start()
    start = time.perf_counter()
    spec, _ = read(model)
    seconds = time.perf_counter() - start
    outcome: dict[str, Any] = {"model": name, "nodes": len(spec.tree), "seconds": seconds}
    outcome["rss_mib"] = _status_mib("VmHWM") - before if reset else None
    if heap:
        outcome["heap_mib"] = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
    print(json.dumps(outcome), flush=True)


def _run_child(name: str, src: str, heap: bool = False) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": src}
    command = [sys.executable, __file__, "--child", name, *(["--heap"] if heap else [])]
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        tail = done.stderr.strip().splitlines()[-1:] or [""]
        raise SystemExit(f"the {name} reader failed with {src}: {tail[0]}")
    return dict(json.loads(lines[-1]))


def _summary(values: list[float]) -> str:
    return f"{statistics.median(values):8.2f} [{min(values):.2f}-{max(values):.2f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="xgboost,lightgbm")
    parser.add_argument("--repeat", type=int, default=3, help="rounds, sources interleaved")
    parser.add_argument("--src", action="append", metavar="LABEL=PATH")
    parser.add_argument("--heap", action="store_true", help="also the Python heap's peak")
    parser.add_argument("--child", metavar="MODEL")
    args = parser.parse_args()
    if args.child:
        child(args.child, args.heap)
        return
    sources = dict(s.split("=", 1) for s in args.src or [f"current={SRC}"])
    models = [m for m in args.models.split(",") if m]
    for name in models:
        _fitted(name)  # fit and cache before anything is timed
    print(f"one read per fresh process, median [min-max] of {args.repeat}")
    print(f"{'model':<10}{'source':<10}{'Mnode':>6}{'s':>20}{'peak RSS MiB':>22}{'heap MiB':>22}")
    for name in models:
        runs: dict[str, list[dict[str, Any]]] = {label: [] for label in sources}
        for _ in range(args.repeat):
            for label, src in sources.items():
                found = _run_child(name, src)
                if args.heap:
                    found["heap_mib"] = _run_child(name, src, heap=True)["heap_mib"]
                runs[label].append(found)
        for label, found in runs.items():
            rss = [r["rss_mib"] for r in found if r["rss_mib"] is not None]
            heap = [r["heap_mib"] for r in found if "heap_mib" in r]
            print(
                f"{name:<10}{label:<10}{found[0]['nodes'] / 1e6:>6.2f}"
                f"{_summary([r['seconds'] for r in found]):>20}"
                f"{_summary(rss) if rss else 'n/a':>22}"
                f"{_summary(heap) if heap else 'n/a':>22}",
                flush=True,
            )


if __name__ == "__main__":
    main()
