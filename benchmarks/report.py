"""Write docs/benchmarks.md from the latest results in benchmarks/results/*.json.

Every benchmark keeps its latest run in ``benchmarks/results/<name>.json``: the command that made
it, the machine, the date, its tables (medians with their spread) and its goals, met or not.
``benchmarks/record.py`` runs a benchmark script and keeps its output there as the latest run;
``benchmarks/reference.py`` writes ``reference.json`` itself, goals judged.
This script renders them all, one section per benchmark, in their ``order``; earlier runs live in
git's history, not on the page.

    python benchmarks/report.py            # rewrite docs/benchmarks.md
    python benchmarks/report.py --check    # exit 1 if docs/benchmarks.md is not what it makes

Standard library only, so the page can be rebuilt without the project installed.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import platform
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
PAGE = ROOT / "docs" / "benchmarks.md"
MAX_LINES = 400

HEADER = """\
# Benchmarks

Speed is measured by the scripts under `benchmarks/`, never by timed tests. Each script measures
its baseline in the same run, repeats interleaved so that noise hits all alike; figures are medians
with their spread (IQR, or range over rounds), ratios between medians of one run. Each section
gives the command that made it (from the repository root, after `make install`), the
machine it ran on, and its goals. The machine is shared: read the ratios, and re-run a command
before relying on an absolute time. `benchmarks/report.py` writes this page from
`benchmarks/results/*.json`; earlier runs are in git's history.

**The models**: the *reference model* is the demo's (Iris, `RandomForestClassifier(n_estimators=10,
random_state=42)`, scored on `np.random.RandomState(0).rand(N, 4)` as float32). The *benchmark
data* is `make_classification(n_samples=20000, n_features=28, n_informative=15, n_classes=2,
random_state=0)`: models fit its first 10 000 rows and score the rest (tiled for larger batches).
The *benchmark forest* is `RandomForestClassifier(n_estimators=100, random_state=0)` on it.
"""


def load_results(folder: Path = RESULTS) -> list[dict[str, Any]]:
    """Every results file of ``folder``, in the order their sections appear on the page."""
    results = [json.loads(p.read_text(encoding="utf-8")) for p in sorted(folder.glob("*.json"))]
    return sorted(results, key=lambda r: (r.get("order", 1000), r["name"]))


def machine() -> dict[str, Any]:
    """Cores, load average now, and the versions that matter: what :func:`machine_line` shows
    (``benchmarks/record.py`` and ``benchmarks/reference.py`` record it with each run)."""
    from importlib.metadata import PackageNotFoundError, version

    found: dict[str, Any] = {"cores": os.cpu_count(), "load": f"{os.getloadavg()[0]:.2f}"}
    found["python"] = platform.python_version()
    for package in ("onnxruntime", "scikit-learn"):
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            pass
    return found


def machine_line(run: dict[str, Any]) -> str:
    """One line: the machine of a run (cores, load, library versions)."""
    machine = run.get("machine", {})
    words = [f"{machine['cores']} cores"] if "cores" in machine else []
    if machine.get("shared"):
        words[-1:] = [f"{words[-1]} (shared)"] if words else ["a shared machine"]
    if "load" in machine:
        words.append(f"load average {machine['load']}")
    versions = [
        f"{lib} {machine[key]}"
        for key, lib in (
            ("python", "Python"),
            ("onnxruntime", "onnxruntime"),
            ("scikit-learn", "scikit-learn"),
        )
        if key in machine
    ]
    where = ", ".join(words + versions)
    # The run's date stays in its results file (git has the history); the page says where.
    return f"*Measured on {where or 'one machine'}.*"


def table_lines(table: dict[str, Any]) -> list[str]:
    """A Markdown table from ``columns`` and ``rows`` (cells written as given)."""
    lines = ["| " + " | ".join(table["columns"]) + " |"]
    lines.append("|" + "---|" * len(table["columns"]))
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in table["rows"]]
    return lines


def part_lines(part: dict[str, Any]) -> list[str]:
    """A run's output (as printed), table or sentence."""
    if "output" in part:
        return ["```", part["output"], "```"]
    if "table" in part:
        return table_lines(part["table"])
    return wrap(part["text"])


def goal_lines(goals: list[dict[str, Any]]) -> list[str]:
    """The goals of a benchmark, one line each: the goal, the result, met or not."""
    verdict = {True: "**met**", False: "**not met**", None: "not judged"}
    return [f"- {verdict[g['met']]}: {g['goal']} → {g['result']}" for g in goals]


def section_lines(result: dict[str, Any]) -> list[str]:
    """One benchmark's section: what it measures, then per run the command, machine and tables,
    then its goals."""
    lines = [f"## {result['title']}", ""]
    after_text = False
    for paragraph in result.get("about", []):
        lines += [*wrap(paragraph), ""]
        after_text = True
    for run in result["runs"]:
        if after_text:
            lines.pop()  # a run's commands follow the paragraph that leads to them directly
        lines += ["```text", *run["commands"], "```", machine_line(run)]
        for index, part in enumerate(run["parts"]):
            # A fenced block may follow the machine's line directly; text needs a blank line.
            lines += [*([] if index == 0 and "output" in part else [""]), *part_lines(part)]
        lines.append("")
        after_text = bool(run["parts"]) and "text" in run["parts"][-1]
    if result.get("goals"):
        lines += [*goal_lines(result["goals"]), ""]
    for note in result.get("notes", []):
        lines += [*wrap(note), ""]
    return lines


def render(results: list[dict[str, Any]]) -> str:
    """The whole page."""
    lines = [*HEADER.rstrip("\n").split("\n"), ""]
    for result in results:
        lines += section_lines(result)
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines) + "\n"


def wrap(paragraph: str, width: int = 99) -> list[str]:
    """A paragraph broken into lines of at most ``width`` characters, at spaces."""
    out, current = [], ""
    for word in paragraph.split(" "):
        if current and len(current) + 1 + len(word) > width:
            out.append(current)
            current = word
        else:
            current = f"{current} {word}" if current else word
    out.append(current)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only compare with the page")
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--page", type=Path, default=PAGE)
    args = parser.parse_args(argv)
    text = render(load_results(args.results))
    lines = text.count("\n")
    if lines > MAX_LINES:
        print(f"error: the page would have {lines} lines, more than {MAX_LINES}: shorten a section")
        return 1
    if not args.check:
        args.page.write_text(text, encoding="utf-8")
        print(f"wrote {args.page} ({lines} lines)")
        return 0
    current = args.page.read_text(encoding="utf-8") if args.page.exists() else ""
    if current == text:
        print(f"{args.page} is up to date ({lines} lines)")
        return 0
    diff = difflib.unified_diff(
        current.splitlines(), text.splitlines(), str(args.page), "report.py", lineterm=""
    )
    print("\n".join(list(diff)[:40]))
    print(f"error: {args.page} differs from the results; run python benchmarks/report.py")
    return 1


if __name__ == "__main__":
    sys.exit(main())
