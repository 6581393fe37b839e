"""Run the commands and Python blocks of a Markdown page and compare what they print with the page.

The rules (they are also written for users in docs/index.md, "These pages are tested"):

- A fenced block whose first line starts with ``$ `` is a shell session: each ``$ `` line (with its
  ``\\``-continued lines) runs in ``bash -o pipefail``, standard output and error together, and the
  lines up to the next ``$ `` line are what it must print. It must exit 0; a page shows a failing
  command with ``|| echo "exit status $?"``. A command ending in ``&`` runs in the background until
  the page ends; its shown lines are compared with the first lines it printed.
- A ``python`` block runs in one Python process per page, block after block; the fenced block right
  after it (no prose between, no language or ``text``) is what it must print.
- Every page starts in a fresh folder holding what ``make demo`` leaves (``runs/iris-rf``) and a
  copy of ``examples/``, with ``COLUMNS=80``.
- Comparison is line by line, after trailing spaces are removed; a run of spaces counts as one
  space and a run of table rule characters (``─━═``) as one, since column widths follow the values.
  Placeholders stand for what legitimately varies: ``<time>`` (a duration, with its unit),
  ``<rate>`` (a count per second), ``<ratio>`` (a speed-up such as ``2.1×``), ``<memory>`` (a
  size), ``<path>`` (a file path), ``<date>`` (a date or time stamp), ``<version>`` (a library or
  Python version), ``<hash>`` (a content hash, which follows the versions recorded in the file),
  ``<machine>`` (the description of the machine: cores, processor) and ``<choice>`` (what a
  measurement chose, such as tune's winning settings). The port 8000 in a command is replaced by a
  free port, and back in what it prints.

Run ``python tests/docs_support.py PAGE.md`` to see every difference, ``--update`` to write what
the commands print into the page (then put the placeholders back by hand).
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "examples" / "README.md"]
DOC_PORT = "8000"
COMMAND_TIMEOUT = 300

_NUMBER = r"[0-9][0-9.,]*(?:[eE][-+]?[0-9]+)?"
PLACEHOLDERS = {
    "<time>": rf"{_NUMBER}(?: ?(?:ns|µs|us|ms|s|sec|min|h))?",
    "<rate>": rf"{_NUMBER}(?: ?[kKMG])?",
    "<ratio>": rf"{_NUMBER}[×x]?",
    "<memory>": rf"{_NUMBER}(?: ?(?:B|bytes|KiB|MiB|GiB|kB|KB|MB|GB))?",
    "<path>": r"\S+",
    "<date>": r"[0-9]{4}-[0-9]{2}-[0-9]{2}(?:[T ][0-9:.]+(?:Z|[+-][0-9]{2}:?[0-9]{2})?)?",
    "<version>": r"[0-9]+(?:\.[0-9A-Za-z+-]+)*",
    "<hash>": r"[0-9a-f]{8,}",
    "<machine>": r".+",
    "<choice>": r".+?",
}
_PLACEHOLDER_RE = re.compile("|".join(re.escape(p) for p in PLACEHOLDERS))
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_RULE = re.compile(r"[─━═]+")
_SPACES = re.compile(r" +")
_FENCE = re.compile(r"^(\s*)(```+)\s*([\w+-]*)\s*$")
_SHELL_LANGS = {"", "console", "shell", "bash", "sh", "text"}
_OUTPUT_LANGS = {"", "text", "output"}
RESULT_MARK = "\x1edocs-result\x1e"


@dataclass
class Block:
    """One fenced block of a page."""

    line: int  # 1-based line of the opening fence
    lang: str
    lines: list[str]
    prose_before: bool  # non-blank text between the previous block and this one


@dataclass
class Step:
    """One thing to run: a shell command or a Python block, with what it must print."""

    kind: str  # "shell" or "python"
    line: int
    code: str
    expected: list[str]  # a Python block shown without output must print nothing
    block: Block | None = None  # the block holding `expected` (for --update)
    span: tuple[int, int] = (0, 0)  # lines of `expected` inside that block


@dataclass
class Outcome:
    step: Step
    actual: list[str]
    problem: str = ""  # empty when the step printed what the page shows


def read_blocks(text: str) -> list[Block]:
    """The fenced blocks of a Markdown text, in order."""
    blocks: list[Block] = []
    lines = text.splitlines()
    i, prose = 0, False
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if not match:
            prose = prose or bool(lines[i].strip())
            i += 1
            continue
        indent, fence, lang = match.group(1), match.group(2), match.group(3).lower()
        body: list[str] = []
        j = i + 1
        while j < len(lines) and lines[j].strip() != fence:
            body.append(lines[j][len(indent) :] if lines[j].startswith(indent) else lines[j])
            j += 1
        blocks.append(Block(line=i + 1, lang=lang, lines=body, prose_before=prose))
        prose = False
        i = j + 1
    return blocks


def _is_session(block: Block) -> bool:
    first = next((ln for ln in block.lines if ln.strip()), "")
    return block.lang in _SHELL_LANGS and first.startswith("$ ")


def read_steps(text: str) -> list[Step]:
    """The steps of a page, in order; raises ValueError for a command the tests could not run."""
    blocks = read_blocks(text)
    steps: list[Step] = []
    for index, block in enumerate(blocks):
        if block.lang in {"python", "py"}:
            after = blocks[index + 1] if index + 1 < len(blocks) else None
            shown = (
                after
                if after is not None
                and not after.prose_before
                and after.lang in _OUTPUT_LANGS
                and not _is_session(after)
                else None
            )
            steps.append(
                Step(
                    "python",
                    block.line,
                    "\n".join(block.lines),
                    list(shown.lines) if shown else [],
                    shown,
                    (0, len(shown.lines)) if shown else (0, 0),
                )
            )
            continue
        if _is_session(block):
            steps.extend(_session_steps(block))
            continue
        if block.lang in _SHELL_LANGS and any(
            re.match(r"\s*onnxbridge\s", ln) for ln in block.lines
        ):
            raise ValueError(
                f"line {block.line}: a command shown without `$ ` is not run by the tests; "
                "write it as `$ onnxbridge …` with what it prints"
            )
    return steps


def _session_steps(block: Block) -> list[Step]:
    steps: list[Step] = []
    i = 0
    lines = block.lines
    while i < len(lines):
        if not lines[i].startswith("$ "):
            i += 1
            continue
        start = i
        command = [lines[i][2:]]
        while command[-1].endswith("\\") and i + 1 < len(lines):
            i += 1
            command.append(lines[i])
        i += 1
        out_start = i
        while i < len(lines) and not lines[i].startswith("$ "):
            i += 1
        steps.append(
            Step(
                "shell",
                block.line + 1 + start,
                "\n".join(command),
                lines[out_start:i],
                block,
                (out_start, i),
            )
        )
    return steps


def normalise(line: str) -> str:
    """A line as compared: no colour codes, no trailing spaces, one space, one rule character."""
    line = _ANSI.sub("", line).rstrip()
    line = _RULE.sub(lambda m: m.group(0)[0], line)
    return _SPACES.sub(" ", line)


def _line_pattern(expected: str) -> re.Pattern[str]:
    parts, last = [], 0
    for match in _PLACEHOLDER_RE.finditer(expected):
        parts.append(re.escape(expected[last : match.start()]))
        parts.append(f"(?:{PLACEHOLDERS[match.group(0)]})")
        last = match.end()
    parts.append(re.escape(expected[last:]))
    return re.compile("".join(parts))


def _trim(lines: list[str]) -> list[str]:
    lines = [normalise(ln) for ln in lines]
    while lines and not lines[-1]:
        lines.pop()
    while lines and not lines[0]:
        lines.pop(0)
    return lines


def matches(expected: list[str], actual: list[str]) -> bool:
    """Whether the printed lines are the shown ones, placeholders standing for what varies."""
    want, got = _trim(expected), _trim(actual)
    return len(want) == len(got) and all(
        _line_pattern(w).fullmatch(g) for w, g in zip(want, got, strict=True)
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_for_port(port: int, deadline: float) -> bool:
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            sock.settimeout(0.5)
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return True
        time.sleep(0.2)
    return False


_WORKER = r"""
import contextlib, io, json, sys, traceback
mark = sys.argv[1]
namespace = {"__name__": "__main__"}
for request in sys.stdin:
    code = json.loads(request)
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        try:
            exec(compile(code, "<doc block>", "exec"), namespace)
        except BaseException:
            traceback.print_exc(file=buffer)
    sys.__stdout__.write(mark + json.dumps(buffer.getvalue()) + "\n")
    sys.__stdout__.flush()
