"""``onnxbridge serve PATH``: run the Open Inference Protocol server (see docs/serve.md)."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path
from typing import Annotated

import typer

from onnxbridge.errors import ServeSettingsError

__all__ = ["serve"]


def serve(
    path: Annotated[
        Path,
        typer.Argument(
            metavar="PATH",
            help="A .onnx file, a bundle folder, or a model repository folder (one sub-folder "
            "per model, optional numbered version folders).",
        ),
    ],
    host: Annotated[
        str | None,
        typer.Option(help="Interface to bind [default: 127.0.0.1; 0.0.0.0 for all]."),
    ] = None,
    port: Annotated[int | None, typer.Option(help="TCP port [default: 8000].")] = None,
    workers: Annotated[
        int | None,
        typer.Option(help="Server processes [default: 1]; see docs/serve.md for cores."),
    ] = None,
    max_request_bytes: Annotated[
        int | None,
        typer.Option(help="Largest request body; larger ones get 413 [default: 16 MiB]."),
    ] = None,
    inference_threads: Annotated[
        int | None,
        typer.Option(help="Threads running ONNX Runtime per process [default: the cores]."),
    ] = None,
    intra_op_threads: Annotated[
        int | None,
        typer.Option(
            help="ONNX Runtime intra-op threads per session [default: the model's tuned "
            "settings, else 1]."
        ),
    ] = None,
    merge_requests: Annotated[
        bool | None,
        typer.Option(
            "--merge-requests/--no-merge-requests",
            help="Merge concurrent small requests of tree models into one ONNX Runtime call "
            "(answers stay bit-identical) [default: on].",
        ),
    ] = None,
    strict_v2: Annotated[
        bool | None,
        typer.Option(
            "--strict-v2/--no-strict-v2",
            help="Refuse null in v2 JSON infer data as the protocol does; off: null in "
            "FP16/FP32/FP64 data is a missing value (NaN) where the model takes one "
            "[default: off].",
        ),
    ] = None,
    strict_readiness: Annotated[
        bool | None,
        typer.Option(
            "--strict-readiness/--no-strict-readiness",
            help="Ready only when every model loaded [default: strict].",
        ),
    ] = None,
    log_level: Annotated[
        str | None,
        typer.Option(help="critical, error, warning, info or debug [default: warning]."),
    ] = None,
    access_log: Annotated[
        bool | None, typer.Option("--access-log/--no-access-log", help="Log every request.")
    ] = None,
    header_timeout: Annotated[
        float | None,
        typer.Option(
            help="Seconds a request's headers may take to arrive; slower clients get 408 "
            "[default: 10]."
        ),
    ] = None,
    body_timeout: Annotated[
        float | None,
        typer.Option(
            help="Seconds a request's body may take to arrive after its headers; slower "
            "clients get 408 [default: 60]."
        ),
    ] = None,
    max_connections: Annotated[
        int | None,
        typer.Option(help="Open connections per process; more get 503 [default: 1000]."),
    ] = None,
    shutdown_timeout: Annotated[
        float | None,
        typer.Option(
            help="On SIGTERM, seconds requests already received may still run before the "
            "process exits [default: 10]."
        ),
    ] = None,
) -> None:
    """Serve ONNX models over the Open Inference Protocol (KServe v2) REST API."""
    import uvicorn

    from onnxbridge.serve._connections import uvicorn_options
    from onnxbridge.serve._repository import ModelRepository
    from onnxbridge.serve._settings import ENV_PREFIX, load_settings

    settings = load_settings(
        model_path=path.absolute(),  # not resolve(): messages keep a symlink's name
        host=host,
        port=port,
        workers=workers,
        max_request_bytes=max_request_bytes,
        inference_threads=inference_threads,
        intra_op_threads=intra_op_threads,
        merge_requests=merge_requests,
        strict_v2=strict_v2,
        strict_readiness=strict_readiness,
        log_level=log_level,
        access_log=access_log,
        header_timeout=header_timeout,
        body_timeout=body_timeout,
        max_connections=max_connections,
        shutdown_timeout=shutdown_timeout,
    )
    repository = ModelRepository(path)  # checks the layout before anything starts
    if repository.layout != "repository":
        # One model: refuse to start rather than serve nothing.
        from onnxbridge.runtime import Predictor

        Predictor(repository.path if repository.layout == "file" else path / "model.onnx")
    _check_port(settings.host, settings.port)
    # Every worker process builds its app from the environment: hand the settings over there.
    for name, value in settings.model_dump(exclude_none=True).items():
        os.environ[f"{ENV_PREFIX}{name.upper()}"] = str(value)
    names = ", ".join(repository.model_names()) or "none yet"
    shown = f"[{settings.host}]" if ":" in settings.host else settings.host
    print(
        f"serving {names} from {path} on http://{shown}:{settings.port}/v2 "
        f"({settings.workers} worker{'s' if settings.workers > 1 else ''}; docs at /docs)",
        file=sys.stderr,
    )
    uvicorn.run(
        "onnxbridge.serve._app:create_app",
        factory=True,
        host=settings.host,
        port=settings.port,
        workers=settings.workers,
        loop=_best("uvloop", "asyncio"),
        # The HTTP protocol (httptools when installed, else h11) with the header and body
        # deadlines and the connection cap; the graceful shutdown's deadline.
        **uvicorn_options(settings, in_process=False),
    )


def _best(module: str, fallback: str) -> str:
    import importlib.util

    return module if importlib.util.find_spec(module) is not None else fallback


def _check_port(host: str, port: int) -> None:
    """Fail with one line, before the models load, when the port is taken."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise ServeSettingsError(
                f"cannot listen on {host}:{port} ({exc.strerror}); pass another --port or stop "
                "the process using it"
            ) from exc
