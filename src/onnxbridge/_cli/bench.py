"""``onnxbridge bench`` and ``onnxbridge tune``: thin commands over :mod:`onnxbridge.bench` and
:mod:`onnxbridge.tune`."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, cast

import typer
from rich.console import Console
from rich.padding import Padding
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from onnxbridge._cli._console import make_console
from onnxbridge._cli._source import TrustOption
from onnxbridge.bench._format import format_bytes, format_rate, format_ratio, format_seconds
from onnxbridge.errors import DataError

__all__ = ["bench_command", "format_ratio", "format_seconds", "tune_command"]

# Lines wrap at the terminal's width (80 in a pipe), so nothing is cut or runs past it.
console = make_console(highlight=False)


def _int_list(text: str | None, option: str) -> list[int] | None:
    if text is None:
        return None
    values = []
    for item in text.split(","):
        try:
            values.append(int(item.strip().replace("_", "")))
        except ValueError:
            raise DataError(
                f"{option} {text!r} is not a list of whole numbers; write e.g. 1,2"
            ) from None
    return values


@contextmanager
def _progress(enabled: bool) -> Iterator[Any]:
    """A rich progress bar on standard error (nothing when disabled)."""
    err = Console(file=sys.stderr)
    if not enabled or not sys.stderr.isatty():
        # Off a terminal (a pipe, a CI log, even with FORCE_COLOR set) the bar shows nothing
        # but leaves a blank line before any error.
        yield None
        return
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.percentage:>3.0f}%"),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    ) as bar:
        task = bar.add_task("measuring", total=1)

        def update(done: int, total: int, label: str) -> None:
            bar.update(task, completed=done, total=total, description=label)

        yield update


def _print_json(payload: Any) -> None:
    sys.stdout.write(json.dumps(payload, indent=2, default=str) + "\n")


# ---------------------------------------------------------------------------------------- bench
def _table(title: str) -> Table:
    # A left-aligned title wraps at the table's width instead of centring over it.
    return Table(title=title, title_justify="left")


def _results_table(title: str, results: list[Any], has_sklearn: bool) -> Table:
    # Short cells and headers: the table fits 80 columns (a pipe, a CI log) without cutting.
    table = _table(title)
    table.add_column("rows", justify="right", no_wrap=True)
    table.add_column("engine", no_wrap=True)
    table.add_column("per call ±IQR/2", justify="right", no_wrap=True)
    table.add_column("per row", justify="right", no_wrap=True)
    table.add_column("rows/s", justify="right", no_wrap=True)
    if has_sklearn:
        table.add_column("×sklearn", justify="right", no_wrap=True)
    by_batch: dict[int, list[Any]] = {}
    for r in results:
        by_batch.setdefault(r.batch, []).append(r)
    for batch, group in by_batch.items():
        fastest = min(group, key=lambda r: r.timing.median)
        for i, r in enumerate(group):
            name = f"[bold]{r.engine}[/bold]" if r is fastest else r.engine
            row = [
                f"{batch:,}" if i == 0 else "",
                name,
                f"{format_seconds(r.timing.median)} ±{r.timing.spread / 2:.0%}",
                format_seconds(r.per_row),
                format_rate(r.rows_per_second),
            ]
            if has_sklearn:
                row.append(format_ratio(r.speedup))
            table.add_row(*row, end_section=i == len(group) - 1)
    return table


def _legend(rows: list[tuple[str, str]], indent: int = 2) -> Padding:
    """``key  text`` lines; a long text wraps under itself, not under the key."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(no_wrap=True)
    grid.add_column()
    for key, text in rows:
        grid.add_row(key, text)
    return Padding(grid, (0, 0, 0, indent), expand=False)


def _print_bench(report: Any, reports_dir: Path | None) -> None:
    has_sklearn = "sklearn" in report.engines
    title = (
        f"{Path(report.model).parent.name}/{Path(report.model).name}: median per call of "
        f"{report.repeat} interleaved repeats "
        f"(rows from {report.rows_from}; bold: fastest)"
    )
    console.print(_results_table(title, report.results, has_sklearn))
    console.print(_legend([(f"{name}:", text) for name, text in report.engines.items()]))
    facts = report.facts
    line = (
        f"model: {facts.onnx_bytes:,} bytes .onnx, session load {format_seconds(facts.load.median)}"
    )
    if facts.skops_bytes is not None:
        line += f"; {facts.skops_bytes:,} bytes .skops"
        if facts.sklearn_load is not None:
            line += f", skops load {format_seconds(facts.sklearn_load.median)}"
    if facts.conversion is not None:
        line += f"; conversion {format_seconds(facts.conversion.median)}"
    console.print(line)
    machine = report.machine
    console.print(
        f"machine: {machine.get('cores')} cores, load average "
        f"{', '.join(str(v) for v in machine.get('load_average', []))}; "
        f"onnxruntime {machine.get('onnxruntime')}, scikit-learn {machine.get('scikit-learn')}"
    )
    if not report.tuned:
        console.print("onnxbridge ran its default settings: run `onnxbridge tune` to tune them")
    if report.sweep:
        _print_sweep(report.sweep)
    if reports_dir is not None:
        # A path is never broken over lines, so it can be copied whole.
        console.print(f"report: {reports_dir / 'bench.json'}", soft_wrap=True)
        console.print(f"plot: {reports_dir / 'bench.png'}", soft_wrap=True)


