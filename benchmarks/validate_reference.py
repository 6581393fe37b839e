"""Benchmark: how long `validate` takes on the reference model with every probe set.

Benchmark model: "the reference model" of docs/benchmarks.md (Iris, RandomForestClassifier with 10
trees, random_state=42), in a bundle trained and converted by this script. Two runs of
``validate_bundle`` are timed, interleaved, ``--repeat`` times each:

- ``holdout``: the baseline — the held-out rows only, scikit-learn vs ONNX Runtime (what validate
  did before probe sets);
- ``all``: every probe set (holdout, range, thresholds, edge, missing, strings, batch) with the
  three runtimes, the diagnosis and the JSON + HTML reports.

Prints the median wall time of each with its range, and the ratio all / holdout. The target
``all`` under 10 s on a 2-core machine.

    .venv/bin/python benchmarks/validate_reference.py [--repeat 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from onnxbridge import convert_bundle, train_bundle, validate_bundle


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="timed runs of each")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        bundle, _ = train_bundle(
            "iris", "RandomForestClassifier(n_estimators=10, random_state=42)", Path(tmp) / "rf"
        )
        convert_bundle(bundle)
        runs = {
            "holdout": lambda: validate_bundle(
                bundle, probes=["holdout"], runtimes=["sklearn", "onnxruntime"], html=False
            ),
            "all": lambda: validate_bundle(bundle),
        }
        for run in runs.values():  # warm-up: imports, first sessions
            run()
        times: dict[str, list[float]] = {name: [] for name in runs}
        for _ in range(args.repeat):
            for name, run in runs.items():
                start = time.perf_counter()
                report = run()
                times[name].append(time.perf_counter() - start)
                assert report.verdict == "EQUIVALENT", report.failing_probe_sets
    summary = {
        name: {
            "median_s": statistics.median(values),
            "min_s": min(values),
            "max_s": max(values),
            "repeat": len(values),
        }
        for name, values in times.items()
    }
    ratio = summary["all"]["median_s"] / summary["holdout"]["median_s"]
    if args.json:
        print(json.dumps({"runs": summary, "ratio_all_over_holdout": ratio}, indent=2))
        return
    for name, s in summary.items():
        print(
            f"{name:>8}: median {s['median_s']:.3f} s (range {s['min_s']:.3f}-{s['max_s']:.3f} s, "
            f"{s['repeat']} runs)"
        )
    print(f"every probe set takes {ratio:.1f}× the holdout-only comparison")


if __name__ == "__main__":
    main()
