"""The reference table: onnxbridge before and after a change, measured in the same run.

Two source trees are compared: ``--baseline-src`` (the ``src`` folder of an older checkout) and
the current one (this repository's ``src``). Every measurement runs in a fresh child process
whose ``PYTHONPATH`` points at one tree; the two alternate round by round (which one goes first
alternates too), so machine noise hits both alike. Per line: the median over rounds with its
range, and the ratio current / baseline of the times (above 1.10: more than 10 % slower,
flagged).

- ``Predictor.predict`` on 1, 100, 10 000 and 100 000 rows of the benchmark data for the
  benchmark models (RandomForest with 10 and 100 trees, HistGradientBoosting, GradientBoosting,
  LightGBM if installed, LogisticRegression, StandardScaler + LogisticRegression), each converted
  once by the current tree; both trees load the same .onnx files, untuned.
- ``serve``: single-row JSON at concurrency 8 and 1 000-row binary requests, by
  ``benchmarks/serve_load.py`` (needs ``wrk``), requests/s and rows/s.
- ``score``: the local engine on the ``benchmarks/make_score_data.py`` data set
  (``--score-rows``, 10 million by default), by ``benchmarks/score_bench.py``, rows/s.
- The code figures of each tree: lines of ``runtime/``, ``tune/`` and ``runtime/predictor.py``,
  ``len(onnxbridge.__all__)``, and the CLI start-up: ``onnxbridge --version`` against
  ``python -c "import numpy, pandas"``, medians of 10 each.

It writes ``benchmarks/results/reference.json``; ``benchmarks/report.py`` puts it on
docs/benchmarks.md.

    python benchmarks/reference.py --baseline-src ../before/src [--repeat 5] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import report  # noqa: E402  (beside this script: it renders what result() writes)

ROOT = HERE.parent
OUT = HERE / "results" / "reference.json"
MODELS = ("rf10", "rf100", "hgb", "gb", "lgbm", "lr", "scaled-lr")
SIZES = (1, 100, 10_000, 100_000)
QUICK_MODELS = ("rf10", "hgb", "lr", "scaled-lr")
QUICK_SIZES = (1, 100, 10_000)
LIMIT = 1.10  # a line whose time grew by more than this factor is flagged


# ----------------------------------------------------------------------------- child processes


def child_convert(work: Path, names: list[str]) -> None:
    """Fit and convert every model (current tree); save the scoring rows, tiled to 100 000."""
    import warnings

    import numpy as np
    from models import benchmark_estimator  # benchmarks/models.py, beside this script
    from sklearn.datasets import make_classification

    from onnxbridge import convert_estimator

    X, y = make_classification(
        n_samples=20_000, n_features=28, n_informative=15, n_classes=2, random_state=0
    )
    X = X.astype(np.float32)
    np.save(work / "rows.npy", np.tile(X[10_000:], (10, 1)))
    for name in names:
        estimator = benchmark_estimator(name).fit(X[:10_000], y[:10_000])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            convert_estimator(estimator, X[:100]).save(work / f"{name}.onnx")


def _per_call(fn: Any, min_time: float) -> float:
    """Seconds per call: median of 3 repeats of as many calls as last ``min_time`` together.

    Written here rather than taken from ``onnxbridge.bench``: the child imports the tree under
    test, and both trees must be timed by the same harness.
    """
    fn()
    number = 1
    while True:
        start = time.perf_counter()
        for _ in range(number):
            fn()
        elapsed = time.perf_counter() - start
        if elapsed >= min_time:
            break
        number = max(number * 2, int(number * min_time / max(elapsed, 1e-9)) + 1)
    samples = [elapsed / number]
    for _ in range(2):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter() - start) / number)
    return statistics.median(samples)


def child_predict(work: Path, names: list[str], sizes: list[int], min_time: float) -> None:
    """Print ``{model: {rows: seconds per Predictor.predict call}}`` as JSON (this tree)."""
    import numpy as np

    from onnxbridge import Predictor

    X = np.load(work / "rows.npy")
    out: dict[str, dict[str, float]] = {}
    for name in names:
        predictor = Predictor(work / f"{name}.onnx")
        out[name] = {
            str(rows): _per_call(lambda b=X[:rows], p=predictor: p.predict(b), min_time)
            for rows in sizes
        }
    print(json.dumps(out))


# ------------------------------------------------------------------------------------ parent
def run_with(src: Path, command: list[str], timeout: float = 3600) -> str:
    """Run ``command`` with ``PYTHONPATH`` set to ``src``; its stdout (exit on failure)."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    done = subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=timeout, cwd=ROOT
    )
    if done.returncode != 0:
        raise SystemExit(f"failed ({done.returncode}): {' '.join(command)}\n{done.stderr[-3000:]}")
    return done.stdout


