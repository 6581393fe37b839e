"""Server settings: every field can come from an ``ONNXBRIDGE_SERVE_<FIELD>`` environment variable.

``onnxbridge serve`` sets them from its flags; ``uvicorn --factory onnxbridge.serve:create_app``
reads them from the environment alone (that is how every worker process of ``--workers N`` gets
the same settings).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from onnxbridge.errors import ServeSettingsError

__all__ = ["ENV_PREFIX", "ServeSettings", "load_settings"]

ENV_PREFIX = "ONNXBRIDGE_SERVE_"
# pydantic's error types for a number out of a field's bounds.
_BOUND_ERRORS = frozenset({"greater_than", "greater_than_equal", "less_than", "less_than_equal"})


class ServeSettings(BaseSettings):
    """How ``onnxbridge serve`` runs."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid")

    model_path: Path | None = None
    """What to serve: one .onnx file, one bundle folder (card.json + model.onnx) or a model
    repository folder (one sub-folder per model, optional numbered version folders)."""

    host: str = "127.0.0.1"
    """Interface to bind. The loopback interface by default: pass 0.0.0.0 to be reachable from
    other machines, behind your own TLS and authentication."""

    port: int = Field(default=8000, ge=0, le=65535)
    """TCP port to listen on (0: any free port)."""

    workers: int = Field(default=1, ge=1, le=64)
    """Server processes. Each loads every model and keeps its own metrics and repository state;
    see docs/serve.md for how many to run on how many cores."""

    max_request_bytes: int = Field(default=16 * 1024 * 1024, ge=1024)
    """Largest request body accepted; a larger one is answered 413 without being read."""

    inference_threads: int | None = Field(default=None, ge=1, le=256)
    """Threads that run ONNX Runtime sessions off the event loop (default: the cores this
    process may use)."""

    intra_op_threads: int | None = Field(default=None, ge=1, le=256)
    """ONNX Runtime intra-op threads per session; unset: the model's tuned settings when it
    has some, else 1 (concurrent requests run in parallel on the inference threads)."""

    allow_spinning: bool | None = None
    """Let idle ONNX Runtime threads spin; unset: what ``Predictor`` chooses (off)."""

    merge_requests: bool = True
    """Merge concurrent small requests to the same model into one ONNX Runtime call (dynamic
    batching) where that gives bit-identical answers: tree models with one intra-op thread
    (docs/serve.md). Off: one session call per request."""

    strict_v2: bool = False
    """Answer ``null`` in the JSON data of a v2 infer request with 422, as the protocol has no
    missing value. Off (the default): ``null`` in FP16 / FP32 / FP64 data is a missing value
    (NaN), taken where the model's source predicts with a missing value in that column and
    refused (422, naming the input and column) where it does not."""

    strict_readiness: bool = True
    """``/v2/health/ready`` is true only when every model of the repository is ready; off:
    when at least one is."""

    log_level: Literal["critical", "error", "warning", "info", "debug"] = "warning"
    """uvicorn's log level."""

    access_log: bool = False
    """Log every request (costs throughput)."""

    timeout_keep_alive: int = Field(default=5, ge=1)
    """Seconds an idle keep-alive connection stays open."""

    header_timeout: float = Field(default=10.0, gt=0, le=3600)
    """Seconds a request's head (request line and headers) may take to arrive, from the
    connection's opening or the request's first byte; a slower client gets 408 and is closed."""

    body_timeout: float = Field(default=60.0, gt=0, le=3600)
    """Seconds a request's body may take to arrive once its head has; a slower client gets 408
    and is closed."""

    max_connections: int = Field(default=1000, ge=1, le=1_000_000)
    """Open connections per server process; a connection beyond them gets 503 and is closed
    at once (so stalled clients cannot use up the process's file descriptors)."""

    shutdown_timeout: float = Field(default=10.0, gt=0, le=3600)
    """On SIGTERM / SIGINT: seconds requests already received may still run before they are
    cancelled and the process exits; clients still sending a request are closed at once."""


def load_settings(**overrides: object) -> ServeSettings:
    """Settings from the environment, with ``overrides`` on top (None values are ignored).

    Raises:
        ServeSettingsError: a value that does not validate. The message names where it came
            from: ``port=80000`` for an override (``arguments`` lists it), the variable
            ``ONNXBRIDGE_SERVE_PORT=80000`` for the environment; and what is allowed.
    """
    values: dict[str, Any] = {k: v for k, v in overrides.items() if v is not None}
    try:
        return ServeSettings(**values)
    except ValidationError as exc:
        problems, arguments = [], []
        for error in exc.errors():
            field = ".".join(map(str, error["loc"]))
            if field in values:
                arguments.append(field)
                source = f"{field}={values[field]!r}"
            else:
                source = (
                    f"{ENV_PREFIX}{field.upper()}={error.get('input')!r} (from the environment)"
                )
            problems.append(f"{source} is not allowed: {_allowed(field, error)}")
        raise ServeSettingsError("; ".join(problems), arguments=tuple(arguments)) from exc


def _allowed(field: str, error: Any) -> str:
    """What a field takes, in words: ``it must be between 1 and 65535``."""
    info = ServeSettings.model_fields.get(field)
    if error["type"] in _BOUND_ERRORS and info is not None:
        bounds = {}
        for item in info.metadata:
            for name in ("ge", "gt", "le", "lt"):
                if getattr(item, name, None) is not None:
                    bounds[name] = getattr(item, name)
        if "ge" in bounds and "le" in bounds:
            return f"it must be between {bounds['ge']} and {bounds['le']}"
        words = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<"}
        if bounds:
            return "it must be " + " and ".join(f"{words[k]} {v}" for k, v in bounds.items())
    message = str(error["msg"]).replace("Input should", "it should", 1)
    return message[0].lower() + message[1:]
