"""``onnxbridge score``: batch scoring of CSV / Parquet files larger than memory (thin command).

The work is done by :func:`onnxbridge._score.score`; this module parses flags, shows a progress
bar on standard error (when it is a terminal and ``--json`` is not given) and prints the summary.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

__all__ = ["score_command"]


class _RowsPerSecond(ProgressColumn):
    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text("- rows/s" if speed is None else f"{speed:,.0f} rows/s")


class _Rows(ProgressColumn):
    def render(self, task: Task) -> Text:
        total = f" / {task.total:,.0f}" if task.total is not None else ""
        return Text(f"{task.completed:,.0f}{total} rows")


class _Bar:
    """A rich progress bar fed by the library's progress callback."""

    def __init__(self, console: Console) -> None:
        self.progress = Progress(
            TextColumn("scoring"),
            BarColumn(),
            _Rows(),
            _RowsPerSecond(),
            TimeElapsedColumn(),
            TextColumn("left"),
            TimeRemainingColumn(),
            console=console,
            transient=True,
        )
        self.task = self.progress.add_task("score", total=None)

    def __call__(self, done: int, total: int | None) -> None:
        self.progress.update(self.task, completed=done, total=total)


def _keep_columns(values: list[str] | None) -> list[str]:
    columns: list[str] = []
    for value in values or []:
        columns.extend(c.strip() for c in value.split(",") if c.strip())
    return columns


def score_command(
    model: Annotated[
        Path, typer.Argument(metavar="MODEL", help="A .onnx file (or a bundle folder).")
    ],
    inputs: Annotated[
        list[str],
        typer.Argument(
            metavar="INPUT",
            help=(
                "CSV, TSV or Parquet files, folders of them, globs ('data/*.parquet') or "
                "fsspec URLs (s3://bucket/days/)."
            ),
        ),
    ],
    output_text: Annotated[
        str,
        typer.Option(
            "--output",
            "-o",
            metavar="PATH",
            help="A .parquet file (all inputs in one file), or a folder: one part file per input.",
        ),
    ],
    keep: Annotated[
        list[str] | None,
        typer.Option(
            "--keep",
            metavar="COL",
            help="Input column to copy to the output (row keys); repeat it or give a "
            "comma-separated list.",
        ),
    ] = None,
    batch_size: Annotated[
        int, typer.Option("--batch-size", help="Rows per record batch (memory grows with it).")
    ] = 65_536,
    on_error: Annotated[
        str,
        typer.Option(
            "--on-error",
            help="raise: stop at the first bad row, naming its file, row and column; skip: "
            "write bad rows with the reason to a side file and score the rest.",
        ),
    ] = "raise",
    allow_missing: Annotated[
        bool,
        typer.Option(
            "--allow-missing",
            help="Score rows with missing values even if the source model refused them.",
        ),
    ] = False,
    engine: Annotated[
        str, typer.Option(help="local: a thread pool; dask: a Dask cluster.")
    ] = "local",
    scheduler: Annotated[
        str | None,
        typer.Option(
            metavar="ADDRESS",
            help="Dask scheduler to use (tcp://host:8786) [default: start a LocalCluster].",
        ),
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(
            help=(
                "local: threads in the pool; dask: threads of the LocalCluster's worker "
                "process [default: cores]."
            )
        ),
    ] = None,
    session_threads: Annotated[
        int | None,
        typer.Option(
            "--session-threads",
            help="ONNX Runtime threads per session [default: 1 (parallelism comes from the "
            "workers)].",
        ),
    ] = None,
    accelerator: Annotated[
        bool,
        typer.Option(
            "--accelerator",
            help="Score batches of at least the recorded min_rows rows on the compiled engine "
            "`tune --engines all` recorded in the bundle (checked equivalent; smaller batches "
            "stay on ONNX Runtime; native code: needs --trust-native). Local engine only.",
        ),
    ] = False,
    trust_native: Annotated[
        bool,
        typer.Option(
            "--trust-native",
            help="Trust the bundle's compiled library with --accelerator: it is native code "
            "and runs with your rights. Only for bundles you tuned yourself.",
        ),
    ] = False,
    resume: Annotated[
        bool,
        typer.Option("--resume", help="Keep the parts an interrupted run completed; do the rest."),
    ] = False,
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="Replace an existing output that score wrote.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
) -> None:
    """Score CSV / Parquet files larger than memory; write Parquet: keys, label, probabilities.

    Streams record batches so memory stays bounded; every output file appears only when it is
    complete. Exit 0 when done (also with skipped bad rows), 2 on an error.
    """
    from onnxbridge._cli._out import check_out_file
    from onnxbridge._score import score
    from onnxbridge._score.output import OutputLayout
    from onnxbridge.errors import DataError

    if on_error not in ("raise", "skip"):
        raise DataError(f"--on-error {on_error!r} is not supported; use raise or skip")
    if engine not in ("local", "dask"):
        raise DataError(f"--engine {engine!r} is not supported; use local or dask")
    # Read as text: a URL given as the output must be refused as one, not taken as a folder.
    output = OutputLayout.for_output(output_text).path
    if output.suffix.lower() in (".parquet", ".pq"):
        # One output file: its folder must exist. A folder output is score's own: it is created.
        check_out_file(output, "--output")
    err = Console(stderr=True, highlight=False)
    show_bar = not as_json and sys.stderr.isatty()
    bar = _Bar(err) if show_bar else None
    kwargs: dict[str, Any] = {
        "engine": engine,
        "keep": _keep_columns(keep),
        "batch_size": batch_size,
        "on_error": on_error,
        "allow_missing": allow_missing,
        "resume": resume,
        "overwrite": overwrite,
        "workers": workers,
        "session_threads": session_threads,
        "scheduler": scheduler,
        "accelerator": accelerator,
        "trust_native": trust_native,
        "progress": bar,
    }
    if bar is not None:
        with bar.progress:
            result = score(model, inputs, output, **kwargs)
    else:
        result = score(model, inputs, output, **kwargs)
    if as_json:
        sys.stdout.write(json.dumps(result.to_dict(), indent=2) + "\n")
        return
    summary = result.to_dict()
    print(
        f"scored {result.rows:,} rows from {summary['inputs']} input"
        f"{'s' if summary['inputs'] != 1 else ''} in {result.seconds:.2f} s "
        f"({result.rows_per_second:,.0f} rows/s, peak memory {summary['peak_rss_mib']:,.0f} MiB, "
        f"engine {result.engine}, {result.workers} worker{'s' if result.workers != 1 else ''})"
    )
    if summary["parts_resumed"]:
        print(
            f"resumed: kept {summary['parts_resumed']} completed part"
            f"{'s' if summary['parts_resumed'] != 1 else ''} ({result.rows_resumed:,} rows)"
        )
    layout = "file" if len(result.parts) == 1 and result.parts[0].path == result.output else None
    where = "" if layout else f" ({len(result.parts)} part{'s' if len(result.parts) != 1 else ''})"
    print(f"output: {result.output}{where}")
    if result.bad_rows:
        files = summary["bad_rows_files"]
        shown = files[0] if len(files) == 1 else f"{len(files)} files in {Path(files[0]).parent}"
        print(f"bad rows: {result.bad_rows:,} skipped, written with the reason to {shown}")
