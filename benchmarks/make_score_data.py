"""Write the synthetic data sets of the ``score`` benchmark, in chunks (bounded memory).

The benchmark data of docs/benchmarks.md: ``make_classification(n_samples=20000, n_features=28,
n_informative=15, n_classes=2, random_state=0)``; the benchmark forest is fitted on the first
10 000 rows and the data set is the other 10 000 rows tiled up to ``--rows`` (each tile gets its
own ``id``). Two kinds:

- ``numeric``: columns ``id`` (int64) and ``f0`` … ``f27`` (float64);
- ``mixed``: ``id``, ``f0`` … ``f23`` (float64) and ``c24`` … ``c27`` (strings ``"q0"`` … ``"q3"``:
  the quartile of feature 24 … 27 in the training rows).

The output is a folder of ``--files`` Parquet files (row groups of 100 000 rows), written one
chunk at a time, so memory stays near one chunk whatever ``--rows`` is. Keep it out of the
repository (default: benchmarks/data/score-<kind>-<rows>).

    python benchmarks/make_score_data.py --rows 10000000 --files 20
    python benchmarks/make_score_data.py --kind mixed --rows 1000000 --files 4
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from sklearn.datasets import make_classification

N_FEATURES = 28
N_STRING = 4  # the last four features become quartile strings in the mixed data set
ROW_GROUP = 100_000


def benchmark_data() -> tuple[np.ndarray, np.ndarray]:
    """The benchmark data of docs/benchmarks.md: ``X [20000, 28]``, ``y [20000]``."""
    return make_classification(
        n_samples=20000, n_features=N_FEATURES, n_informative=15, n_classes=2, random_state=0
    )


def quartile_edges(X_train: np.ndarray) -> np.ndarray:
    """``[3, N_STRING]`` quartile edges of the string features, from the training rows."""
    return np.quantile(X_train[:, N_FEATURES - N_STRING :], [0.25, 0.5, 0.75], axis=0)


def to_strings(values: np.ndarray, edges: np.ndarray) -> list[np.ndarray]:
    """One ``"q0"``..``"q3"`` array per string feature."""
    names = np.array(["q0", "q1", "q2", "q3"], dtype=object)
    return [names[np.searchsorted(edges[:, j], values[:, j])] for j in range(values.shape[1])]


def mixed_frame_columns(X: np.ndarray, edges: np.ndarray) -> dict[str, np.ndarray]:
    """Column name → values of the mixed data set for rows ``X``."""
    columns: dict[str, np.ndarray] = {f"f{j}": X[:, j] for j in range(N_FEATURES - N_STRING)}
    strings = to_strings(X[:, N_FEATURES - N_STRING :], edges)
    for k, values in enumerate(strings):
        columns[f"c{N_FEATURES - N_STRING + k}"] = values
    return columns


def chunk_table(block: np.ndarray, first_id: int, kind: str, edges: np.ndarray) -> pa.Table:
    ids = np.arange(first_id, first_id + len(block), dtype=np.int64)
    if kind == "numeric":
        columns = {f"f{j}": block[:, j] for j in range(N_FEATURES)}
    else:
        columns = mixed_frame_columns(block, edges)
    return pa.table({"id": ids, **columns})


def write(out: Path, rows: int, files: int, kind: str) -> None:
    X, _ = benchmark_data()
    train, score_rows = X[:10000], X[10000:]
    edges = quartile_edges(train)
    out.mkdir(parents=True, exist_ok=True)
    per_file = -(-rows // files)
    started = time.perf_counter()
    written = 0
    for index in range(files):
        n = min(per_file, rows - written)
        if n <= 0:
            break
        path = out / f"data-{index:04d}.parquet"
        tmp = path.with_name("." + path.name + ".tmp")
        writer: pq.ParquetWriter | None = None
        done = 0
        while done < n:
            take = min(ROW_GROUP, n - done)
            start = (written + done) % len(score_rows)
            idx = (start + np.arange(take)) % len(score_rows)
            table = chunk_table(score_rows[idx], written + done, kind, edges)
            if writer is None:
                writer = pq.ParquetWriter(tmp, table.schema)
            writer.write_table(table, row_group_size=ROW_GROUP)
            done += take
        assert writer is not None
        writer.close()
        tmp.replace(path)
        written += n
        print(f"wrote {path} ({n:,} rows, {time.perf_counter() - started:.1f} s)", flush=True)
    print(f"{written:,} rows x {N_FEATURES} features ({kind}) in {out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--kind", choices=("numeric", "mixed"), default="numeric")
    parser.add_argument("--out", type=Path, default=None, help="[default: benchmarks/data/...]")
    args = parser.parse_args()
    out = args.out or Path("benchmarks/data") / f"score-{args.kind}-{args.rows}"
    write(out, args.rows, args.files, args.kind)


if __name__ == "__main__":
    main()
