"""Run a benchmark script and keep what it prints as that benchmark's latest run.

    python benchmarks/record.py engines -- .venv/bin/python benchmarks/engines.py --summarize a.json
    python benchmarks/record.py serve_load --run 2 -- .venv/bin/python benchmarks/serve_load.py ...

The command's standard output becomes run ``--run`` (1: the first) of
``benchmarks/results/<name>.json``, with the command, today's date and this machine; the
benchmark's title, description and other runs stay. Its goals were judged on the previous
figures, so they are marked "not judged" until someone compares them with the new output and
edits the file. Then docs/benchmarks.md is written again (``benchmarks/report.py``). A command
that fails changes nothing.

Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
from datetime import date
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import report  # noqa: E402  (beside this script)


def shown(command: list[str]) -> str:
    """The command as the page shows it (with ``PYTHONPATH=src`` when that was set)."""
    text = shlex.join(command)
    return f"PYTHONPATH=src {text}" if os.environ.get("PYTHONPATH") == "src" else text


def updated(result: dict[str, Any], index: int, run: dict[str, Any]) -> dict[str, Any]:
    """``result`` with run ``index`` replaced (or appended after the last) and goals unjudged."""
    runs = list(result.get("runs", []))
    if index > len(runs):
        raise SystemExit(f"error: --run {index + 1}: {result['name']} has {len(runs)} run(s)")
    runs[index : index + 1] = [run]
    goals = [
        {**goal, "met": None, "result": f"not judged on the run of {run['date']} yet"}
        for goal in result.get("goals", [])
    ]
    return {**result, "runs": runs, "goals": goals}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], usage="%(prog)s NAME [--run N] -- COMMAND ..."
    )
    parser.add_argument("name", help="the results file: benchmarks/results/NAME.json")
    parser.add_argument("--run", type=int, default=1, help="which run of the file it replaces")
    parser.add_argument("--results", type=Path, default=report.RESULTS)
    parser.add_argument("--page", type=Path, default=report.PAGE)
    argv = sys.argv[1:] if argv is None else argv
    split = argv.index("--") if "--" in argv else len(argv)
    args, command = parser.parse_args(argv[:split]), argv[split + 1 :]
    path = args.results / f"{args.name}.json"
    if not command:
        parser.error("give the command after --")
    if not path.is_file():
        parser.error(f"{path} does not exist: copy another results file and edit its title")
    done = subprocess.run(command, stdout=subprocess.PIPE, text=True)
    sys.stdout.write(done.stdout)
    if done.returncode != 0:
        print(f"error: the command failed ({done.returncode}); {path} is unchanged")
        return done.returncode
    run = {
        "commands": [shown(command)],
        "date": date.today().isoformat(),
        "machine": report.machine(),
        "parts": [{"output": done.stdout.rstrip("\n")}],
    }
    result = updated(json.loads(path.read_text(encoding="utf-8")), args.run - 1, run)
    partial = path.with_suffix(".json.tmp")
    partial.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    partial.replace(path)
    print(f"recorded in {path}; judge its goals against this output, then run report.py")
    return report.main(["--results", str(args.results), "--page", str(args.page)])


if __name__ == "__main__":
    sys.exit(main())
