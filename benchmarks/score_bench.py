"""Benchmark of ``onnxbridge score``: the local engine, the Dask engine (the LocalCluster it starts:
one worker process of 2 threads) and the baseline a user writes today (pandas chunks +
scikit-learn ``predict_proba``), same run.

Model: the benchmark forest of docs/benchmarks.md (``RandomForestClassifier(n_estimators=100,
random_state=0)`` fitted on the first 10 000 rows of ``make_classification(n_samples=20000,
n_features=28, n_informative=15, n_classes=2, random_state=0)``); ``--kind mixed`` fits it behind
``--preprocess auto`` on the mixed data set instead (4 text columns). Data: the folder written by
``benchmarks/make_score_data.py`` (the other 10 000 rows, tiled), or its first ``--files`` files.

Every run is a fresh child process; this script samples the child's process tree (psutil, every
50 ms, Dask workers included) for the peak RSS: the sum over the processes at each sample, and
each side's own peak (the child, its child processes). Runs are interleaved round by round so
machine noise hits all of them alike; it prints per-run rows/s and peak RSS, the medians with
their range, and the ratios against the baseline of the same rounds.

    python benchmarks/make_score_data.py --rows 10000000 --files 20
    python benchmarks/score_bench.py --data benchmarks/data/score-numeric-10000000 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import psutil

HERE = Path(__file__).resolve().parent
RUNS = ("baseline", "local", "dask")
# Extra runs, for choosing the local engine's defaults: one session of two ORT threads.
VARIANTS = {
    "local-1x2": {"engine": "local", "workers": 1, "session_threads": 2},
    "local-3x1": {"engine": "local", "workers": 3, "session_threads": 1},
}


# ------------------------------------------------------------------------------------ the model
def build_models(work: Path, kind: str) -> tuple[Path, Path]:
    """Fit and convert the benchmark forest once; returns (model.skops, model.onnx)."""
    sys.path.insert(0, str(HERE))
    import pandas as pd
    from make_score_data import benchmark_data, mixed_frame_columns, quartile_edges

    from onnxbridge import convert_bundle, train_bundle

    bundle_dir = work / f"forest-{kind}"
    skops, onnx = bundle_dir / "model.skops", bundle_dir / "model.onnx"
    if onnx.is_file() and skops.is_file():
        return skops, onnx
    X, y = benchmark_data()
    if kind == "numeric":
        train = pd.DataFrame(X[:10000], columns=[f"f{j}" for j in range(X.shape[1])])
    else:
        train = pd.DataFrame(mixed_frame_columns(X[:10000], quartile_edges(X[:10000])))
    train["target"] = y[:10000]
    path = work / f"train-{kind}.parquet"
    train.to_parquet(path, index=False)
    spec = "RandomForestClassifier(n_estimators=100, random_state=0)"
    preprocess = "auto" if kind == "mixed" else "none"
    # All 10 000 rows train the forest; the holdout is only for the bundle's own checks.
    bundle, _ = train_bundle(
        str(path), spec, bundle_dir, target="target", test_size=0.01, preprocess=preprocess,
        overwrite=True,
    )  # fmt: skip
    convert_bundle(bundle)
    return skops, onnx


# -------------------------------------------------------------------------------- child: runs
def run_baseline(skops: Path, files: list[Path], out: Path, batch_size: int) -> int:
    """What a user writes today: pandas chunks, scikit-learn predict_proba, Parquet out."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    from onnxbridge import load_estimator

    model = load_estimator(skops)
    features = list(model.feature_names_in_)
    out.mkdir(parents=True, exist_ok=True)
    rows = 0
    for i, path in enumerate(files):
        writer = None
        for batch in pq.ParquetFile(path).iter_batches(batch_size=batch_size):
            chunk = batch.to_pandas()
            proba = model.predict_proba(chunk[features])
            result = pd.DataFrame({"id": chunk["id"], "label": model.classes_[proba.argmax(1)]})
            for k, cls in enumerate(model.classes_):
                result[f"proba_{cls}"] = proba[:, k]
            table = pa.Table.from_pandas(result, preserve_index=False)
            if writer is None:
                writer = pq.ParquetWriter(out / f"part-{i:05d}.parquet", table.schema)
            writer.write_table(table)
            rows += len(chunk)
        if writer is not None:
            writer.close()
    return rows