def _print_sweep(sweep: dict[str, Any]) -> None:
    """Two tables, stacked so each fits 80 columns: the variants, then their timings.

    Only the swept parameter's column may fold (a long name), so no number is ever cut.
    """
    parameter = sweep["parameter"]
    variants = _table(f"sweep over {parameter}: each variant retrained, converted, untuned")
    variants.add_column(parameter, justify="right", overflow="fold")
    variants.add_column(".onnx", justify="right", no_wrap=True)
    variants.add_column("load", justify="right", no_wrap=True)
    variants.add_column("convert", justify="right", no_wrap=True)
    for variant in sweep["variants"]:
        facts = variant["facts"]
        variants.add_row(
            repr(variant["value"]),
            format_bytes(facts["onnx_bytes"]),
            format_seconds(facts.get("load_seconds")),
            format_seconds(facts["conversion_seconds"]),
        )
    console.print(variants)
    table = _table(f"sweep over {parameter}: median per call")
    table.add_column(parameter, justify="right", overflow="fold")
    table.add_column("rows", justify="right", no_wrap=True)
    for column in ("sklearn", "ort-default", "onnxbridge", "×sklearn"):
        table.add_column(column, justify="right", no_wrap=True)
    for variant in sweep["variants"]:
        by_batch: dict[int, dict[str, Any]] = {}
        for r in variant["results"]:
            by_batch.setdefault(r["batch"], {})[r["engine"]] = r
        for i, (batch, engines) in enumerate(by_batch.items()):
            ours = engines.get("onnxbridge", {})
            table.add_row(
                repr(variant["value"]) if i == 0 else "",
                f"{batch:,}",
                format_seconds(engines.get("sklearn", {}).get("median")),
                format_seconds(engines.get("ort-default", {}).get("median")),
                format_seconds(ours.get("median")),
                format_ratio(ours.get("speedup_vs_sklearn")),
                end_section=i == len(by_batch) - 1,
            )
    console.print(table)


