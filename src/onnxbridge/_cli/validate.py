"""The ``onnxbridge validate`` command: a bundle, or any ONNX file with its source model.

::

    onnxbridge validate BUNDLE [options]
    onnxbridge validate MODEL.onnx --reference MODEL.skops --data FILE [options]

Exit codes: 0 EQUIVALENT, 1 DIVERGENT, 2 could not run (one ``error:`` line).
"""

from __future__ import annotations

import json
import math
import shlex
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from onnxbridge._cli._console import make_console
from onnxbridge._cli._source import TrustOption
from onnxbridge._meta import role_parts
from onnxbridge.errors import DataError

__all__ = ["parse_tolerance", "print_validation", "validate_command"]

EXIT_CHECK_FAILED = 1


def _fmt(value: float | None, digits: int = 3) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}g}" if value != 0 else "0"


def parse_tolerance(text: str) -> tuple[str, Any]:
    """``ROLE=ATOL`` or ``ROLE=ATOL:RTOL`` → (role, Tolerance).

    Raises:
        DataError: not of that form, or not numbers.
    """
    from onnxbridge.validate import DEFAULT_TOLERANCES, Tolerance

    role, sep, values = text.partition("=")
    atol_text, _, rtol_text = values.partition(":")
    try:
        if not sep or not role:
            raise ValueError(text)
        default = DEFAULT_TOLERANCES.get(role.strip(), Tolerance())
        atol = float(atol_text)
        rtol = float(rtol_text) if rtol_text else default.rtol
    except ValueError:
        raise DataError(
            f"--tolerance {text!r} is not ROLE=ATOL[:RTOL]; e.g. --tolerance probabilities=1e-6 "
            f"or --tolerance value=1e-3:1e-5 (roles: {', '.join(DEFAULT_TOLERANCES)})"
        ) from None
    role = role.strip()
    # Named as typed: the flag with its ROLE=ATOL:RTOL, not atol= / rtol= nobody wrote.
    bad = [
        f"{name} {value:g}"
        for name, value in (("ATOL", atol), ("RTOL", rtol))
        if not (math.isfinite(value) and value >= 0)
    ]
    if bad:
        raise DataError(
            f"tolerances must be finite numbers >= 0, got {' and '.join(bad)} in "
            f"--tolerance {shlex.quote(text)}; e.g. --tolerance {shlex.quote(role)}=1e-5:1e-5"
        )
    return role, Tolerance(atol, rtol)


def _split_list(text: str | None, option: str, allowed: tuple[str, ...]) -> tuple[str, ...] | None:
    if text is None:
        return None
    items = tuple(part.strip() for part in text.split(",") if part.strip())
    bad = [i for i in items if i not in allowed]
    if bad or not items:
        raise DataError(
            f"{option} {text!r} is not valid; pass a comma-separated list of {', '.join(allowed)}"
        )
    return items


_SHORT = {"sklearn": "sk", "onnxruntime": "ort", "reference": "ref"}


def _short(pair_name: str) -> str:
    """``sklearn~onnxruntime`` → ``sk~ort``; ``X~X[1-row]`` → ``1-row``."""
    a, _, b = pair_name.partition("~")
    if b.endswith("[1-row]"):
        return "1-row"
    return f"{_SHORT.get(a, a)}~{_SHORT.get(b, b)}"


def _pair_cell(pair: Any, gating: bool) -> str:
    if pair.error:
        return f"error: {pair.error}"
    numeric = [c.max_abs_diff for c in pair.outputs if c.max_abs_diff is not None]
    text = pair.status + (f" {_fmt(max(numeric))}" if numeric else "")
    for c in pair.outputs:
        if c.kind == "labels" and c.n_mismatched:
            text += f" labels {c.n_mismatched}/{c.n_rows}"
    if not pair.ok and not gating:
        text += " (warn)"
    return text