def run_child(args: argparse.Namespace) -> None:
    files = sorted(Path(args.data).glob("*.parquet"))[: args.files]
    out = Path(args.out)
    started = time.perf_counter()
    if args.child == "baseline":
        rows = run_baseline(Path(args.skops), files, out, args.batch_size)
        workers = 1
    else:
        from onnxbridge import score

        options = VARIANTS.get(args.child, {"engine": args.child, "workers": 2})
        result = score(
            args.onnx, files, out, keep=["id"], batch_size=args.batch_size, overwrite=True,
            **options,
        )  # fmt: skip
        rows, workers = result.rows, result.workers
    seconds = time.perf_counter() - started
    print(json.dumps({"rows": rows, "seconds": seconds, "workers": workers}))


# ------------------------------------------------------------------------- kernel efficiency
def kernel_efficiency(skops: Path, onnx: Path, data: Path, repeat: int) -> None:
    """Rows per CPU-second of the two kernels alone (scikit-learn predict_proba, the ONNX Runtime
    session by threads) on one 32 768-row batch: less sensitive to other processes than wall
    time, it says how fast each side could go with the machine to itself."""
    import numpy as np
    import pyarrow.parquet as pq

    from onnxbridge import load_estimator
    from onnxbridge.runtime import SessionSettings
    from onnxbridge.runtime._rewrites.tree_blocks import DEFAULT_TREE_BLOCK_NODES
    from onnxbridge.runtime._router import open_ort_session

    model = load_estimator(skops)
    features = list(model.feature_names_in_)
    first = sorted(data.glob("*.parquet"))[0]
    frame = next(pq.ParquetFile(first).iter_batches(batch_size=32_768)).to_pandas()[features]
    X = frame.to_numpy(np.float32)

    def best(fn: object) -> float:
        cpu = float("inf")
        for _ in range(repeat):
            start = time.process_time()
            fn()  # type: ignore[operator]
            cpu = min(cpu, time.process_time() - start)
        return len(X) / cpu

    print(f"kernel rows per CPU-second on {len(X):,} rows (best of {repeat}):")
    print(f"  {'sklearn predict_proba':<38}{best(lambda: model.predict_proba(frame)):>10,.0f}")
    for blocks in (0, DEFAULT_TREE_BLOCK_NODES):
        for threads in (1, 2):
            settings = SessionSettings(threads, allow_spinning=False, tree_block_nodes=blocks)
            session = open_ort_session(onnx, settings)
            name = session.get_inputs()[0].name
            rate = best(lambda s=session, n=name: s.run(None, {n: X}))
            label = f"onnxruntime {threads} thread{'s' if threads > 1 else ''}"
            label += ", trees in blocks" if blocks else ""
            print(f"  {label:<38}{rate:>10,.0f}")


# ------------------------------------------------------------------------------- parent: timing
def tree_rss(proc: psutil.Process) -> tuple[int, int]:
    """Resident memory of ``proc`` and of its descendants (Dask's worker processes)."""
    own = proc.memory_info().rss
    others = 0
    for p in proc.children(recursive=True):
        try:
            others += p.memory_info().rss
        except psutil.Error:
            continue
    return own, others


