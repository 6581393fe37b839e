"""Benchmark: converting big forests, onnxbridge against skl2onnx, time and peak memory.

Models (fitted once, cached in ``benchmarks/data/``, ``random_state=0``, float32 features):

- ``small``: unpruned ExtraTreesClassifier(n_estimators=10) on
  ``make_classification(300_000, 28, n_informative=15)`` (about 1.2 M nodes);
- ``big``: unpruned ExtraTreesRegressor(n_estimators=16, max_features=0.5) on
  ``make_regression(1_700_000, 28, n_informative=15, noise=1)`` (about 54 M nodes);
- ``medium``, ``large`` and ``half``: the first 3, 4 and 8 trees of ``big`` (about 10 M, 14 M and
  27 M nodes);
- ``rf80``: RandomForestRegressor(n_estimators=80, max_features=0.3) on the first 100 000 rows
  of ``big``'s data (about 10 M nodes in trees of about 126 000).

Each measurement runs in a fresh process that loads the cached model and converts it once:

- ``onnxbridge``: ``convert_unchecked(model, X[:100], precision="float")`` (the graph, onnx.checker
  and one ONNX Runtime session on the sample; no comparison with scikit-learn);
- ``onnxbridge+check``: ``convert_estimator(model, X[:100])`` (also the comparison with
  scikit-learn and the float32 precision probes);
- ``onnxbridge-whole``: as ``onnxbridge`` with ``tree_block_nodes=0``: each ensemble one
  operator, not blocks of whole trees of at most 1 Mi nodes;
- ``skl2onnx``: skl2onnx's own ``convert_sklearn`` (zipmap off, the same opsets), then
  ``SerializeToString``.

``--end-to-end`` then takes one model through the whole path, each step in a fresh process:
``convert`` (``convert_estimator``, saved with external data as ``benchmarks/data/
big_forest_<model>.onnx`` + ``.onnx.data``), ``validate`` (``validate_model`` on 2 000 held-out
rows and the probe sets, all three runtimes) and ``score`` (1 000 000 rows from a Parquet file).
With ``--dense`` it converts to the largest form instead (``precision="double"``,
``ml_opset=3``: about 44 bytes a node, so ``big`` passes 2 GiB), saved as
``big_forest_<model>_dense.onnx``.

``--load`` converts one model twice (``convert_unchecked``, float, blocks and whole) and saves
both; then, in a fresh process per form and round, ONNX Runtime (default options) opens the
saved model: the load's time and the process's peak RSS by then, the median time of one row
(2 000 calls) and of 10 000 rows (5 calls).

Time is the conversion's wall clock; memory is the process's peak RSS (``VmHWM``) and the
peak minus the RSS with the model loaded; the last columns divide onnxbridge's by skl2onnx's.
Every child runs under an address-space cap (``RLIMIT_AS``, ``--cap-gib``): running out of it
is recorded as out of memory.

    PYTHONPATH=src .venv/bin/python benchmarks/big_forest.py [--models small,medium,big]
        [--tools onnxbridge,onnxbridge+check,skl2onnx] [--cap-gib 20] [--repeat 1]
        [--end-to-end big [--dense]] [--load rf80]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

DATA = Path(__file__).resolve().parent / "data"
# Models made of the first trees of ``big``.
_PARTS = {"medium": 3, "large": 4, "half": 8}
N_FEATURES = 28
_CONVERTS = ("onnxbridge", "onnxbridge+check", "onnxbridge-whole", "skl2onnx")
_FORMS = {"blocks": None, "whole": 0}  # tree_block_nodes: the default, one operator


def _data(name: str) -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import make_classification, make_regression

    if name == "small":
        X, y = make_classification(
            n_samples=300_000, n_features=N_FEATURES, n_informative=15, random_state=0
        )
    else:
        X, y = make_regression(
            n_samples=1_700_000,
            n_features=N_FEATURES,
            n_informative=15,
            noise=1.0,
            random_state=0,
        )
    return X.astype(np.float32), y


def _fitted(name: str) -> Any:
    """The cached model, fitted (and cached) on first use."""
    import joblib
    from sklearn.ensemble import ExtraTreesClassifier, ExtraTreesRegressor, RandomForestRegressor

    path = DATA / f"big_forest_{name}.joblib"
    if path.is_file():
        return joblib.load(path)
    if name in _PARTS:
        model = _fitted("big")
        model.estimators_ = model.estimators_[: _PARTS[name]]
        model.n_estimators = _PARTS[name]
        return _cached(model, path)
    X, y = _data(name)
    if name == "small":
        model = ExtraTreesClassifier(n_estimators=10, random_state=0, n_jobs=2)
    elif name == "rf80":
        X, y = X[:100_000], y[:100_000]
        model = RandomForestRegressor(n_estimators=80, max_features=0.3, random_state=0, n_jobs=2)
    else:
        model = ExtraTreesRegressor(n_estimators=16, max_features=0.5, random_state=0, n_jobs=2)
    model.fit(X, y)
    return _cached(model, path)


def _cached(model: Any, path: Path) -> Any:
    import joblib

    DATA.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".tmp")
    joblib.dump(model, partial)
    partial.replace(path)
    return model


def _peak_mib() -> float:
    """This process's peak RSS (``VmHWM``: unlike ``ru_maxrss``, not inherited across exec)."""
    with open("/proc/self/status") as f:
        line = next(line for line in f if line.startswith("VmHWM:"))
    return int(line.split()[1]) / 1024


