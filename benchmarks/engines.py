"""Benchmark: every engine on the benchmark models of docs/benchmarks.md, per batch size.

Benchmark models: the reference model (Iris forest, 10 trees, scored on
``np.random.RandomState(0).rand(N, 4)`` as float32) and, on the benchmark data
(``make_classification(20000, 28, n_informative=15, random_state=0)``, fitted on the first
10 000 rows, scored on the rest, tiled for larger batches), with ``random_state=0``:
RandomForestClassifier with 10 and 100 trees, HistGradientBoostingClassifier(max_iter=100),
GradientBoostingClassifier(n_estimators=100), LGBMClassifier(n_estimators=100),
LogisticRegression and StandardScaler + LogisticRegression.

Engines, each timed on the same float32 rows with interleaved repeats
(``onnxbridge.bench.measure_many``):

- ``sklearn``: ``estimator.predict`` (and ``sklearn-2j``, ``n_jobs=2``, for the forests);
- ``ort-default``: ``onnxruntime.InferenceSession(path)`` with its defaults, ``session.run``;
- ``ort-tuned``: ``session.run`` on the session ``onnxbridge tune`` chose for the batch size;
- ``onnxbridge``: ``Predictor.predict`` with the tuned settings (the end-to-end path);
- ``tl2cgen-Nt`` / ``lleaves-Nt``: compiled trees, when installed and equivalent to the ONNX
  model on the probe rows (a non-equivalent build is reported and not timed), called through
  the engine's own API: tl2cgen's ``Predictor.predict`` on a DMatrix (the library tune builds:
  float32 trees for a float model), lleaves' ``Model.predict(X, n_jobs=N)``;
- ``onnxbridge-accel`` (every batch size): ``AcceleratedPredictor.predict`` with an equivalent
  compiled model as its compiled engine — lleaves for LightGBM, else the tl2cgen library, of as
  many threads as cores — what ``tune --engines all`` records and ``score --accelerator`` runs
  (the whole path: input checks, the compiled trees, labels from the probabilities). tune
  records the accelerator from the smallest measured size (1, 100, 1 000, 10 000 rows) from
  which it stays faster, so a model whose accelerator loses at 1 or 100
  rows keeps ONNX Runtime there: the summary's ``best`` applies that rule to the run's own
  timings (the accelerator from the smallest size from which it is > 5 % faster);
- hummingbird is not installed here (it pins ``onnx<=1.16.1``; it needs its own environment).

Every engine's repeat is followed by a pause (``SPIN_COOLDOWN``) before the next engine is timed:
ONNX Runtime's spinning threads (and OpenMP's, in scikit-learn's boosting, LightGBM and tl2cgen)
keep spinning for tens of milliseconds after their last call, and on 2 cores that made the engine
timed next up to 5× slower — the earlier runs in docs/benchmarks.md penalised whoever came after
a spinning session.

Models whose conversion fails here are skipped with the reason. Each (model, batch) line prints
every engine's median per call and its ratio to the fastest engine of that line (1.00 = fastest).

    PYTHONPATH=src .venv/bin/python benchmarks/engines.py [--sizes 1,100,10000,100000]
        [--repeat 5] [--small-repeat 15] [--min-time 0.05] [--models rf10,rf100,...]
        [--json out.json] [--no-accelerators]
    PYTHONPATH=src .venv/bin/python benchmarks/engines.py --summarize out.json [more.json ...]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
from models import benchmark_estimator

from onnxbridge import Predictor, convert_estimator, train_bundle
from onnxbridge.bench import SPIN_COOLDOWN, measure_many
from onnxbridge.engines._build import build_candidates, check_candidate, probe_rows
from onnxbridge.errors import first_line
from onnxbridge.runtime import SessionSettings
from onnxbridge.tune import tune_model

MODELS = ("reference", "rf10", "rf100", "hgb", "gb", "lgbm", "lr", "scaled-lr")
# Batches from this size run on the accelerator in the ``onnxbridge-accel`` engine: the smallest
# size `tune --engines all` measures it at (it records the smallest from which it stays faster).
ACCEL_MIN_ROWS = 1
# Batches up to this size, and larger ones whose onnxbridge call lasts under SHORT_CALL seconds
# (a linear model's 100 000 rows: ~1.5 ms), take ``--small-repeat`` repeats: their calls last
# micro- to a few milliseconds, so more repeats cost little and tame the 10-20 % swings of
# single lines.
SMALL_ROWS = 1000
SHORT_CALL = 0.005


def _prepare(name: str, tmp: Path) -> tuple[Any, Path, np.ndarray, str]:
    """The fitted estimator, its .onnx, the rows to score and a description."""
    if name == "reference":
        bundle, result = train_bundle(
            "iris", "RandomForestClassifier(n_estimators=10, random_state=42)", tmp / "iris"
        )
        from onnxbridge import convert_bundle

        convert_bundle(bundle, opset=15)
        rows = np.random.RandomState(0).rand(10_000, 4).astype(np.float32)
        return result.estimator, bundle.onnx_path, rows, "reference model (Iris forest, 10 trees)"
    from sklearn.datasets import make_classification

    X, y = make_classification(
        n_samples=20_000, n_features=28, n_informative=15, n_classes=2, random_state=0
    )
    X = X.astype(np.float32)
    estimator = benchmark_estimator(name).fit(X[:10_000], y[:10_000])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        path = convert_estimator(estimator, X[:100]).save(tmp / f"{name}.onnx")
    return estimator, path, X[10_000:], f"{type(estimator).__name__} ({name})"


def _engine_call(candidate: Any) -> Any:
    """The compiled engine as its own users call it: lleaves' ``Model.predict(X, n_jobs)``
    (onnxbridge's engine calls it with one job per part, on a kept thread pool);
    tl2cgen's ``Predictor.predict`` on a DMatrix, the candidate itself (outputs in the library's
    own type, reshaped)."""
    if candidate.engine != "lleaves":
        return candidate.predict
    import lleaves

    model = lleaves.Model(model_file=str(candidate.model_text))
    model.compile(cache=str(candidate.artifact))
    return lambda X: model.predict(X, n_jobs=candidate.threads)


def _short(calls: dict[str, Any]) -> bool:
    """Whether onnxbridge's call lasts under SHORT_CALL seconds (the fastest of three)."""
    call = calls["onnxbridge"]
    times = []
    for _ in range(3):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return min(times) < SHORT_CALL


