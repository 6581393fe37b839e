"""`onnxbridge --version` and `--help` answer without loading the heavy libraries; each command
still loads (and shows its help) when asked for."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import onnxbridge
from cli_support import COMMANDS, HEAVY


def fresh_env() -> dict[str, str]:
    """The environment of a fresh interpreter that imports the onnxbridge under test."""
    src = str(Path(onnxbridge.__file__).parents[1])
    path = os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path, "COLUMNS": "100"}


def run_cli(*args: str) -> tuple[int, str, list[str]]:
    """Run the CLI's ``main`` in a fresh interpreter: exit code, standard output, and the HEAVY
    modules loaded by then."""
    probe = (
        "import sys\n"
        "from onnxbridge._cli.main import main\n"
        f"code = main({list(args)!r})\n"
        f"heavy = {HEAVY!r}\n"
        "names = set(sys.modules)\n"
        "loaded = sorted({h for h in heavy for m in names if m == h or m.startswith(h + '.')})\n"
        "print('LOADED', loaded)\n"
        "sys.exit(code)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=fresh_env()
    )
    out, _, last = proc.stdout.rpartition("LOADED ")
    return proc.returncode, out, eval(last)  # a list literal printed by the probe


@pytest.mark.parametrize("flag", ["--version", "--help"])
def test_version_and_help_load_no_heavy_library(flag: str) -> None:
    code, out, loaded = run_cli(flag)
    assert code == 0
    assert out.strip()
    assert loaded == []


def test_help_lists_every_command_in_workflow_order() -> None:
    code, out, _ = run_cli("--help")
    assert code == 0
    section = out.split("Commands:\n")[1].split("\n\n")[0]
    assert [line.split()[0] for line in section.splitlines()] == list(COMMANDS)


@pytest.mark.parametrize("command", ["validate", "score", "bench", "tune", "serve", "coverage"])
def test_a_command_from_another_module_shows_its_help(command: str) -> None:
    code, out, _ = run_cli(command, "--help")
    assert code == 0
    assert f"Usage: onnxbridge {command} [OPTIONS]" in out
    assert "--help" in out


def test_a_mistyped_command_is_suggested_without_loading_it() -> None:
    probe = (
        "import sys\n"
        "from onnxbridge._cli.main import main\n"
        "code = main(['valdate'])\n"
        "print('cli.validate' in ' '.join(sys.modules))\n"
        "sys.exit(code)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=fresh_env()
    )
    assert proc.returncode == 2
    assert "No such command 'valdate'. Did you mean 'validate'?" in proc.stderr
    assert proc.stdout.strip() == "False"