def _current_rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _convert(tool: str, model: Any, sample: np.ndarray) -> int:
    """Convert ``model`` with ``tool``; returns the model's size in bytes."""
    if tool == "skl2onnx":
        from skl2onnx import convert_sklearn
        from skl2onnx.common.data_types import FloatTensorType

        from onnxbridge.convert._opsets import choose_opsets

        options = {id(model): {"zipmap": False}} if hasattr(model, "classes_") else None
        onx = convert_sklearn(
            model,
            initial_types=[("X", FloatTensorType([None, sample.shape[1]]))],
            options=options,
            target_opset=choose_opsets().as_target(),
        )
        return len(onx.SerializeToString())
    if tool in ("onnxbridge", "onnxbridge-whole"):
        from onnxbridge.convert._core import convert_unchecked

        blocks = {"tree_block_nodes": 0} if tool == "onnxbridge-whole" else {}
        return convert_unchecked(model, sample, precision="float", **blocks).model.ByteSize()
    from onnxbridge import convert_estimator

    return convert_estimator(model, sample).model.ByteSize()


def _model_path(name: str) -> Path:
    return DATA / f"big_forest_{name}.onnx"


# --dense: the end-to-end model in its largest form (float64 lists, ai.onnx.ml opset 3).
_DENSE = {"precision": "double", "ml_opset": 3}


def _step(step: str, name: str, model: Any, dense: bool = False) -> dict[str, Any]:
    """One step of ``--end-to-end``; returns what it found."""
    import pandas as pd

    path = _model_path(f"{name}_dense" if dense else name)
    if step.startswith("save-"):
        from onnxbridge.convert._core import convert_unchecked

        form = step.removeprefix("save-")
        blocks = _FORMS[form]
        sample = _data("big")[0][:100]
        options = {} if blocks is None else {"tree_block_nodes": blocks}
        result = convert_unchecked(model, sample, precision="float", **options)
        result.save(_model_path(f"{name}_{form}"))
        return {"bytes": result.model.ByteSize()}
    if step.startswith("load-"):
        return _load(_model_path(f"{name}_{step.removeprefix('load-')}"))
    if step == "convert":
        from onnxbridge import convert_estimator

        sample = _data("small" if name == "small" else "big")[0][:100]
        result = convert_estimator(model, sample, **(_DENSE if dense else {}))
        result.save(path, external_data=True)
        data = path.with_name(path.name + ".data")
        return {"bytes": path.stat().st_size + data.stat().st_size, "precision": result.precision}
    X = np.random.default_rng(1).normal(size=(1_000_000, N_FEATURES)).astype(np.float32)
    import onnx

    from onnxbridge.convert import read_metadata

    metadata = read_metadata(onnx.load(str(path), load_external_data=False))
    assert metadata is not None, "convert writes the metadata"
    columns = metadata.inputs[0]["columns"]
    if step == "validate":
        from onnxbridge.validate import validate_model

        report = validate_model(path, model, pd.DataFrame(X[:2000], columns=columns))
        return {"verdict": report.verdict}
    from onnxbridge import score

    rows = DATA / "big_forest_rows.parquet"
    if not rows.is_file():
        pd.DataFrame(X, columns=columns).to_parquet(rows)
    out = DATA / "big_forest_scores.parquet"
    done = score(path, rows, out, overwrite=True)
    return {"rows": done.rows}


def _load(path: Path) -> dict[str, Any]:
    """Open ``path`` in ONNX Runtime; the load's time and peak, one row's and 10 000 rows'."""
    import statistics

    import onnx
    import onnxruntime as ort

    graph = onnx.load(str(path), load_external_data=False).graph
    operators = sum(1 for n in graph.node if n.domain == "ai.onnx.ml" and "Tree" in n.op_type)
    start = time.perf_counter()
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    found: dict[str, Any] = {"load_s": time.perf_counter() - start, "load_peak_mib": _peak_mib()}
    rows = np.random.default_rng(1).normal(size=(10_000, N_FEATURES)).astype(np.float32)
    feed = session.get_inputs()[0].name
    for key, block, calls in (("one_row_s", rows[:1], 2000), ("rows_s", rows, 5)):
        times = []
        for _ in range(calls):
            began = time.perf_counter()
            session.run(None, {feed: block})
            times.append(time.perf_counter() - began)
        found[key] = statistics.median(times)
    return {**found, "operators": operators}