def bench_command(
    target: Annotated[
        Path,
        typer.Argument(metavar="MODEL", help="A bundle folder or a .onnx file."),
    ],
    data: Annotated[
        Path | None,
        typer.Option(help="Rows to time on instead of the holdout (tiled to each batch size)."),
    ] = None,
    batch_sizes: Annotated[
        str, typer.Option(help="Rows per call, comma-separated.")
    ] = "1,10,100,1000,10000,100000",
    threads: Annotated[
        str | None,
        typer.Option(help="Intra-op thread counts for the ort-Nt engines [default: 1..cores]."),
    ] = None,
    repeat: Annotated[int, typer.Option(help="Interleaved repeats per engine and size.")] = 7,
    min_time: Annotated[
        float, typer.Option(help="Seconds one repeat lasts at least (calls are calibrated).")
    ] = 0.05,
    sweep: Annotated[
        str | None,
        typer.Option(
            metavar="PARAM=V1,V2,...",
            help="Retrain, convert and time one variant per value, e.g. n_estimators=10,50,100.",
        ),
    ] = None,
    sweep_batch_sizes: Annotated[
        str | None, typer.Option(help="Batch sizes for the sweep [default: --batch-sizes].")
    ] = None,
    progress: Annotated[
        bool, typer.Option("--progress/--no-progress", help="Show a progress bar on stderr.")
    ] = True,
    trust: TrustOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Time scikit-learn against ONNX Runtime (default, by threads, tuned) over batch sizes.

    Writes reports/bench.json and reports/bench.png (in the bundle, or beside the .onnx file).
    """
    from onnxbridge.bench._run import bench_model
    from onnxbridge.bench._source import parse_batch_sizes

    sizes = parse_batch_sizes(batch_sizes)
    with _progress(progress) as update:
        report = bench_model(
            target,
            data=data,
            batch_sizes=sizes,
            threads=_int_list(threads, "--threads"),
            repeat=repeat,
            min_time=min_time,
            sweep=sweep,
            sweep_batch_sizes=sweep_batch_sizes,
            progress=update,
            trusted=tuple(trust or ()),
        )
    reports_dir = (target if target.is_dir() else target.parent) / "reports"
    if as_json:
        _print_json(report.to_dict())
    else:
        _print_bench(report, reports_dir)


# ----------------------------------------------------------------------------------------- tune
def _settings_id(index: int) -> str:
    """``A`` … ``Z``, then ``AA``, ``AB`` … (spreadsheet columns)."""
    name = ""
    index += 1
    while index:
        index, rest = divmod(index - 1, 26)
        name = chr(ord("A") + rest) + name
    return name


def _print_tune(report: Any, stored: bool) -> None:
    from onnxbridge.tune._table import tune_columns, tune_rows

    for regime in report.regimes:
        # Settings are listed under the table by a short id: their labels would not fit 80
        # columns beside the timings.
        ids: dict[Any, str] = {}
        for c in regime.candidates:
            ids.setdefault(c.settings, _settings_id(len(ids)))
        rows = f"{regime.rows:,} row{'s' if regime.rows != 1 else ''}"
        table = _table(f"{regime.regime}: {rows} per call, session.run")
        table.add_column("step", justify="right", no_wrap=True)
        table.add_column("settings", no_wrap=True)
        for header in tune_columns(regime):
            # On two lines each ("vs best" over "in step"), so the table fits 80 columns.
            words = header.split(" ")
            half = (len(words) + 1) // 2
            table.add_column(
                " ".join(words[:half]) + "\n" + " ".join(words[half:]),
                justify="right",
                no_wrap=True,
            )
        table.add_column("", no_wrap=True)
        for row in tune_rows(regime):
            key = ids[row.settings]
            table.add_row(
                row.step,
                f"[bold]{key}[/bold]" if row.chosen else key,
                *row.cells,
                row.mark,
                end_section=row.ends_step,
            )
        console.print(table)
        console.print("settings:")
        console.print(_legend([(key, settings.label()) for settings, key in ids.items()]))
        best = regime.winner_timing.median
        console.print(
            f"{regime.regime}: chose {ids.get(regime.winner, '')} ({regime.winner.label()}); "
            f"speed-up (step 2) {regime.ort_default.median / best:.2f}× over ONNX Runtime's "
            f"defaults, {regime.onnxbridge_default.median / best:.2f}× over onnxbridge's defaults"
        )
    spec = report.spec
    if report.boundary:
        points = ", ".join(
            f"{b['rows']:,} rows: {format_seconds(b['latency'])} vs "
            f"{format_seconds(b['throughput'])}"
            for b in report.boundary
        )
        console.print(f"boundary (latency vs throughput settings): {points}")
    console.print(
        f"rule: calls of at most {spec.latency_max_rows:,} rows use the latency settings "
        f"({spec.latency.label()}), larger ones the throughput settings "
        f"({spec.throughput.label()})"
    )
    for check in report.accelerators:
        console.print(f"accelerator {check['name']}: {check['verdict']}; {check['reason']}")
    for line in report.accelerators_skipped:
        console.print(f"accelerator {line}")
    if spec.accelerator:
        acc = spec.accelerator
        console.print(
            f"recorded accelerator (on request: score --accelerator --trust-native, "
            f"AcceleratedPredictor.load(predictor, trust_native=True)): {acc['engine']} "
            f"({acc['threads']} thread{'s' if acc['threads'] != 1 else ''}) "
            f"from {acc['min_rows']:,} row{'s' if acc['min_rows'] != 1 else ''} per call, "
            f"{acc['speedup']:.2f}× ONNX Runtime"
        )
    if stored:
        console.print(
            f"stored in {report.model} (metadata onnxbridge.session) and the card", soft_wrap=True
        )
    else:
        console.print("not stored (--dry-run)")


def tune_command(
    target: Annotated[
        Path,
        typer.Argument(metavar="MODEL", help="A bundle folder or a .onnx file."),
    ],
    regime: Annotated[
        str, typer.Option(help="latency (small calls), throughput (large calls) or both.")
    ] = "both",
    engines: Annotated[
        str,
        typer.Option(
            help="onnxruntime, or all: also try installed accelerators (tl2cgen, lleaves)."
        ),
    ] = "onnxruntime",
    data: Annotated[
        Path | None, typer.Option(help="Rows to time on instead of the holdout.")
    ] = None,
    latency_rows: Annotated[int, typer.Option(help="Rows per call for latency.")] = 1,
    throughput_rows: Annotated[int, typer.Option(help="Rows per call for throughput.")] = 10_000,
    repeat: Annotated[int, typer.Option(help="Interleaved repeats per candidate.")] = 7,
    min_time: Annotated[float, typer.Option(help="Seconds one repeat lasts at least.")] = 0.05,
    margin: Annotated[
        float, typer.Option(help="How much faster a dearer setting must be to win (0.02: 2 %).")
    ] = 0.02,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Measure and print; store nothing.")
    ] = False,
    progress: Annotated[
        bool, typer.Option("--progress/--no-progress", help="Show a progress bar on stderr.")
    ] = True,
    trust: TrustOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Measure session settings per regime and store the winners in the model and its card.

    Predictor (and so predict, serve, score) then uses them, picking the regime by batch size.
    """
    from onnxbridge.tune import Engines, Regime, tune_model

    with _progress(progress) as update:
        report = tune_model(
            target,
            # tune_model refuses values outside these (one clear line).
            regime=cast(Regime, regime),
            engines=cast(Engines, engines),
            data=data,
            latency_rows=latency_rows,
            throughput_rows=throughput_rows,
            repeat=repeat,
            min_time=min_time,
            margin=margin,
            write=not dry_run,
            progress=update,
            trusted=tuple(trust or ()),
        )
    if as_json:
        _print_json(report.to_dict())
    else:
        _print_tune(report, stored=not dry_run)
