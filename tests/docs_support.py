"""Run the commands and Python blocks of a Markdown page and compare what they print with the page.

The rules (they are also written for users in docs/index.md, "These pages are tested"):

- A fenced block (whatever its language, except ``python``) holding a line that starts with ``$ ``
  is a shell session, and nothing but blank lines may come before its first ``$ `` line: each
  ``$ `` line (with its ``\\``-continued lines) runs in ``bash -o pipefail``, standard output and
  error together, and the lines up to the next ``$ `` line are what it must print. It must exit 0;
  a page shows a failing command with ``|| echo "exit status $?"``. A command ending in ``&`` runs
  in the background until the page ends; it must not end with an error code (at once, or before
  the page ends), and its shown lines are compared with the first lines it printed.
- A ``python`` block runs in one Python process per page, block after block, within
  ``COMMAND_TIMEOUT`` seconds each; the fenced block right after it (no prose between, no language
  or ``text``) is what it must print: everything written to file descriptors 1 and 2 (print,
  warnings, tracebacks, child processes).
- Every page starts in a fresh folder holding what ``make demo`` leaves (``runs/iris-rf``) and a
  copy of ``examples/``, with ``COLUMNS=80``.
- Comparison is line by line, after trailing spaces and trailing blank lines are removed (leading
  blank lines count); a run of spaces counts as one space and a run of table rule characters
  (``─━═``) as one, since column widths follow the values. Placeholders stand for what
  legitimately varies: ``<time>`` (a duration, with its unit), ``<rate>`` (a count per second),
  ``<ratio>`` (a speed-up such as ``2.1×``), ``<memory>`` (a size), ``<path>`` (a file path),
  ``<date>`` (a date or time stamp), ``<version>`` (a library or Python version), ``<hash>`` (a
  content hash, which follows the versions recorded in the file), ``<machine>`` (the description
  of the machine: cores, processor) and ``<choice>`` (what a measurement chose, such as tune's
  winning settings). The port 8000 in a command is replaced by a free port, and back in what it
  prints.

Run ``python tests/docs_support.py PAGE.md`` to see every difference, ``--update`` to write what
the commands print into the page (then put the placeholders back by hand).
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from wait_support import free_port

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
_PYTHON_LANGS = {"python", "py"}
_OUTPUT_LANGS = {"", "text", "output"}


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
    # Whatever its language: a `$ ` line shown in a page is a command a reader will type.
    return block.lang not in _PYTHON_LANGS and any(ln.startswith("$ ") for ln in block.lines)


def read_steps(text: str) -> list[Step]:
    """The steps of a page, in order; raises ValueError for a command the tests could not run."""
    blocks = read_blocks(text)
    steps: list[Step] = []
    consumed: set[int] = set()  # blocks shown as a Python block's output
    for index, block in enumerate(blocks):
        if index in consumed:
            continue
        if block.lang in _PYTHON_LANGS:
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
            if shown is not None:
                consumed.add(index + 1)
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
    first = next(n for n, ln in enumerate(lines) if ln.startswith("$ "))
    if any(ln.strip() for ln in lines[:first]):
        raise ValueError(
            f"line {block.line}: text before the first command of a session is not checked by "
            "the tests; move it out of the block or show it as a command's output"
        )
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
    # Leading blank lines stay: a blank line printed before an error is part of the output.
    while lines and not lines[-1]:
        lines.pop()
    return lines


def matches(expected: list[str], actual: list[str]) -> bool:
    """Whether the printed lines are the shown ones, placeholders standing for what varies."""
    want, got = _trim(expected), _trim(actual)
    return len(want) == len(got) and all(
        _line_pattern(w).fullmatch(g) for w, g in zip(want, got, strict=True)
    )


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


# The worker reads requests from one pipe and answers on another, so that nothing a block prints
# can be mistaken for an answer. For each block, file descriptors 1 and 2 point at a file: what
# the block prints, through print(), a warning, or a child process, lands there, in order.
_WORKER = r"""
import json, os, sys, traceback
requests = os.fdopen(int(sys.argv[1]), "r")
answers = os.fdopen(int(sys.argv[2]), "w")
sys.stdout.reconfigure(line_buffering=True)
sys.stderr.reconfigure(line_buffering=True)
null = os.open(os.devnull, os.O_WRONLY)
namespace = {"__name__": "__main__"}
for request in requests:
    request = json.loads(request)
    failed = False
    with open(request["out"], "wb") as out:
        os.dup2(out.fileno(), 1)
        os.dup2(out.fileno(), 2)
    try:
        exec(compile(request["code"], "<doc block>", "exec"), namespace)
    except BaseException:
        failed = True
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(null, 1)
        os.dup2(null, 2)
    answers.write(json.dumps({"failed": failed}) + "\n")
    answers.flush()