def child(tool: str, name: str, cap_gib: float, dense: bool = False) -> None:
    """One measurement (in its own process): prints a JSON line."""
    # Scoring and loading need only the .onnx.
    model = _fitted(name) if tool != "score" and not tool.startswith("load-") else None
    converts = tool in _CONVERTS
    sample = _data("small" if name == "small" else "big")[0][:100] if converts else None
    nodes = sum(int(e.tree_.node_count) for e in model.estimators_) if model is not None else 0
    import onnxbridge.convert._core  # noqa: F401  (imports are not the conversion's cost)

    loaded = _current_rss_mib()
    cap = int(cap_gib * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    start = time.perf_counter()
    outcome: dict[str, Any] = {"tool": tool, "model": name, "nodes": nodes}
    try:
        if not converts:
            outcome.update(_step(tool, name, model, dense))
        else:
            assert sample is not None
            outcome["bytes"] = _convert(tool, model, sample)
        outcome["status"] = "ok"
    except MemoryError:
        outcome["status"] = "out of memory"
    except Exception as exc:  # a failure is a result too
        outcome["status"] = f"failed: {type(exc).__name__}: {str(exc).splitlines()[0][:120]}"
    outcome["seconds"] = time.perf_counter() - start
    outcome["peak_mib"] = _peak_mib()
    outcome["loaded_mib"] = loaded
    print(json.dumps(outcome), flush=True)


def _available_gib() -> float:
    with open("/proc/meminfo") as f:
        line = next(line for line in f if line.startswith("MemAvailable:"))
    return int(line.split()[1]) / 2**20


def _run_child(tool: str, name: str, cap_gib: float, dense: bool = False) -> dict[str, Any]:
    # A shared machine: start only when the cap fits in what is free, so that a child that
    # grows to its cap cannot push other processes out of memory.
    waited = 0
    while _available_gib() < cap_gib:
        if waited >= 900:
            return {"tool": tool, "model": name, "status": "not run: memory in use elsewhere"}
        time.sleep(10)
        waited += 10
    command = [sys.executable, __file__, "--child", tool, name, "--cap-gib", str(cap_gib)]
    command += ["--dense"] if dense else []
    done = subprocess.run(command, capture_output=True, text=True)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if lines:
        return json.loads(lines[-1])
    # Under the address-space cap an allocation that fails in C++ aborts the process.
    if "bad_alloc" in done.stderr or "MemoryError" in done.stderr:
        status = f"out of memory (cap {cap_gib:g} GiB)"
    elif done.returncode < 0:
        status = f"killed by signal {-done.returncode} (cap {cap_gib:g} GiB)"
    else:
        tail = done.stderr.strip().splitlines()[-1:] or [""]
        status = f"failed ({done.returncode}): {tail[0][:100]}"
    return {"tool": tool, "model": name, "status": status}


def _row(found: dict[str, Any], base: dict[str, Any]) -> str:
    head = f"{found['model']:<7}{found['tool']:<17}"
    if found.get("status") != "ok":
        return head + found["status"]
    millions = found["nodes"] / 1e6
    used = found["peak_mib"] - found["loaded_mib"]
    line = (
        f"{head}{millions:>6.2f}{found['seconds']:>7.1f}{found.get('spread', 0.0):>6.1f}"
        f"{found['seconds'] / millions:>6.2f}"
        f"{found['peak_mib']:>9.0f}{used:>7.0f}{used / millions:>6.0f}"
        f"{found['bytes'] / found['nodes']:>7.1f}"
    )
    if found["tool"] != "skl2onnx" and base.get("status") == "ok":
        base_used = base["peak_mib"] - base["loaded_mib"]
        line += f"{found['seconds'] / base['seconds']:>6.2f}x{used / base_used:>6.2f}x"
    elif found["tool"] != "skl2onnx" and base:
        line += f"  skl2onnx: {base.get('status')}"
    return line


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="small,big")
    parser.add_argument("--tools", default=",".join(_CONVERTS))
    parser.add_argument("--cap-gib", type=float, default=20.0)
    parser.add_argument("--repeat", type=int, default=1, help="rounds, tools interleaved")
    parser.add_argument("--end-to-end", metavar="MODEL", help="convert, validate and score it")
    parser.add_argument("--dense", action="store_true", help="--end-to-end in the largest form")
    parser.add_argument("--load", metavar="MODEL", help="load it in blocks and whole")
    parser.add_argument("--child", nargs=2, metavar=("TOOL", "MODEL"))
    args = parser.parse_args()
    if args.child:
        child(args.child[0], args.child[1], args.cap_gib, args.dense)
        return
    models = [m for m in args.models.split(",") if m]
    if args.end_to_end and not (DATA / f"big_forest_{args.end_to_end}.joblib").is_file():
        _fitted(args.end_to_end)
    tools = [t for t in args.tools.split(",") if t]
    for name in models:
        if not (DATA / f"big_forest_{name}.joblib").is_file():
            _fitted(name)  # fit and cache before anything is timed
    if models:
        _print_table(models, tools, args)
    if args.end_to_end:
        _end_to_end(args.end_to_end, args.cap_gib, args.dense)
    if args.load:
        _fitted(args.load)
        _load_table(args.load, args.repeat, args.cap_gib)