def stats(values: list[float]) -> dict[str, float]:
    """Median and range of one line's values over rounds."""
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def alternate(sides: dict[str, Path], repeat: int, measure: Any) -> dict[str, list[Any]]:
    """``measure(side, src)`` ``repeat`` times per side, the sides alternating (and which one
    goes first alternating by round)."""
    order = list(sides)
    samples: dict[str, list[Any]] = {side: [] for side in order}
    for round_ in range(repeat):
        for side in order if round_ % 2 == 0 else order[::-1]:
            samples[side].append(measure(side, sides[side]))
            print(f"  round {round_ + 1} {side} done", file=sys.stderr, flush=True)
    return samples


def time_predict(
    sides: dict[str, Path], work: Path, names: list[str], sizes: list[int], args: Any
) -> list[dict[str, Any]]:
    """Per model and size: each side's median seconds per call over rounds, and the ratio."""
    command = [sys.executable, __file__, "--child", "predict", "--work", str(work)]
    command += ["--models", ",".join(names), "--sizes", ",".join(map(str, sizes))]
    command += ["--min-time", str(args.min_time)]
    samples = alternate(sides, args.repeat, lambda side, src: json.loads(run_with(src, command)))
    lines = []
    for name in names:
        for rows in sizes:
            line: dict[str, Any] = {"model": name, "rows": rows, "unit": "s"}
            for side in sides:
                line[side] = stats([s[name][str(rows)] for s in samples[side]])
            line["ratio"] = line["current"]["median"] / line["baseline"]["median"]
            lines.append(line)
    return lines


def time_serve(sides: dict[str, Path], args: Any) -> list[dict[str, Any]]:
    """Single-row JSON at c=8 (requests/s) and 1 000-row binary (rows/s), by serve_load.py."""
    command = [sys.executable, str(HERE / "serve_load.py"), "--rounds", "1", "--workers", "2"]
    command += ["--seconds", str(args.serve_seconds), "--no-mlserver", "--scenarios", "2,6"]
    command += ["--json"]
    samples = alternate(sides, args.repeat, lambda side, src: json.loads(run_with(src, command)))
    lines = []
    for index, (label, field, unit) in enumerate(
        [
            ("serve: 1 row JSON, c=8", "onnxbridge_rps", "req/s"),
            ("serve: 1 000 rows binary, c=8", "onnxbridge_rows_per_s", "rows/s"),
        ]
    ):
        line: dict[str, Any] = {"measure": label, "unit": unit}
        for side in sides:
            line[side] = stats([s["scenarios"][index][field] for s in samples[side]])
        # Rates: the ratio of times is baseline rate / current rate.
        line["ratio"] = line["baseline"]["median"] / line["current"]["median"]
        lines.append(line)
    return lines