def print_validation(report: Any, console: Console) -> None:
    """The report as rich tables: the headline table, then one row per probe set and pair."""
    headline = Table(title=f"{report.compared} on {report.n_rows} {report.rows} rows")
    # Output names fold rather than being cut; the short numeric columns never wrap, so the
    # table fits 80 columns (a pipe, a CI log).
    headline.add_column("output", overflow="fold")
    for column in ("agreement", "differ", "max |Δ|", "mean |Δ|", "max rel Δ", "ok"):
        headline.add_column(column, justify="right", no_wrap=True)
    for c in report.outputs:
        headline.add_row(
            c.name,
            f"{c.agreement:.2%}",
            str(c.n_mismatched),
            _fmt(c.max_abs_diff),
            _fmt(c.mean_abs_diff),
            _fmt(c.max_rel_diff),
            "yes" if c.ok else "NO",
        )
    console.print(headline)
    pair_names: list[str] = []
    for probe in report.probe_sets:
        for pair in probe.pairs:
            if _short(pair.name) not in pair_names:
                pair_names.append(_short(pair.name))
    table = Table(title="probe sets: status, max |Δ|, differing labels")
    table.add_column("probe set", no_wrap=True)
    table.add_column("rows", justify="right", no_wrap=True)
    for name in pair_names:
        # A long cell (an error) wraps, and a long word folds, instead of ending in "…".
        table.add_column(name, overflow="fold")
    skipped = []
    for probe in report.probe_sets:
        if probe.skipped is not None:
            skipped.append(f"{probe.name} ({probe.skipped})")
            continue
        cells: dict[str, str] = {}
        for pair in probe.pairs:
            cell = _pair_cell(pair, probe.gating and pair.gating)
            key = _short(pair.name)
            # One "1-row" column for every runtime: its worst cell.
            if key not in cells or not pair.ok:
                cells[key] = cell
        table.add_row(probe.name, str(probe.n_rows), *[cells.get(n, "") for n in pair_names])
    console.print(table)
    console.print("sk = scikit-learn, ort = onnxruntime, ref = onnx.reference")
    console.print("1-row = each ONNX runtime's rows scored one at a time vs in one batch")
    if skipped:
        console.print("skipped: " + "; ".join(skipped))
    for probe in report.probe_sets:
        if probe.sampled is not None:
            console.print(f"{probe.name}: {probe.sampled}")
    shown = {role_parts(c.name)[0] for c in report.outputs} or set(report.tolerances)
    parts = [
        f"{role} |Δ| <= {t['atol']:g} + {t['rtol']:g}·|a|"
        for role, t in report.tolerances.items()
        if role in shown
    ]
    console.print("tolerance: labels identical; " + "; ".join(parts))
    if report.golden is not None:
        golden = report.golden
        state = (
            "identical"
            if golden["identical"]
            else "changed within tolerance"
            if golden["ok"]
            else "CHANGED"
        )
        console.print(f"golden predictions: {golden['n_rows']} rows re-run, {state}")
    for d in report.diagnoses:
        console.print(f"diagnosis ({d.kind}): {d.summary}")
        for line in d.details:
            console.print(f"  - {line}")
        console.print(f"  next step: {d.next_step}")
    if report.failing_probe_sets:
        console.print(f"caught by: {', '.join(report.failing_probe_sets)}")
    if report.warning_probe_sets:
        console.print(f"warnings: {', '.join(report.warning_probe_sets)}")
    console.print(f"verdict: {report.verdict}")
    for line in report.warnings:
        console.print(f"warning: {line}")