def _load_table(name: str, repeat: int, cap_gib: float) -> None:
    for form in _FORMS:
        saved = _run_child(f"save-{form}", name, cap_gib)
        if saved.get("status") != "ok":
            print(f"load, {name}: saving {form} {saved.get('status')}")
            return
    print(
        f"load, {name}: ONNX Runtime's defaults, a fresh process per load, median of {repeat}; "
        "1 row: median of 2 000 calls, 10 000 rows: of 5"
    )
    print(f"{'form':<8}{'ops':>5}{'load s':>8}{'range':>7}{'peak MiB':>10}{'1 row us':>10}"
          f"{'10k rows s':>12}")  # fmt: skip
    found = {}
    for form in _FORMS:
        rounds = [_run_child(f"load-{form}", name, cap_gib) for _ in range(repeat)]
        failed = [r for r in rounds if r.get("status") != "ok"]
        if failed:
            print(f"{form:<8}{failed[0].get('status')}")
            return
        found[form] = row = _median(rounds, key="load_s")
        print(
            f"{form:<8}{row['operators']:>5}{row['load_s']:>8.2f}{row['spread']:>7.2f}"
            f"{row['load_peak_mib']:>10.0f}{row['one_row_s'] * 1e6:>10.1f}{row['rows_s']:>12.3f}"
        )
    blocks, whole = found["blocks"], found["whole"]
    print(
        f"{'blocks / whole':<21}{blocks['load_s'] / whole['load_s']:>6.2f}x"
        f"{blocks['load_peak_mib'] / whole['load_peak_mib']:>16.2f}x"
        f"{blocks['one_row_s'] / whole['one_row_s']:>9.2f}x"
        f"{blocks['rows_s'] / whole['rows_s']:>11.2f}x"
    )


def _print_table(models: list[str], tools: list[str], args: argparse.Namespace) -> None:
    print(
        f"one conversion per fresh process, median of {args.repeat} (range: max - min), "
        f"address space capped at {args.cap_gib:g} GiB; ratios: onnxbridge / skl2onnx"
    )
    print(f"{'model':<7}{'tool':<17}{'Mnode':>6}{'s':>7}{'range':>6}{'s/M':>6}{'peakMiB':>9}{'+MiB':>7}"
          f"{'MiB/M':>6}{'B/node':>7}{'time':>7}{'memory':>7}")  # fmt: skip
    for name in models:
        rounds = [
            {tool: _run_child(tool, name, args.cap_gib) for tool in tools}
            for _ in range(args.repeat)
        ]
        found = {tool: _median([r[tool] for r in rounds]) for tool in tools}
        for result in found.values():
            print(_row(result, found.get("skl2onnx", {})), flush=True)


def _end_to_end(name: str, cap_gib: float, dense: bool) -> None:
    form = ", precision double, ml opset 3" if dense else ""
    print(f"end to end, {name}{form}: step, seconds, peak MiB, what it found")
    for step in ("convert", "validate", "score"):
        found = _run_child(step, name, cap_gib, dense)
        if found.get("status") != "ok":
            print(f"{step:<9}{found.get('status')}", flush=True)
            return
        keys = ("bytes", "precision", "verdict", "rows")
        what = ", ".join(f"{k}={found[k]}" for k in keys if k in found)
        print(f"{step:<9}{found['seconds']:>7.1f}{found['peak_mib']:>9.0f}  {what}", flush=True)


def _median(results: list[dict[str, Any]], key: str = "seconds") -> dict[str, Any]:
    """The run of median ``key`` time (the first failure if any failed), with their range."""
    failed = [r for r in results if r.get("status") != "ok"]
    if failed:
        return failed[0]
    ordered = sorted(results, key=lambda r: r[key])
    middle = dict(ordered[(len(ordered) - 1) // 2])
    middle["spread"] = ordered[-1][key] - ordered[0][key]
    return middle


if __name__ == "__main__":
    main()
