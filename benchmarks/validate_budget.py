"""Benchmark: `validate` of neighbour and kernel models on a 58 000-row table, within its budget.

Data: ``make_classification(n_samples=T + 58000, n_features=28, n_informative=15, n_classes=2,
random_state=0)`` (the project's benchmark data, longer): the models are fitted on the
first ``T`` rows (``--train-rows``, default 10 000) and validated on the other 58 000. Models,
converted by onnxbridge:

- ``svc``: ``SVC(probability=True, random_state=0)`` — a kernel model, cost rows × support
  vectors;
- ``knn``: ``KNeighborsClassifier()`` — a neighbour model (onnxbridge's own float64 converter),
  cost rows × training rows.

Each model is validated by ``validate_model`` with every probe set and the three runtimes, in a
child process of its own, so that its peak memory (``ru_maxrss`` from ``os.wait4``) is its own.
Prints, per model: the wall time of ``validate_model`` (the model is fitted and converted before
the clock starts), the child's peak RSS, the verdict, and which probe sets were sampled and how.
Targets: each under the budget (60 s by default) plus the model's load, and under 4 GiB.

    .venv/bin/python benchmarks/validate_budget.py [--budget 60] [--models svc,knn]
        [--train-rows 10000] [--json]

``--budget none`` measures the unbudgeted validation (minutes: onnx.reference is slow).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

N_ROWS = 58_000


def _child(kind: str, budget: str, folder: str, n_train: int) -> None:
    import pandas as pd
    from sklearn.datasets import make_classification
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.svm import SVC

    from onnxbridge import convert_estimator
    from onnxbridge.validate import validate_model

    X, y = make_classification(
        n_samples=n_train + N_ROWS, n_features=28, n_informative=15, n_classes=2, random_state=0
    )
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
    model = (
        SVC(probability=True, random_state=0) if kind == "svc" else KNeighborsClassifier()
    ).fit(frame[:n_train], y[:n_train])
    path = Path(folder) / f"{kind}.onnx"
    convert_estimator(model, frame.head(200)).save(path)
    start = time.perf_counter()
    report = validate_model(path, model, frame[n_train:], budget=budget)
    seconds = time.perf_counter() - start
    print(
        json.dumps(
            {
                "model": kind,
                "validate_s": round(seconds, 1),
                "verdict": report.verdict,
                "batch_rows": report.batch_rows,
                "probe_sets": {
                    p.name: {"rows": p.n_rows, "sampled": p.sampled}
                    for p in report.probe_sets
                    if p.skipped is None
                },
                "pairs": sorted({q.name for p in report.probe_sets for q in p.pairs}),
                "warnings": report.warnings,
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", default="60", help="seconds, or none")
    parser.add_argument("--models", default="svc,knn", help="comma-separated: svc, knn")
    parser.add_argument("--train-rows", type=int, default=10_000, help="rows the models learn")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child, args.budget, args.folder, args.train_rows)
        return
    results = []
    with tempfile.TemporaryDirectory() as folder:
        for kind in args.models.split(","):
            wall = time.perf_counter()
            child = subprocess.Popen(
                [
                    sys.executable,
                    __file__,
                    "--child",
                    kind,
                    "--budget",
                    args.budget,
                    "--folder",
                    folder,
                    "--train-rows",
                    str(args.train_rows),
                ],
                stdout=subprocess.PIPE,
                text=True,
            )
            out = child.stdout.read() if child.stdout else ""
            _, status, usage = os.wait4(child.pid, 0)
            child.returncode = os.waitstatus_to_exitcode(status)
            result = {"model": kind, "exit": child.returncode}
            if child.returncode == 0:
                result.update(json.loads(out.strip().splitlines()[-1]))
            result["process_s"] = round(time.perf_counter() - wall, 1)
            result["peak_rss_mib"] = round(usage.ru_maxrss / 1024)  # KiB on Linux
            results.append(result)
    if args.json:
        print(json.dumps(results, indent=2))
        return
    for r in results:
        print(
            f"{r['model']}: validate {r.get('validate_s')} s (process {r['process_s']} s with "
            f"fit and convert), peak RSS {r['peak_rss_mib']} MiB, verdict {r.get('verdict')}, "
            f"{r.get('batch_rows')} rows per batch, exit {r['exit']}"
        )
        for name, info in (r.get("probe_sets") or {}).items():
            print(
                f"  {name}: {info['rows']} rows"
                + (f", {info['sampled']}" if info["sampled"] else "")
            )
        for line in r.get("warnings") or []:
            print(f"  warning: {line}")


if __name__ == "__main__":
    main()