def measure(run: str, args: argparse.Namespace, skops: Path, onnx: Path) -> dict[str, float]:
    out = Path(args.work) / f"out-{run}"
    if out.exists():
        import shutil

        shutil.rmtree(out)
    command = [
        sys.executable, __file__, "--child", run, "--data", str(args.data), "--out", str(out),
        "--skops", str(skops), "--onnx", str(onnx), "--batch-size", str(args.batch_size),
    ]  # fmt: skip
    if args.files is not None:
        command += ["--files", str(args.files)]
    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    watched = psutil.Process(proc.pid)
    peak = peak_own = peak_others = 0
    while proc.poll() is None:
        try:
            own, others = tree_rss(watched)
        except psutil.Error:
            continue
        peak, peak_own, peak_others = (
            max(peak, own + others),
            max(peak_own, own),
            max(peak_others, others),
        )
        time.sleep(0.05)
    stdout, stderr = proc.communicate()
    cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{run} failed ({proc.returncode}):\n{stderr[-3000:]}")
    summary = json.loads(stdout.strip().splitlines()[-1])
    summary["rows_per_second"] = summary["rows"] / summary["seconds"]
    # CPU time of the run's whole process tree (every process waited for, Dask's included):
    # what the work costs, whatever share of the machine other programs took meanwhile.
    summary["cpu_seconds"] = sum(
        getattr(cpu_after, f) - getattr(cpu_before, f) for f in ("ru_utime", "ru_stime")
    )
    summary["peak_rss_mib"] = peak / 2**20
    summary["own_rss_mib"], summary["children_rss_mib"] = peak_own / 2**20, peak_others / 2**20
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("benchmarks/data/score-numeric-10000000"))
    parser.add_argument("--files", type=int, default=None, help="score only the first N files")
    parser.add_argument("--kind", choices=("numeric", "mixed"), default="numeric")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=65_536)
    parser.add_argument(
        "--runs",
        default=",".join(RUNS),
        help=f"comma-separated, from {', '.join((*RUNS, *VARIANTS))}",
    )
    parser.add_argument("--work", type=Path, default=Path("benchmarks/data/score-bench"))
    parser.add_argument(
        "--kernel", action="store_true", help="only rows per CPU-second of the two kernels"
    )
    parser.add_argument("--child", choices=(*RUNS, *VARIANTS), help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--skops", help=argparse.SUPPRESS)
    parser.add_argument("--onnx", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        run_child(args)
        return
    args.work.mkdir(parents=True, exist_ok=True)
    if args.kernel:
        skops, onnx = build_models(args.work, args.kind)
        kernel_efficiency(skops, onnx, args.data, args.rounds)
        return
    files = sorted(args.data.glob("*.parquet"))[: args.files]
    import pyarrow.parquet as pq

    n_rows = sum(pq.read_metadata(f).num_rows for f in files)
    skops, onnx = build_models(args.work, args.kind)
    runs = [r for r in args.runs.split(",") if r]
    print(
        f"score benchmark ({args.kind}): {n_rows:,} rows in {len(files)} Parquet files, "
        f"batch {args.batch_size:,}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    results: dict[str, list[dict[str, float]]] = {r: [] for r in runs}
    for rnd in range(1, args.rounds + 1):
        for run in runs:
            summary = measure(run, args, skops, onnx)
            results[run].append(summary)
            print(
                f"round {rnd}  {run:<9} {summary['rows_per_second']:>10,.0f} rows/s  "
                f"{summary['seconds']:7.1f} s  CPU {summary['cpu_seconds']:6.1f} s  "
                f"peak RSS {summary['peak_rss_mib']:7.0f} MiB  "
                f"(its own {summary['own_rss_mib']:.0f}, child processes "
                f"{summary['children_rss_mib']:.0f}; load {os.getloadavg()[0]:.1f})",
                flush=True,
            )
    print("median [min-max] over rounds:")
    for run in runs:
        speeds = [r["rows_per_second"] for r in results[run]]
        rss = [r["peak_rss_mib"] for r in results[run]]
        print(
            f"  {run:<9} {statistics.median(speeds):>10,.0f} rows/s "
            f"[{min(speeds):,.0f}-{max(speeds):,.0f}]  peak RSS {statistics.median(rss):,.0f} MiB "
            f"[{min(rss):,.0f}-{max(rss):,.0f}]"
        )
    if "baseline" in results:
        base = [r["rows_per_second"] for r in results["baseline"]]
        for run in runs:
            if run == "baseline":
                continue
            ratios = [r["rows_per_second"] / b for r, b in zip(results[run], base, strict=True)]
            print(
                f"  {run}/baseline rows/s: {statistics.median(ratios):.2f}x median "
                f"[{min(ratios):.2f}-{max(ratios):.2f}] per round"
            )
    if "local" in results and "dask" in results:
        for key, label in (
            ("seconds", "time"),
            ("peak_rss_mib", "peak RSS (all processes)"),
            ("cpu_seconds", "CPU time (all processes)"),
        ):
            ratios = [
                d[key] / loc[key] for d, loc in zip(results["dask"], results["local"], strict=True)
            ]
            print(
                f"  dask/local {label}: {statistics.median(ratios):.2f}x median "
                f"[{min(ratios):.2f}-{max(ratios):.2f}] per round"
            )


if __name__ == "__main__":
    main()