"""


@dataclass
class _Worker:
    """The Python process of a page and the two ends of its pipes the harness holds."""

    proc: subprocess.Popen
    requests: int  # file descriptor the harness writes requests to
    answers: int  # file descriptor the harness reads answers from

    def close(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        os.close(self.requests)
        os.close(self.answers)


@dataclass
class _Background:
    """A command left running in the background, and where its output goes."""

    proc: subprocess.Popen
    log: Path
    outcome: Outcome


@dataclass
class PageRun:
    """Runs the steps of one page in one folder."""

    folder: Path
    env: dict[str, str]
    port: str = field(default_factory=lambda: str(free_port()))
    background: list[_Background] = field(default_factory=list)
    logs: list = field(default_factory=list)
    python: _Worker | None = None

    def _command(self, code: str) -> str:
        return re.sub(rf"(?<![0-9]){DOC_PORT}(?![0-9])", self.port, code)

    def _back(self, text: str) -> list[str]:
        text = re.sub(rf"(?<![0-9]){self.port}(?![0-9])", DOC_PORT, text)
        return text.splitlines()

    def shell(self, step: Step) -> Outcome:
        code = self._command(step.code)
        if code.rstrip().endswith("&"):
            return self._start_background(step, code)
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

    def _start_background(self, step: Step, code: str) -> Outcome:
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
        outcome = Outcome(step, [])
        self.background.append(_Background(proc, log, outcome))
        # A command that fails at once (a bad argument) must not pass unnoticed: wait until its
        # port opens, or a moment when it has none, and look at how it ended.
        has_port = re.search(rf"(?<![0-9]){self.port}(?![0-9])", code) is not None
        deadline = time.monotonic() + (60 if has_port else 1)
        opened = False
        while time.monotonic() < deadline and proc.poll() is None:
            if has_port and _port_open(int(self.port)):
                opened = True
                break
            time.sleep(0.1)
        if proc.poll() not in (None, 0):
            outcome.problem = f"exited {proc.returncode}"
        elif has_port and not opened:
            outcome.problem = "never opened its port"
        if outcome.problem:
            outcome.actual = self._back(log.read_text(errors="replace"))
        return outcome

    def run_python(self, step: Step) -> Outcome:
        if self.python is None:
            to_worker, requests = os.pipe()
            answers, from_worker = os.pipe()
            proc = subprocess.Popen(
                [sys.executable, "-c", _WORKER, str(to_worker), str(from_worker)],
                cwd=self.folder,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                pass_fds=(to_worker, from_worker),
                start_new_session=True,
            )
            os.close(to_worker)
            os.close(from_worker)
            self.python = _Worker(proc, requests, answers)
        worker = self.python
        out = self.folder.parent / f"{self.folder.name}-python-{step.line}.out"
        request = json.dumps({"code": self._command(step.code), "out": str(out)}) + "\n"
        os.write(worker.requests, request.encode())
        answer, problem = b"", ""
        deadline = time.monotonic() + COMMAND_TIMEOUT
        while not answer.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([worker.answers], [], [], left)[0]:
                problem = f"did not end within {COMMAND_TIMEOUT} s"
                break
            chunk = os.read(worker.answers, 4096)
            if not chunk:
                problem = "the Python process ended"
                break
            answer += chunk
        if problem:
            # The next block starts a new process; it will miss what this one defined.
            worker.close()
            self.python = None
        actual = self._back(out.read_text(errors="replace")) if out.exists() else []
        if not problem and json.loads(answer)["failed"]:
            problem = "raised an exception"
        return Outcome(step, actual, problem)

    def close(self) -> None:
        """Stop what runs in the background and record what each printed and how it ended."""
        if self.python is not None:
            self.python.close()
            self.python = None
        for job in self.background:
            # A short command shown with its output may still be on its way: give it time to
            # print the lines the page shows, or to end.
            deadline = time.monotonic() + 30
            while (
                job.proc.poll() is None
                and time.monotonic() < deadline
                and len(_trim(self._back(job.log.read_text(errors="replace"))))
                < len(_trim(job.outcome.step.expected))
            ):
                time.sleep(0.1)
            ended = job.proc.poll()
            if ended is None:
                os.killpg(job.proc.pid, signal.SIGTERM)
                try:
                    job.proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    os.killpg(job.proc.pid, signal.SIGKILL)
                    job.proc.wait()
            job.outcome.actual = self._back(job.log.read_text(errors="replace"))
            if ended not in (None, 0) and not job.outcome.problem:
                job.outcome.problem = f"exited {ended} before the page ended"
        for handle in self.logs:
            handle.close()


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
        # Lines reach the page in the order a terminal shows them (standard output is not held
        # back until exit while warnings on standard error pass it), whatever the caller's setting.
        PYTHONUNBUFFERED="1",
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
    try:
        for step in steps:
            outcomes.append(run.shell(step) if step.kind == "shell" else run.run_python(step))
    finally:
        run.close()
    background = {id(job.outcome) for job in run.background}
    for outcome in outcomes:
        shown = outcome.step.expected
        if outcome.problem:
            continue
        if id(outcome) in background:
            # A server goes on printing: compare the first lines it printed.
            if shown and not matches(shown, outcome.actual[: len(_trim(shown))]):
                outcome.problem = "printed other lines"
        elif not matches(shown, outcome.actual):
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