"""


@dataclass
class PageRun:
    """Runs the steps of one page in one folder."""

    folder: Path
    env: dict[str, str]
    port: str = field(default_factory=lambda: str(_free_port()))
    background: list[tuple[subprocess.Popen, Path]] = field(default_factory=list)
    logs: list = field(default_factory=list)
    python: subprocess.Popen | None = None

    def _command(self, code: str) -> str:
        return re.sub(rf"(?<![0-9]){DOC_PORT}(?![0-9])", self.port, code)

    def _back(self, text: str) -> list[str]:
        text = re.sub(rf"(?<![0-9]){self.port}(?![0-9])", DOC_PORT, text)
        return text.splitlines()

    def shell(self, step: Step) -> Outcome:
        code = self._command(step.code)
        if code.rstrip().endswith("&"):
            # Beside the page's folder, so that the page's own commands do not see it.
            log = self.folder.parent / f"{self.folder.name}-background-{len(self.background)}.log"
            handle = log.open("wb")
            self.logs.append(handle)
            proc = subprocess.Popen(
                ["bash", "-o", "pipefail", "-c", code.rstrip()[:-1]],
                cwd=self.folder,
                env=self.env,
                stdout=handle,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
            self.background.append((proc, log))
            if re.search(rf"(?<![0-9]){self.port}(?![0-9])", code) and not _wait_for_port(
                int(self.port), time.monotonic() + 60
            ):
                return Outcome(step, self._back(log.read_text()), "never opened its port")
            return Outcome(step, [])
        proc = subprocess.Popen(
            ["bash", "-o", "pipefail", "-c", code],
            cwd=self.folder,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            printed, _ = proc.communicate(timeout=COMMAND_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            printed, _ = proc.communicate()
            actual = self._back(printed.decode("utf-8", "replace"))
            return Outcome(step, actual, f"did not end within {COMMAND_TIMEOUT} s")
        actual = self._back(printed.decode("utf-8", "replace"))
        if proc.returncode != 0:
            return Outcome(step, actual, f"exited {proc.returncode}")
        return Outcome(step, actual)

    def run_python(self, step: Step) -> Outcome:
        if self.python is None:
            self.python = subprocess.Popen(
                [sys.executable, "-c", _WORKER, RESULT_MARK],
                cwd=self.folder,
                env=self.env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
                start_new_session=True,
            )
        assert self.python.stdin is not None and self.python.stdout is not None
        self.python.stdin.write(json.dumps(self._command(step.code)) + "\n")
        self.python.stdin.flush()
        for raw in self.python.stdout:
            if raw.startswith(RESULT_MARK):
                printed = json.loads(raw[len(RESULT_MARK) :])
                actual = self._back(printed)
                if "Traceback (most recent call last)" in printed:
                    return Outcome(step, actual, "raised an exception")
                return Outcome(step, actual)
        return Outcome(step, [], "the Python process ended")

    def close(self) -> list[list[str]]:
        """Stop what runs in the background; the lines each printed."""
        if self.python is not None:
            self.python.kill()
            self.python.wait()
            for stream in (self.python.stdin, self.python.stdout):
                if stream is not None:
                    stream.close()
        printed = []
        for proc, log in self.background:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
            printed.append(self._back(log.read_text(errors="replace")))
        for handle in self.logs:
            handle.close()
        return printed


def page_env() -> dict[str, str]:
    env = dict(os.environ)
    bin_dir = str(Path(sys.executable).parent)
    env.update(
        PATH=bin_dir + os.pathsep + env.get("PATH", ""),
        COLUMNS="80",
        LINES="50",
        TZ="UTC",
        NO_COLOR="1",
        TERM="dumb",
        MPLBACKEND="Agg",
        PYTHONHASHSEED="0",
    )
    for name in ("FORCE_COLOR", "PYTEST_CURRENT_TEST", "PYTEST_ADDOPTS"):
        env.pop(name, None)
    return env


def make_start(folder: Path) -> Path:
    """What `make demo` leaves in the repository root: runs/iris-rf, plus a copy of examples/."""
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [str(Path(sys.executable).parent / "onnxbridge"), "demo"],
        cwd=folder,
        env=page_env(),
        stdout=subprocess.DEVNULL,
        check=True,
    )
    shutil.copytree(ROOT / "examples", folder / "examples")
    return folder


def run_page(page: Path, start: Path, folder: Path) -> list[Outcome]:
    """Run every step of a page in `folder` (made from `start`); the outcome of each."""
    steps = read_steps(page.read_text())
    shutil.copytree(start, folder)
    run = PageRun(folder, page_env())
    outcomes: list[Outcome] = []
    background: list[Outcome] = []
    try:
        for step in steps:
            outcome = run.shell(step) if step.kind == "shell" else run.run_python(step)
            if step.kind == "shell" and step.code.rstrip().endswith("&"):
                background.append(outcome)
            outcomes.append(outcome)
    finally:
        printed = run.close()
    for outcome, lines in zip(background, printed, strict=False):
        outcome.actual = lines
        shown = outcome.step.expected
        if shown and not outcome.problem and not matches(shown, lines[: len(_trim(shown))]):
            outcome.problem = "printed other lines"
    for outcome in outcomes:
        shown = outcome.step.expected
        if outcome.problem or outcome in background:
            continue
        if not matches(shown, outcome.actual):
            outcome.problem = "printed other lines"
    return outcomes


def describe(page: Path, outcomes: list[Outcome]) -> str:
    """A readable account of every step that failed."""
    out = []
    for outcome in outcomes:
        if not outcome.problem:
            continue
        step = outcome.step
        head = step.code if step.kind == "shell" else "python block"
        out.append(f"{page.name}:{step.line}: {head.splitlines()[0]} — {outcome.problem}")
        diff = difflib.unified_diff(
            _trim(step.expected), _trim(outcome.actual), "page", "printed", lineterm="", n=1
        )
        out.extend("    " + ln for ln in diff)
        if not step.expected and outcome.actual:
            out.extend("    " + ln for ln in outcome.actual[-15:])
    return "\n".join(out)


def update_page(page: Path, outcomes: list[Outcome]) -> int:
    """Write what each mismatching step printed into the page; the number of steps rewritten."""
    lines = page.read_text().splitlines()
    edits = []
    for outcome in outcomes:
        step = outcome.step
        if outcome.problem != "printed other lines" or step.block is None:
            continue
        first = step.block.line + step.span[0]  # 0-based index of the first shown line
        edits.append((first, first + step.span[1] - step.span[0], outcome.actual))
    for first, end, actual in sorted(edits, reverse=True):
        body = [ln.rstrip() for ln in actual]
        while body and not body[-1]:
            body.pop()
        lines[first:end] = body
    page.write_text("\n".join(lines) + "\n")
    return len(edits)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pages", nargs="*", type=Path, help="pages to run (default: all)")
    parser.add_argument("--update", action="store_true", help="write what the commands print")
    parser.add_argument("--keep", action="store_true", help="keep the folders the pages ran in")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="onnxbridge-docs-"))
    start = make_start(work / "start")
    failed = 0
    for number, page in enumerate([p.resolve() for p in args.pages] or PAGES):
        outcomes = run_page(page, start, work / f"{number}-{page.stem}")
        report = describe(page, outcomes)
        failed += bool(report)
        print(report or f"{page.name}: {len(outcomes)} steps print what the page shows")
        if args.update and report:
            print(f"{page.name}: rewrote {update_page(page, outcomes)} outputs")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    else:
        print(f"folders kept in {work}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
