"""``onnxbridge serve``: the real command in a subprocess, and its one-line errors."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from onnxbridge._cli.main import main
from wait_support import free_port, wait_for_ready


def test_serve_command_serves_until_interrupted(iris_bundle, tmp_path: Path) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONNXBRIDGE_SERVE_")}
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "onnxbridge._cli.main",
            "serve",
            str(iris_bundle.path),
            "--port",
            str(port),
            "--max-request-bytes",
            "2048",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_ready(process, url)
        body = {
            "inputs": [
                {"name": "input", "datatype": "FP32", "shape": [1, 4], "data": [6.7, 3.0, 5.2, 2.3]}
            ]
        }
        answer = httpx.post(f"{url}/v2/models/iris-rf/infer", json=body).json()
        assert answer["outputs"][0]["data"] == [2]
        too_big = httpx.post(f"{url}/v2/models/iris-rf/infer", content=b" " * 4096)
        assert too_big.status_code == 413
    finally:
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=30)
    assert f"serving iris-rf from {iris_bundle.path} on http://127.0.0.1:{port}/v2" in err
    assert process.returncode == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["serve", "/no/such/path"], "error: '/no/such/path' does not exist"),
        (
            ["serve", "{bundle}", "--port", "70000"],
            "error: --port 70000 is not allowed: it must be between 0 and 65535",
        ),
        (
            ["serve", "{bundle}", "--workers", "0"],
            "error: --workers 0 is not allowed: it must be between 1 and 64",
        ),
        (
            ["serve", "{bundle}", "--header-timeout", "0"],
            "error: --header-timeout 0.0 is not allowed: it must be > 0 and <= 3600",
        ),
        (
            ["serve", "{bundle}", "--body-timeout", "-1"],
            "error: --body-timeout -1.0 is not allowed: it must be > 0 and <= 3600",
        ),
        (
            ["serve", "{bundle}", "--max-connections", "0"],
            "error: --max-connections 0 is not allowed: it must be between 1 and 1000000",
        ),
        (
            ["serve", "{bundle}", "--shutdown-timeout", "0"],
            "error: --shutdown-timeout 0.0 is not allowed: it must be > 0 and <= 3600",
        ),
        (
            ["serve", "{bundle}", "--log-level", "loud"],
            "error: --log-level 'loud' is not allowed: it should be 'critical', 'error', "
            "'warning', 'info' or 'debug'",
        ),
        (["serve", "{broken}"], "is not a loadable ONNX model"),
        (["serve", "{bundle}", "--port", "{busy}"], "Address already in use"),
    ],
)
def test_serve_errors_are_one_line_exit_2(args, message, iris_bundle, tmp_path, capsys) -> None:
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"junk")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        values = {
            "bundle": str(iris_bundle.path),
            "broken": str(broken),
            "busy": str(busy.getsockname()[1]),
        }
        code = main([a.format(**values) for a in args])
    err = capsys.readouterr().err
    assert code == 2
    assert message in err and err.startswith("error: ") and err.count("\n") == 1, err
    assert "ONNXBRIDGE_SERVE_" not in err


def test_a_bad_environment_variable_is_named(iris_bundle, capsys, monkeypatch) -> None:
    monkeypatch.setenv("ONNXBRIDGE_SERVE_PORT", "99999")
    code = main(["serve", str(iris_bundle.path)])
    err = capsys.readouterr().err
    assert code == 2
    assert err == (
        "error: ONNXBRIDGE_SERVE_PORT='99999' (from the environment) is not allowed: it must "
        "be between 0 and 65535\n"
    )
    # A flag given on top is what counts, and what a message would name.
    code = main(["serve", str(iris_bundle.path), "--port", "70000"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: --port 70000 is not allowed") and "ONNX" not in err


def test_python_settings_errors_name_the_argument() -> None:
    from onnxbridge.errors import ServeSettingsError
    from onnxbridge.serve import load_settings

    with pytest.raises(ServeSettingsError, match=r"^port=70000 is not allowed: it must be") as info:
        load_settings(port=70000)
    assert info.value.arguments == ("port",)


def test_uvicorn_factory_with_the_guarded_protocol_keeps_the_deadlines(iris_bundle) -> None:
    """docs/serve.md: ``uvicorn --factory ... --http onnxbridge.serve._connections:...`` reads the
    deadlines from ONNXBRIDGE_SERVE_* like every worker of ``onnxbridge serve`` does."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONNXBRIDGE_SERVE_")}
    env["ONNXBRIDGE_SERVE_MODEL_PATH"] = str(iris_bundle.path)
    env["ONNXBRIDGE_SERVE_HEADER_TIMEOUT"] = "1"
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "uvicorn", "--factory", "onnxbridge.serve:create_app"),
            *("--http", "onnxbridge.serve._connections:GuardedH11Protocol"),
            *("--timeout-graceful-shutdown", "10", "--port", str(port)),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for_ready(process, f"http://127.0.0.1:{port}")
        with socket.create_connection(("127.0.0.1", port)) as client:
            client.settimeout(30)
            client.sendall(b"GET /v2/health/live HTTP/1.1\r\nHo")
            answer = b""
            while chunk := client.recv(4096):
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 408")
        assert b"the request headers did not arrive within 1 s" in answer
    finally:
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=30)
