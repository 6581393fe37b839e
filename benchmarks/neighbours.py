"""Benchmark: k-nearest neighbours — memory, time and exactness against scikit-learn.

A ``KNeighborsClassifier()`` (``algorithm="auto"``: a KD tree here) fitted on ``--train`` rows of
8 integer features in 0..9 and 3 classes (many equal distances, as on real tables with repeated
rows), scoring ``--rows`` other such rows. Engines, each in its own process so that its peak
memory is its own:

- ``sklearn``: ``model.predict`` (the baseline of the ratios);
- ``onnxbridge``: ``convert_estimator`` (onnxbridge's k-neighbours converter) and
  ``Predictor.predict`` on the rows;
- ``skl2onnx``: skl2onnx's own converter (``upstream_converters()``) at float32, run by a plain
  ``onnxruntime.InferenceSession``.

Each engine prints its seconds per ``predict`` call (median of ``--repeat``, with the spread),
its process's peak resident memory (``ru_maxrss``) and how many labels differ from scikit-learn's.

    python benchmarks/neighbours.py                # 50 000 training rows, 20 000 rows scored
    python benchmarks/neighbours.py --train 5000 --rows 2000 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

import numpy as np

ENGINES = ("sklearn", "onnxbridge", "skl2onnx")


def _data(n_train: int, n_rows: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.RandomState(0)
    X = rng.randint(0, 10, (n_train, 8)).astype(np.float64)
    y = rng.randint(0, 3, n_train)
    rows = np.random.RandomState(1).randint(0, 10, (n_rows, 8)).astype(np.float64)
    return X, y, rows


def _engine(name: str, n_train: int, n_rows: int, repeat: int) -> dict[str, object]:
    from sklearn.neighbors import KNeighborsClassifier

    X, y, rows = _data(n_train, n_rows)
    model = KNeighborsClassifier().fit(X, y)
    expected = model.predict(rows)
    if name == "sklearn":
        call = lambda: model.predict(rows)  # noqa: E731
    elif name == "onnxbridge":
        from onnxbridge import Predictor, convert_estimator

        path = convert_estimator(model, X[:20]).save("/tmp/onnxbridge-neighbours.onnx")
        predictor = Predictor(path)
        call = lambda: predictor.predict(rows).labels  # noqa: E731
    else:
        import onnxruntime as ort

        from onnxbridge import convert_estimator
        from onnxbridge.convert._registry import load_converters, upstream_converters

        load_converters()  # so that upstream_converters() knows what to put back
        with upstream_converters():
            result = convert_estimator(model, X[:20], precision="float")
        session = ort.InferenceSession(
            result.model.SerializeToString(), providers=["CPUExecutionProvider"]
        )
        feed = {session.get_inputs()[0].name: rows.astype(np.float32)}
        call = lambda: session.run(None, feed)[0]  # noqa: E731
    seconds, labels = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        labels = call()
        seconds.append(time.perf_counter() - start)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB -> MiB
    return {
        "engine": name,
        "seconds": sorted(seconds),
        "peak_mib": round(peak),
        "labels_differing": int((np.asarray(labels).reshape(-1) != expected).sum()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", type=int, default=50_000)
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--engine", choices=ENGINES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.engine:
        print(json.dumps(_engine(args.engine, args.train, args.rows, args.repeat)))
        return
    print(f"KNeighborsClassifier() on {args.train} x 8 integer rows, {args.rows} rows scored")
    results = []
    for name in ENGINES:
        command = [sys.executable, __file__, "--engine", name, "--train", str(args.train)]
        command += ["--rows", str(args.rows), "--repeat", str(args.repeat)]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            print(f"{name:11s} failed: {done.stderr.strip().splitlines()[-1:]}")
            continue
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
    base = next((r for r in results if r["engine"] == "sklearn"), None)
    print(
        f"{'engine':11s} {'median s':>9s} {'spread':>15s} {'x sklearn':>9s} {'peak MiB':>9s} "
        f"{'labels ≠':>8s}"
    )
    for r in results:
        s = r["seconds"]
        median = float(np.median(s))
        ratio = median / float(np.median(base["seconds"])) if base else float("nan")
        spread = f"{s[0]:.2f}-{s[-1]:.2f}"
        print(
            f"{r['engine']:11s} {median:9.2f} {spread:>15s} {ratio:9.1f} {r['peak_mib']:9d} "
            f"{r['labels_differing']:8d}"
        )


if __name__ == "__main__":
    main()
