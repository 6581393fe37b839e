"""``onnxbridge coverage``: train, convert, run and compare every estimator; write the table."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from onnxbridge._cli._console import make_console
from onnxbridge._cli._out import check_out_file
from onnxbridge.coverage import (
    DEFAULT_TIMEOUT,
    EQUIVALENT,
    MARKDOWN_INTRO,
    CoverageResult,
    run_coverage,
    select_cases,
)
from onnxbridge.errors import DataError
from onnxbridge.validate import DEFAULT_ATOL, DEFAULT_RTOL

__all__ = ["coverage"]

_STYLE = {"EQUIVALENT": "green", "DIVERGENT": "yellow", "FAILED": "red"}


def _names(only: list[str] | None) -> list[str]:
    """``--only A --only B,C`` → ``[A, B, C]``."""
    return [n.strip() for item in only or [] for n in item.split(",") if n.strip()]


def coverage(
    out_md: Annotated[
        Path | None,
        typer.Option(help="Write the Markdown report here (docs/coverage.md is generated so)."),
    ] = None,
    out_json: Annotated[Path | None, typer.Option(help="Write the JSON report here.")] = None,
    only: Annotated[
        list[str] | None,
        typer.Option(
            "--only",
            metavar="NAME",
            help="Run only this estimator (class name; repeatable, or comma-separated).",
        ),
    ] = None,
    timeout: Annotated[
        float, typer.Option(help="Seconds one estimator may take (all stages).")
    ] = DEFAULT_TIMEOUT,
    atol: Annotated[float, typer.Option(help="Absolute tolerance for values.")] = DEFAULT_ATOL,
    rtol: Annotated[float, typer.Option(help="Relative tolerance for values.")] = DEFAULT_RTOL,
    min_equivalent: Annotated[
        int | None,
        typer.Option(
            help="Exit 1 when fewer core estimators than this are EQUIVALENT (a CI gate)."
        ),
    ] = None,
    list_only: Annotated[
        bool, typer.Option("--list", help="List the estimators of the run and exit.")
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the JSON report on standard output.")
    ] = False,
) -> None:
    """Train every scikit-learn estimator (and the boosters) on small data, convert it with the
    defaults, run it in ONNX Runtime and compare: a table of what converts faithfully.

    Exits 0 when the run completes (whatever the verdicts), 1 when --min-equivalent is not
    reached, 2 on bad options.
    """
    names = _names(only)
    if list_only:
        cases = select_cases(names)
        if as_json:
            payload = [{"name": c.name, "group": c.group, "data": c.data} for c in cases]
            sys.stdout.write(json.dumps(payload, indent=2) + "\n")
        else:
            for c in cases:
                print(f"{c.name}\t{c.group}\t{c.data}")
        return
    for flag, value in (("--atol", atol), ("--rtol", rtol)):
        if not value >= 0:
            raise DataError(f"tolerances must be >= 0, got {flag} {value}; e.g. {flag} 1e-5")
    check_out_file(out_md, "--out-md")
    check_out_file(out_json, "--out-json")
    # With --json the report owns standard output; progress goes to standard error.
    console = make_console(highlight=False, soft_wrap=True, stderr=as_json)

    def progress(result: CoverageResult, position: int, total: int) -> None:
        style = _STYLE[result.verdict]
        width = len(str(total))
        reason = f"  {escape(result.reason)}" if result.reason else ""
        console.print(
            f"\\[{position:>{width}}/{total}] {escape(f'{result.name:<32}')} "
            f"[{style}]{result.status:<20}[/{style}] {result.seconds:6.1f} s{reason}",
            markup=True,
            highlight=False,
        )

    report = run_coverage(names, timeout=timeout, atol=atol, rtol=rtol, on_result=progress)
    if out_md is not None:
        report.write_markdown(out_md, MARKDOWN_INTRO)
    if out_json is not None:
        report.write_json(out_json)
    if as_json:
        sys.stdout.write(json.dumps(report.to_dict(), indent=2) + "\n")
    for line in report.summary_lines():
        console.print(line)
    for path in (out_md, out_json):
        if path is not None:
            console.print(f"wrote {path}")
    if min_equivalent is not None:
        reached = report.counts("core")[EQUIVALENT]
        if reached < min_equivalent:
            console.print(
                f"check failed: {reached} core estimators EQUIVALENT, --min-equivalent "
                f"{min_equivalent}"
            )
            raise typer.Exit(1)