def _session(path: Path, settings: SessionSettings) -> Any:
    import onnxruntime as ort

    return ort.InferenceSession(
        str(path), settings.to_session_options(), providers=["CPUExecutionProvider"]
    )


def _tune(path: Path, rows: np.ndarray, args: argparse.Namespace) -> Any:
    """Tune the model on its own rows (a .csv beside it), like `onnxbridge tune --data`."""
    import pandas as pd

    data = path.with_suffix(".rows.parquet")
    names = Predictor(path).feature_names or [f"x{i}" for i in range(rows.shape[1])]
    pd.DataFrame(rows[:2000], columns=names).to_parquet(data)
    return tune_model(path, data=data, repeat=args.repeat, min_time=args.min_time).spec


def bench_one(name: str, tmp: Path, args: argparse.Namespace) -> dict[str, Any]:
    try:
        estimator, path, rows, title = _prepare(name, tmp)
    except Exception as exc:  # a converter that is not there yet: say so, go on
        reason = first_line(exc).split(";")[0]
        return {"model": name, "skipped": f"conversion failed: {reason}"}
    print(f"\n== {title}")
    spec = _tune(path, rows, args)
    print(
        f"   tuned: latency {spec.latency.label()}; throughput {spec.throughput.label()}; "
        f"latency up to {spec.latency_max_rows} rows"
    )
    predictor = Predictor(path)
    default = _session(path, SessionSettings())
    classes = predictor.classes
    workdir = tmp / f"{name}-accel"
    workdir.mkdir()
    # A model that `--precision auto` converted in double takes float64 rows (and float64
    # compiled trees).
    double = predictor.inputs[0].type == "tensor(double)"
    start = time.perf_counter()
    if args.no_accelerators:
        candidates, skipped = [], ["tl2cgen / lleaves: not built (--no-accelerators)"]
    else:
        candidates, skipped = build_candidates(
            estimator,
            workdir,
            n_classes=len(classes) if classes else None,
            threads=[1, 2],
            precision="double" if double else "float",
        )
    build = time.perf_counter() - start
    for line in skipped:
        print(f"   accelerator {line}")
    import pandas as pd

    names = predictor.feature_names or [f"x{i}" for i in range(rows.shape[1])]
    meta = predictor.metadata
    probes = probe_rows(
        pd.DataFrame(rows[:2000], columns=names),
        schema=meta.features if meta is not None else None,
        estimator=estimator,
        accepts_missing=meta is not None and meta.missing_values == "accepted",
    )
    accelerators = []
    for candidate in candidates:
        check = check_candidate(candidate, predictor, probes)
        verdict = "EQUIVALENT" if check.equivalent else f"DIVERGENT ({check.reason})"
        print(f"   accelerator {candidate.name}: {verdict}, max |Δ| {check.max_abs_diff:.2g}")
        if check.equivalent:
            accelerators.append(candidate)
    if candidates:
        print(f"   accelerators built in {build:.1f} s")
    cores = len(os.sched_getaffinity(0))
    accel_predictor = None
    if accelerators:
        from onnxbridge.engines import AcceleratedPredictor, CompiledTrees, LeavesTrees

        # lleaves where it is equivalent (LightGBM: the faster compiler), else tl2cgen; the
        # thread count closest to the cores (lleaves runs calls under 256 rows on one thread).
        engine = "lleaves" if any(c.engine == "lleaves" for c in accelerators) else "tl2cgen"
        chosen = min(
            (c for c in accelerators if c.engine == engine), key=lambda c: abs(c.threads - cores)
        )
        n_classes = len(classes) if classes else None
        loaded: Any
        if engine == "lleaves":
            loaded = LeavesTrees(
                chosen.artifact, chosen.model_text, chosen.threads, n_classes, ACCEL_MIN_ROWS
            )
        else:
            loaded = CompiledTrees(chosen.artifact, chosen.threads, n_classes, ACCEL_MIN_ROWS)
        accel_predictor = AcceleratedPredictor(Predictor(path), loaded)
    engine_calls = {c.name: _engine_call(c) for c in accelerators}
    lines = []
    for n in args.sizes:
        X = np.ascontiguousarray(rows[np.arange(n) % len(rows)])
        feeds = {predictor.inputs[0].name: X.astype(np.float64) if double else X}
        tuned = predictor.session_for(n)
        sk_X: Any = X
        if getattr(estimator, "feature_names_in_", None) is not None:
            # The reference forest was fitted on a DataFrame: give it its column names.
            sk_X = pd.DataFrame(X, columns=list(estimator.feature_names_in_))
        calls: dict[str, Any] = {"sklearn": lambda X=sk_X: estimator.predict(X)}
        if "Forest" in type(estimator).__name__:
            # The same fitted trees, predicting on both cores.
            parallel = copy.copy(estimator)
            parallel.n_jobs = 2
            calls["sklearn-2j"] = lambda X=sk_X, m=parallel: m.predict(X)
        calls["ort-default"] = lambda f=feeds: default.run(None, f)
        calls["ort-tuned"] = lambda f=feeds, s=tuned: s.run(None, f)
        calls["onnxbridge"] = lambda X=X: predictor.predict(X)
        for candidate, call in engine_calls.items():
            calls[candidate] = lambda X=X, call=call: call(X)
        if accel_predictor is not None and n >= ACCEL_MIN_ROWS:
            calls["onnxbridge-accel"] = lambda X=X: accel_predictor.predict(X)
        timings = measure_many(
            calls,
            repeat=args.small_repeat if n <= SMALL_ROWS or _short(calls) else args.repeat,
            min_time=args.min_time,
            cooldown=dict.fromkeys(calls, SPIN_COOLDOWN),
        )
        fastest = min(t.median for t in timings.values())
        cells = "  ".join(
            f"{k} {t.median * 1e3:.4g}ms ±{t.spread / 2:.0%} ({t.median / fastest:.2f})"
            for k, t in timings.items()
        )
        print(f"   {n:>7} rows: {cells}")
        lines.append(
            {
                "rows": n,
                "engines": {k: t.to_dict() for k, t in timings.items()},
                "ratio_to_fastest": {k: t.median / fastest for k, t in timings.items()},
            }
        )
    return {
        "model": name,
        "title": title,
        "tuning": spec.to_dict(),
        "accelerators": [c.name for c in accelerators],
        "skipped_accelerators": skipped,
        "lines": lines,
    }