def validate_command(
    target: Annotated[
        Path,
        typer.Argument(
            metavar="MODEL",
            help="A bundle folder with model.onnx, or an ONNX file (then --reference and --data).",
        ),
    ],
    reference: Annotated[
        Path | None,
        typer.Option(
            help="The source model (.skops; .pkl/.joblib with --allow-pickle) of MODEL.onnx."
        ),
    ] = None,
    data: Annotated[
        Path | None,
        typer.Option(help="Rows the model was not trained on (CSV, Parquet, ...) for MODEL.onnx."),
    ] = None,
    target_column: Annotated[
        str | None, typer.Option("--target", help="Target column to drop from --data.")
    ] = None,
    atol: Annotated[
        float | None,
        typer.Option(help="Absolute tolerance for every numeric output [default: 1e-5]."),
    ] = None,
    rtol: Annotated[
        float | None,
        typer.Option(help="Relative tolerance for every numeric output [default: 1e-5]."),
    ] = None,
    tolerance: Annotated[
        list[str] | None,
        typer.Option(
            "--tolerance",
            metavar="ROLE=ATOL[:RTOL]",
            help="Tolerance of one output role (probabilities, scores, value, "
            "transformed); repeatable.",
        ),
    ] = None,
    probes: Annotated[
        str | None,
        typer.Option(
            help="Probe sets to run, comma-separated [default: all: "
            "holdout,range,thresholds,edge,missing,strings,categories,batch]."
        ),
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the random probe rows.")] = 0,
    range_rows: Annotated[int, typer.Option(help="Rows in the range probe set.")] = 200,
    max_threshold_rows: Annotated[
        int, typer.Option(help="Cap on rows in the thresholds probe set.")
    ] = 3000,
    missing_rows: Annotated[
        int, typer.Option(help="Held-out rows copied per column in the missing probe set.")
    ] = 20,
    batch_rows: Annotated[
        int, typer.Option(help="Rows scored one at a time in the batch probe set.")
    ] = 20,
    missing_values: Annotated[
        str,
        typer.Option(
            help="auto, gate or warn: whether the missing probe set gates the verdict "
            "(auto: when the data holds NaN)."
        ),
    ] = "auto",
    runtimes: Annotated[
        str, typer.Option(help="Runtimes to compare pairwise, comma-separated.")
    ] = "sklearn,onnxruntime,reference",
    budget: Annotated[
        str,
        typer.Option(
            metavar="SECONDS",
            help="Time for scoring the probe sets; a set that would not fit runs on a seeded "
            "sample of its rows (0 or none: no budget).",
        ),
    ] = "60",
    golden: Annotated[
        bool,
        typer.Option(
            "--golden",
            help="Re-run the golden predictions stored at convert and report any change.",
        ),
    ] = False,
    no_diagnosis: Annotated[
        bool, typer.Option("--no-diagnosis", help="Skip the diagnosis of a DIVERGENT verdict.")
    ] = False,
    no_html: Annotated[
        bool, typer.Option("--no-html", help="Do not write validation.html.")
    ] = False,
    report_dir: Annotated[
        Path | None,
        typer.Option(
            help="Where to write validation.json/.html [default: BUNDLE/reports, or "
            "reports/ beside MODEL.onnx]."
        ),
    ] = None,
    allow_pickle: Annotated[
        bool,
        typer.Option(
            "--allow-pickle", help="Allow a .pkl / .joblib --reference (runs code from the file)."
        ),
    ] = False,
    trust: TrustOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Validate model.onnx against its source on every probe set, with three runtimes.

    Exits 0 when EQUIVALENT, 1 when DIVERGENT, 2 when it could not run; writes
    reports/validation.json and reports/validation.html.
    """
    from onnxbridge.validate import PROBE_NAMES, ProbeSpec, validate_bundle, validate_model
    from onnxbridge.validate._core import MISSING_POLICIES, write_reports
    from onnxbridge.validate._runtimes import RUNTIME_NAMES

    console = make_console(highlight=False, soft_wrap=True)
    per_role = dict(parse_tolerance(t) for t in (tolerance or ()))
    if missing_values not in MISSING_POLICIES:
        raise DataError(
            f"--missing-values {missing_values!r} is not valid; use one of "
            f"{', '.join(MISSING_POLICIES)}"
        )
    spec = ProbeSpec(
        probes=_split_list(probes, "--probes", PROBE_NAMES) or PROBE_NAMES,
        seed=seed,
        range_rows=range_rows,
        max_threshold_rows=max_threshold_rows,
        missing_rows=missing_rows,
        batch_rows=batch_rows,
    )
    chosen = _split_list(runtimes, "--runtimes", RUNTIME_NAMES) or RUNTIME_NAMES
    # What a bundle and a bare .onnx file are checked with alike.
    checks: dict[str, Any] = {
        "atol": atol,
        "rtol": rtol,
        "tolerances": per_role,
        "probes": spec,
        "runtimes": chosen,
        "diagnose": not no_diagnosis,
        "missing_values": missing_values,
        "budget": budget,
    }
    if target.is_dir() or (target.suffix.lower() != ".onnx" and reference is None):
        if reference is not None or data is not None or allow_pickle or target_column:
            raise DataError(
                "--reference, --data, --target and --allow-pickle are for an ONNX file; "
                "a bundle carries its own model.skops and holdout.parquet"
            )
        # With --report-dir the reports go there and the bundle is left as it is.
        report = validate_bundle(
            target,
            **checks,
            golden=golden,
            write_report=report_dir is None,
            html=not no_html,
            trusted=tuple(trust or ()),
        )
        if report_dir is not None:
            write_reports(report, report_dir, html=not no_html)
            where = report_dir / "validation.json"
        else:
            where = target / "reports" / "validation.json"
    else:
        from onnxbridge._cli._source import load_model_and_rows

        if golden:
            raise DataError(
                "--golden needs a bundle folder (golden predictions live in the bundle)"
            )
        if reference is None or data is None:
            raise DataError(
                f"validating the ONNX file {str(target)!r} needs --reference MODEL.skops (the "
                "source model) and --data FILE (rows it was not trained on)"
            )
        estimator, frame = load_model_and_rows(
            reference, data, target=target_column, allow_pickle=allow_pickle, trust=trust
        )
        report = validate_model(target, estimator, frame, **checks)
        folder = report_dir or target.parent / "reports"
        write_reports(report, folder, html=not no_html)
        where = folder / "validation.json"
    if as_json:
        sys.stdout.write(json.dumps(report.to_dict(), indent=2, default=str) + "\n")
    else:
        print_validation(report, console)
        console.print(
            f"report: {where}" + ("" if no_html else f" and {where.with_suffix('.html')}")
        )
    if not report.equivalent:
        raise typer.Exit(EXIT_CHECK_FAILED)