def score_data(args: Any, current: Path) -> Path:
    """The score data set of ``--score-rows`` rows (written by make_score_data.py if missing)."""
    data = args.score_data or ROOT / "benchmarks" / "data" / f"score-numeric-{args.score_rows}"
    if not data.is_dir():
        files = max(1, args.score_rows // 500_000)
        command = [sys.executable, str(HERE / "make_score_data.py"), "--rows"]
        command += [str(args.score_rows), "--files", str(files), "--out", str(data)]
        run_with(current, command)
    return data


def time_score(sides: dict[str, Path], work: Path, args: Any) -> list[dict[str, Any]]:
    """``score(..., engine="local", workers=2)`` on the data set, rows/s, by score_bench.py;
    the model is fitted and converted once, by the current tree."""
    data = score_data(args, sides["current"])
    build = (
        "import sys; from pathlib import Path; sys.path.insert(0, 'benchmarks'); "
        f"from score_bench import build_models; build_models(Path({str(work)!r}), 'numeric')"
    )
    run_with(sides["current"], [sys.executable, "-c", build])
    command = [sys.executable, str(HERE / "score_bench.py"), "--data", str(data)]
    command += ["--rounds", "1", "--runs", "local", "--work", str(work)]

    def measure(side: str, src: Path) -> float:
        found = re.search(r"local\s+([\d,]+) rows/s", run_with(src, command))
        if found is None:
            raise SystemExit("score_bench.py printed no rows/s for the local run")
        return float(found.group(1).replace(",", ""))

    samples = alternate(sides, args.repeat, measure)
    rows = f"{args.score_rows:,}".replace(",", " ")
    line: dict[str, Any] = {"measure": f"score: local engine, {rows} rows", "unit": "rows/s"}
    for side in sides:
        line[side] = stats(samples[side])
    line["ratio"] = line["baseline"]["median"] / line["current"]["median"]
    return [line]


def _lines_of(path: Path) -> int:
    files = [path] if path.is_file() else sorted(path.rglob("*.py"))
    return sum(len(f.read_text(encoding="utf-8").splitlines()) for f in files)


def _startup(src: Path, repeat: int) -> float:
    """Median of ``onnxbridge --version`` over median of ``python -c "import numpy, pandas"``."""
    script = Path(sys.executable).with_name("onnxbridge")
    cli = [str(script)] if script.exists() else [sys.executable, "-m", "onnxbridge._cli.main"]
    calls = {"cli": [*cli, "--version"], "imports": [sys.executable, "-c", "import numpy, pandas"]}
    seconds: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(repeat):
        for name, command in calls.items():
            start = time.perf_counter()
            run_with(src, command)
            seconds[name].append(time.perf_counter() - start)
    return statistics.median(seconds["cli"]) / statistics.median(seconds["imports"])


def _predictor_module(package: Path) -> Path:
    """Predictor's module: ``runtime/_predictor.py``, or ``runtime/predictor.py`` in older trees."""
    private = package / "runtime" / "_predictor.py"
    return private if private.exists() else package / "runtime" / "predictor.py"


def code_figures(sides: dict[str, Path], repeat: int) -> list[dict[str, Any]]:
    """Lines of runtime/, tune/ and the Predictor, the public names, the CLI start-up ratio."""
    figures: dict[str, dict[str, Any]] = {}
    count = "import onnxbridge; print(len(onnxbridge.__all__))"
    for side, src in sides.items():
        package = src / "onnxbridge"
        tune = package / "tune" if (package / "tune").is_dir() else package / "bench" / "tune.py"
        figures[side] = {
            "lines of runtime/": _lines_of(package / "runtime"),
            "lines of tune/": f"{_lines_of(tune)} ({tune.relative_to(package)})"
            if tune.exists()
            else "-",
            "lines of runtime/predictor.py": _lines_of(_predictor_module(package)),
            "len(onnxbridge.__all__)": int(run_with(src, [sys.executable, "-c", count])),
            "CLI start-up / import numpy, pandas": round(_startup(src, repeat), 2),
        }
    return [
        {"figure": name, **{side: figures[side][name] for side in sides}}
        for name in figures["current"]
    ]


# --------------------------------------------------------------------------------- the results
def _seconds(value: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if value >= scale or unit == "µs":
            return f"{value / scale:.3g} {unit}"
    raise AssertionError("unreachable")


def _rows(n: int) -> str:
    return "1 row" if n == 1 else f"{n:,} rows".replace(",", " ")


def _ratio(ratio: float) -> str:
    return f"**{ratio:.2f}**" if ratio > LIMIT else f"{ratio:.2f}"


def _sides(line: dict[str, Any]) -> list[str]:
    """The baseline's and the current tree's medians, with their unit."""
    if line["unit"] == "s":
        return [_seconds(line[side]["median"]) for side in ("baseline", "current")]
    return [
        f"{line[side]['median']:,.0f} {line['unit']}".replace(",", " ")
        for side in ("baseline", "current")
    ]


def _cell(line: dict[str, Any]) -> str:
    """Baseline → current medians, and the ratio of times (bold when past the limit)."""
    before, after = _sides(line)
    number, unit = before.rsplit(" ", 1)
    if after.endswith(f" {unit}"):
        before = number  # one unit for both
    return f"{before} → {after} ({_ratio(line['ratio'])})"


def others(measured: dict[str, Any]) -> list[dict[str, Any]]:
    """The serve and score lines."""
    return measured.get("serve", []) + measured.get("score", [])


def tables(measured: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The page's tables: predict by model and size; serve, score and the code figures."""
    parts: list[dict[str, Any]] = []
    predict = measured.get("predict", [])
    if predict:
        sizes = sorted({line["rows"] for line in predict})
        columns = ["`Predictor.predict`"] + [_rows(n) for n in sizes]
        rows = []
        for model in dict.fromkeys(line["model"] for line in predict):
            by_rows = {line["rows"]: line for line in predict if line["model"] == model}
            rows.append([model] + [_cell(by_rows[n]) if n in by_rows else "-" for n in sizes])
        parts.append({"table": {"columns": columns, "rows": rows}})
    rows = [[line["measure"], *_sides(line), _ratio(line["ratio"])] for line in others(measured)]
    rows += [
        [f["figure"], str(f["baseline"]), str(f["current"]), "-"] for f in measured.get("code", [])
    ]
    if rows:
        columns = ["measure", "baseline", "current", "ratio of times"]
        parts.append({"table": {"columns": columns, "rows": rows}})
    if measured.get("skipped"):
        parts.append({"text": "Not measured: " + "; ".join(measured["skipped"]) + "."})
    return parts


def goals(measured: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """No line more than 10 % slower than the baseline."""
    lines = [line for key in ("predict", "serve", "score") for line in measured.get(key, [])]
    if not lines:
        return []
    slower = [line for line in lines if line["ratio"] > LIMIT]
    worst = max(lines, key=lambda line: line["ratio"])
    name = worst.get("measure") or f"{worst['model']}, {_rows(worst['rows'])}"
    result = (
        f"{len(slower)} of {len(lines)} lines more than 10 % slower; worst {name}, "
        f"{worst['ratio']:.2f}"
    )
    return [{"goal": "no line more than 10 % slower than the baseline", "result": result,
             "met": not slower}]  # fmt: skip


ABOUT = [
    "`benchmarks/reference.py` runs the baseline tree (`--baseline-src`) and the current one in "
    "fresh processes alternating round by round. Cells: medians over rounds, baseline → current, "
    "current / baseline of the times (bold above 1.10). `Predictor.predict` runs untuned, on "
    "models converted once by the current tree; the ranges are in the results file.",
]


def result(measured: dict[str, Any], command: list[str], baseline: str) -> dict[str, Any]:
    """The results file report.py renders."""
    run = {
        "commands": [" ".join(command)],
        "date": date.today().isoformat(),
        "machine": report.machine(),
        "parts": tables(measured),
    }
    return {
        "name": "reference",
        "title": "Reference table: before and after",
        "order": 5,
        "about": ABOUT,
        "runs": [run],
        "goals": goals(measured),
        "baseline": baseline,
        "measurements": measured,
    }


def _baseline_label(src: Path) -> str:
    """The baseline tree's commit, if it is a git checkout."""
    done = subprocess.run(
        ["git", "-C", str(src), "log", "-1", "--format=%h %cs"], capture_output=True, text=True
    )
    return f"commit {done.stdout.strip()}" if done.returncode == 0 else "a source tree"


def _shown_command(args: argparse.Namespace) -> list[str]:
    """The command line as the page shows it (the baseline's path is the reader's own)."""
    shown = ["PYTHONPATH=src .venv/bin/python benchmarks/reference.py"]
    shown.append("--baseline-src OLD_CHECKOUT/src")
    shown += ["--quick"] if args.quick else []
    shown += [f"--repeat {args.repeat}", f"--min-time {args.min_time}"]
    shown += [f"--score-rows {args.score_rows}"]
    shown += [f"--skip {','.join(sorted(args.skip))}"] if args.skip else []
    return shown


def measure_all(args: argparse.Namespace, sides: dict[str, Path]) -> dict[str, Any]:
    """Every measurement of the reference table, in a scratch folder."""
    names = list(QUICK_MODELS if args.quick else MODELS)
    sizes = list(QUICK_SIZES if args.quick else SIZES)
    measured: dict[str, Any] = {"skipped": []}
    has_lgbm = "import lightgbm" if "lgbm" in names else "pass"
    if "lgbm" in names and subprocess.run([sys.executable, "-c", has_lgbm]).returncode != 0:
        names.remove("lgbm")
        measured["skipped"].append("LightGBM (not installed)")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        command = [sys.executable, __file__, "--child", "convert", "--work", str(work)]
        run_with(sides["current"], [*command, "--models", ",".join(names)])
        if "predict" in args.skip:
            measured["skipped"].append("predict (--skip predict)")
        else:
            print("predict ...", file=sys.stderr, flush=True)
            measured["predict"] = time_predict(sides, work, names, sizes, args)
        if "serve" in args.skip:
            measured["skipped"].append("serve (--skip serve)")
        elif subprocess.run(["sh", "-c", "command -v wrk"], capture_output=True).returncode:
            measured["skipped"].append("serve (wrk is not installed: apt-get install wrk)")
        else:
            print("serve ...", file=sys.stderr, flush=True)
            measured["serve"] = time_serve(sides, args)
        if "score" in args.skip:
            measured["skipped"].append("score (--skip score)")
        else:
            print("score ...", file=sys.stderr, flush=True)
            measured["score"] = time_score(sides, work, args)
    print("code figures ...", file=sys.stderr, flush=True)
    measured["code"] = code_figures(sides, 3 if args.quick else 10)
    return measured


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline-src", type=Path, help="the src folder of the older checkout")
    parser.add_argument("--repeat", type=int, default=None, help="rounds per side [5; quick 2]")
    parser.add_argument("--quick", action="store_true", help="fewer models, sizes and rows")
    parser.add_argument("--score-rows", type=int, default=None, help="[10 000 000; quick 200 000]")
    parser.add_argument("--score-data", type=Path, default=None)
    parser.add_argument("--serve-seconds", type=int, default=None, help="[4; quick 2]")
    parser.add_argument("--min-time", type=float, default=None, help="[0.2; quick 0.05]")
    parser.add_argument("--skip", default="", help="comma-separated: predict, serve, score")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--child", choices=("convert", "predict"), help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--models", default="", help=argparse.SUPPRESS)
    parser.add_argument("--sizes", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child == "convert":
        return child_convert(args.work, args.models.split(","))
    if args.child == "predict":
        sizes = [int(n) for n in args.sizes.split(",")]
        return child_predict(args.work, args.models.split(","), sizes, args.min_time)
    if args.baseline_src is None or not (args.baseline_src / "onnxbridge").is_dir():
        parser.exit(2, "error: --baseline-src must be the src folder of a checkout (it holds "
                       "onnxbridge/); e.g. git worktree add ../before main\n")  # fmt: skip
    quick = args.quick
    args.repeat = args.repeat or (2 if quick else 5)
    args.score_rows = args.score_rows or (200_000 if quick else 10_000_000)
    args.serve_seconds = args.serve_seconds or (2 if quick else 4)
    args.min_time = args.min_time or (0.05 if quick else 0.2)
    args.skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    sides = {"baseline": args.baseline_src.resolve(), "current": ROOT / "src"}
    measured = measure_all(args, sides)
    doc = result(measured, _shown_command(args), _baseline_label(sides["baseline"]))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    partial = args.out.with_suffix(".json.tmp")
    partial.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    partial.replace(args.out)
    print(f"wrote {args.out}; python benchmarks/report.py puts it on docs/benchmarks.md")
    for line in doc["goals"]:
        print(f"{line['goal']}: {line['result']} ({'met' if line['met'] else 'NOT met'})")


if __name__ == "__main__":
    main()