def _best_ratios(result: dict[str, Any]) -> dict[int, tuple[float, float | None, float, str]]:
    """rows -> (onnxbridge's ratio to the fastest, the accelerator path's, the ratio of the path
    tune's rule picks, the fastest engine).

    The rule (``min_rows_of``, with its margin): the accelerator serves every size from the
    smallest one from which it stays more than 5 % faster than onnxbridge's ONNX Runtime path,
    as judged in this run; below that size onnxbridge's own path runs.
    """
    lines = sorted(result["lines"], key=lambda line: line["rows"])
    accel_from = None
    for line in reversed(lines):
        ratio = line["ratio_to_fastest"]
        if "onnxbridge-accel" in ratio and ratio["onnxbridge"] > 1.05 * ratio["onnxbridge-accel"]:
            accel_from = line["rows"]
        else:
            break
    ratios = {}
    for line in lines:
        ratio = line["ratio_to_fastest"]
        accel = ratio.get("onnxbridge-accel")
        picked = accel if accel_from is not None and line["rows"] >= accel_from else None
        ratios[line["rows"]] = (
            ratio["onnxbridge"],
            accel,
            ratio["onnxbridge"] if picked is None else picked,
            min(ratio, key=ratio.get),
        )
    return ratios


def summarize(runs: list[list[dict[str, Any]]]) -> None:
    """Per model and batch size: onnxbridge's paths against the fastest engine of the line.

    ``best`` is the path tune's rule picks (see ``_best_ratios``): ``onnxbridge-accel`` (the
    tuned Predictor with the equivalent compiled trees as its accelerator) from the smallest size
    from which it stays more than 5 % faster than ``onnxbridge`` (the tuned Predictor on ONNX
    Runtime), ``onnxbridge`` below it. With several runs (``--summarize``
    of several JSON files) each figure is the median over the runs, ``best`` also shows its
    range, and the fastest engine is the one of the run with the median ``best``.
    """
    several = len(runs) > 1
    print(
        "\nonnxbridge's paths / the fastest engine (target: best <= 1.10)"
        + (f"; medians of {len(runs)} runs [range of best]" if several else "")
    )
    print(
        f"{'model':<11}{'rows':>7}{'onnxbridge':>12}{'accel':>8}{'best':>7}"
        + (f"{'range':>13}" if several else "")
        + "  fastest engine"
    )
    for index, result in enumerate(runs[0]):
        if "lines" not in result:
            print(f"{result['model']:<11} skipped: {result['skipped']}")
            continue
        per_run = [_best_ratios(run[index]) for run in runs if "lines" in run[index]]
        for rows in _best_ratios(result):
            seen = [r[rows] for r in per_run if rows in r]
            ours = float(np.median([s[0] for s in seen]))
            accels = [s[1] for s in seen if s[1] is not None]
            accel = float(np.median(accels)) if accels else None
            bests = [s[2] for s in seen]
            best = float(np.median(bests))
            fastest = seen[int(np.argsort(bests)[len(bests) // 2])][3]
            shown = f"{accel:.2f}" if accel is not None else "-"
            spread = f"{min(bests):>7.2f}-{max(bests):.2f}" if several else ""
            print(
                f"{result['model']:<11}{rows:>7}{ours:>12.2f}{shown:>8}{best:>7.2f}{spread}"
                f"  {fastest}{'' if best <= 1.10 else '  (not within 1.10)'}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,100,10000,100000")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--small-repeat",
        type=int,
        default=15,
        help=f"repeats for batches of up to {SMALL_ROWS} rows, and for larger ones whose "
        f"calls last under {SHORT_CALL * 1e3:g} ms (default 15)",
    )
    parser.add_argument("--min-time", type=float, default=0.05)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    parser.add_argument(
        "--summarize",
        type=Path,
        nargs="+",
        default=None,
        help="print the summary of --json files written by earlier runs (medians over several "
        "runs, with the range), and stop",
    )
    parser.add_argument(
        "--no-accelerators",
        action="store_true",
        help="do not build tl2cgen / lleaves (compiling a 100-tree model can take minutes)",
    )
    args = parser.parse_args()
    if args.summarize:
        summarize([json.loads(path.read_text()) for path in args.summarize])
        return
    args.sizes = [int(s) for s in args.sizes.split(",")]
    print(
        f"engines per batch size: median per call ±IQR/2 (ratio to the fastest); "
        f"{args.repeat} interleaved repeats ({args.small_repeat} up to {SMALL_ROWS} rows or "
        f"{SHORT_CALL * 1e3:g} ms a call); "
        f"cores {len(os.sched_getaffinity(0))}, load {os.getloadavg()[0]:.2f}"
    )
    print("hummingbird: not installed (pins onnx<=1.16.1; benchmark it in its own environment)")
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            result = bench_one(name, Path(tmp), args)
            if "skipped" in result:
                print(f"\n== {name}: skipped, {result['skipped']}")
            results.append(result)
    summarize([results])
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
