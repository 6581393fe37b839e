"""HTTP endpoints: translate requests to data-plane calls and answers back to HTTP, nothing else.

Every error answer is ``{"error": "..."}`` with the status :data:`STATUS` gives its class.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from onnxbridge.errors import (
    DataError,
    InferenceError,
    InferenceRequestError,
    MalformedRequestError,
    ModelLoadError,
    ModelNotFoundError,
    ModelNotReadyError,
    OnnxbridgeError,
    RepositoryError,
    RequestTooLargeError,
    first_line,
)
from onnxbridge.serve._codecs import encode_binary_tensor, encode_json_data, split_binary_body
from onnxbridge.serve._dataplane import DataPlane, InferenceResult
from onnxbridge.serve._metrics import CONTENT_TYPE, ServeMetrics

__all__ = ["STATUS", "Endpoints", "error_response", "status_of"]

# Most specific class first: the first match wins.
STATUS: list[tuple[type[OnnxbridgeError], int]] = [
    (RequestTooLargeError, 413),
    (MalformedRequestError, 400),
    (InferenceRequestError, 422),
    (ModelNotFoundError, 404),
    (ModelNotReadyError, 503),
    (ModelLoadError, 400),
    (RepositoryError, 400),
    (DataError, 422),  # SchemaMismatchError from the predict endpoint
    (InferenceError, 400),  # ORT refused feeds that passed every check: the values are wrong
]
JSON = "application/json"
BINARY = "application/octet-stream"
BINARY_B = BINARY.encode()
HEADER_LENGTH = "inference-header-content-length"
_NUMPY = orjson.OPT_SERIALIZE_NUMPY
_DISCONNECTED = (
    "the connection closed before the whole body arrived (the client left, or took longer "
    "than the server's --body-timeout); send the request again"
)
logger = logging.getLogger("onnxbridge.serve")


def status_of(exc: OnnxbridgeError) -> int:
    """The HTTP status of an onnxbridge error (500 for one that no entry maps)."""
    for cls, status in STATUS:
        if isinstance(exc, cls):
            return status
    return 500


def error_response(status: int, message: str) -> Response:
    """``{"error": message}`` with ``status``."""
    return Response(orjson.dumps({"error": message}), status_code=status, media_type=JSON)


def _json(payload: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(payload, option=_NUMPY), status_code=status, media_type=JSON)


class Endpoints:
    """The route handlers of one app.

    Args:
        dataplane: what answers.
        metrics: where requests are counted.
        max_request_bytes: the body size limit (413 above it).
    """

    def __init__(self, dataplane: DataPlane, metrics: ServeMetrics, max_request_bytes: int) -> None:
        self.dataplane = dataplane
        self.repository = dataplane.repository
        self.metrics = metrics
        self.limit = max_request_bytes
        self._server_metadata = orjson.dumps(dataplane.server_metadata)

    # Plumbing ----------------------------------------------------------------------------------
    async def _body(self, request: Request) -> bytes:
        encoding = request.headers.get("content-encoding", "identity").lower()
        if encoding != "identity":
            raise MalformedRequestError(
                f"Content-Encoding {encoding!r} is not supported; send the body uncompressed"
            )
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            raise RequestTooLargeError(
                f"the body is {declared} bytes, over this server's limit of {self.limit} bytes; "
                "send fewer rows per request or raise --max-request-bytes"
            )
        chunks: list[bytes] = []
        total = 0
        try:
            async for chunk in request.stream():
                total += len(chunk)
                if total > self.limit:
                    raise RequestTooLargeError(
                        f"the body is over this server's limit of {self.limit} bytes; send "
                        "fewer rows per request or raise --max-request-bytes"
                    )
                chunks.append(chunk)
        except ClientDisconnect as exc:  # or closed by the server's --body-timeout
            raise MalformedRequestError(_DISCONNECTED) from exc
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def _label(self, request: Request) -> str:
        name = request.path_params.get("name")
        return name if name is not None and self.repository.find_entry(name) else ""

    def _measure(
        self, endpoint: str, handler: Callable[[Request], Awaitable[Response]]
    ) -> Callable[[Request], Awaitable[Response]]:
        """Time ``handler``, turn onnxbridge errors into ``{"error"}`` answers, count both."""
        observe = self.metrics.observe

        async def measured(request: Request) -> Response:
            start = time.perf_counter()
            try:
                response = await handler(request)
            except OnnxbridgeError as exc:
                status = status_of(exc)
                response = error_response(status, _message(exc))
            observe(
                self._label(request),
                endpoint,
                time.perf_counter() - start,
                response.status_code,
                getattr(response, "rows", 0),
            )
            return response

        return measured

    def routes(self) -> list[tuple[str, str, str, Callable[[Request], Awaitable[Response]]]]:
        """``(method, path, endpoint label, handler)`` for every route, hot ones first."""
        plain = [
            ("POST", "/v2/models/{name}/infer", "infer", self.infer),
            ("POST", "/v2/models/{name}/versions/{version}/infer", "infer", self.infer),
            ("POST", "/v2/models/{name}/predict", "predict", self.predict),
            ("POST", "/v2/models/{name}/versions/{version}/predict", "predict", self.predict),
            ("GET", "/v2/health/live", "live", self.live),
            ("GET", "/v2/health/ready", "ready", self.ready),
            ("GET", "/v2", "server_metadata", self.server_metadata),
            ("GET", "/v2/models/{name}", "model_metadata", self.model_metadata),
            ("GET", "/v2/models/{name}/versions/{version}", "model_metadata", self.model_metadata),
            ("GET", "/v2/models/{name}/ready", "model_ready", self.model_ready),
            ("GET", "/v2/models/{name}/versions/{version}/ready", "model_ready", self.model_ready),
            ("POST", "/v2/repository/index", "repository_index", self.index),
            ("POST", "/v2/repository/models/{name}/load", "repository_load", self.load),
            ("POST", "/v2/repository/models/{name}/unload", "repository_unload", self.unload),
        ]
        return [(m, p, e, self._measure(e, h)) for m, p, e, h in plain]

    # Health and metadata -----------------------------------------------------------------------
    async def live(self, request: Request) -> Response:
        return Response(b'{"live":true}', media_type=JSON)

    async def ready(self, request: Request) -> Response:
        ready, problems = self.dataplane.ready()
        if ready:
            return Response(b'{"ready":true}', media_type=JSON)
        return _json(
            {"ready": False, "error": "the server is not ready: " + "; ".join(problems)}, 503
        )

    async def server_metadata(self, request: Request) -> Response:
        return Response(self._server_metadata, media_type=JSON)

    async def model_metadata(self, request: Request) -> Response:
        params = request.path_params
        model = self.repository.get_model(params["name"], params.get("version"))
        return Response(model.metadata_json, media_type=JSON)

    async def model_ready(self, request: Request) -> Response:
        params = request.path_params
        name = params["name"]
        try:
            self.repository.get_model(name, params.get("version"))
        except ModelNotReadyError as exc:
            return _json({"name": name, "ready": False, "error": str(exc)}, 503)
        return _json({"name": name, "ready": True})

    # Inference ---------------------------------------------------------------------------------
    async def infer(self, request: Request) -> Response:
        """``POST .../infer`` through Starlette (the app's fast path usually answers first)."""
        params = request.path_params
        model = self.repository.get_model(params["name"], params.get("version"))
        body = await self._body(request)
        content, header_length, rows = await self._infer(
            model, body, request.headers.get(HEADER_LENGTH)
        )
        response = _infer_response(content, header_length)
        response.rows = rows  # type: ignore[attr-defined]  # read by _measure
        return response

    async def _infer(
        self, model: Any, body: bytes, header_length: str | None
    ) -> tuple[bytes, int | None, int]:
        """Body in, (answer body, JSON header length if binary, rows) out."""
        header, binary = split_binary_body(body, header_length)
        try:
            parsed = orjson.loads(header)
        except orjson.JSONDecodeError as exc:
            raise MalformedRequestError(
                f"the body is not valid JSON ({exc}); send an inference request object "
                '{"inputs": [{"name", "datatype", "shape", "data"}]}'
            ) from exc
        result = await self.dataplane.infer(model, parsed, binary)
        content, length = _encode_infer(result)
        return content, length, result.rows

    async def infer_asgi(
        self, scope: dict[str, Any], receive: Any, send: Any, name: str, version: str | None
    ) -> None:
        """``POST /v2/models/{name}[/versions/{v}]/infer`` straight on ASGI.

        The hot path skips Starlette's request objects and middleware (about a third of the
        CPU time of a single-row request); it answers exactly as :meth:`infer` does.
        """
        start = time.perf_counter()
        rows = 0
        label = name if self.repository.find_entry(name) else ""
        try:
            model = self.repository.get_model(name, version)
            declared = header_length = None
            encoding = b"identity"
            for key, value in scope["headers"]:
                if key == b"content-length":
                    declared = value
                elif key == b"inference-header-content-length":
                    header_length = value.decode("latin-1")
                elif key == b"content-encoding":
                    encoding = value.lower()
            body = await self._receive_body(receive, declared, encoding)
            content, length, rows = await self._infer(model, body, header_length)
            status = 200
            headers = [(b"content-type", b"application/json" if length is None else BINARY_B)]
            if length is not None:
                headers.append((b"inference-header-content-length", str(length).encode()))
        except OnnxbridgeError as exc:
            status = status_of(exc)
            content = orjson.dumps({"error": str(exc)})
            headers = [(b"content-type", b"application/json")]
        except asyncio.CancelledError:
            # The graceful shutdown's deadline passed while this request ran: answer rather
            # than leave the client a dropped connection (the task ends here either way).
            status = 503
            content = orjson.dumps(
                {
                    "error": "the server shut down before this request finished (its "
                    "--shutdown-timeout passed); send it again"
                }
            )
            headers = [(b"content-type", b"application/json")]
        except Exception as exc:  # a bug of ours: answer, log, keep serving
            logger.exception("unexpected error in infer")
            status = 500
            content = orjson.dumps(
                {"error": f"internal error {type(exc).__name__}: {exc}; the server keeps serving"}
            )
            headers = [(b"content-type", b"application/json")]
        headers.append((b"content-length", str(len(content)).encode()))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": content})
        self.metrics.observe(label, "infer", time.perf_counter() - start, status, rows)

    async def _receive_body(self, receive: Any, declared: bytes | None, encoding: bytes) -> bytes:
        if encoding != b"identity":
            raise MalformedRequestError(
                f"Content-Encoding {encoding.decode('latin-1')!r} is not supported; send the "
                "body uncompressed"
            )
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            raise RequestTooLargeError(
                f"the body is {declared.decode()} bytes, over this server's limit of "
                f"{self.limit} bytes; send fewer rows per request or raise --max-request-bytes"
            )
        chunks: list[bytes] = []
        total = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise MalformedRequestError(_DISCONNECTED)
            chunk = message.get("body", b"")
            total += len(chunk)
            if total > self.limit:
                raise RequestTooLargeError(
                    f"the body is over this server's limit of {self.limit} bytes; send fewer "
                    "rows per request or raise --max-request-bytes"
                )
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    async def predict(self, request: Request) -> Response:
        params = request.path_params
        model = self.repository.get_model(params["name"], params.get("version"))
        body = await self._body(request)
        try:
            parsed = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise MalformedRequestError(
                f"the body is not valid JSON ({exc}); send records "
                '[{"column": value, ...}] or {"columns": [...], "data": [[...]]}'
            ) from exc
        query = request.query_params
        answer = await self.dataplane.predict(
            model,
            parsed,
            ignore_extra=_query_flag(query.get("ignore_extra")),
            allow_missing=_query_flag(query.get("allow_missing")),
        )
        response = _json(answer)
        response.rows = len(answer["predictions"])  # type: ignore[attr-defined]
        return response

    # Repository --------------------------------------------------------------------------------
    async def index(self, request: Request) -> Response:
        body = await self._body(request)
        ready_only = False
        if body.strip():
            try:
                parsed = orjson.loads(body)
            except orjson.JSONDecodeError as exc:
                raise MalformedRequestError(f"the body is not valid JSON ({exc})") from exc
            if isinstance(parsed, dict):
                ready_only = parsed.get("ready") is True
        rows = self.dataplane.index()
        if ready_only:
            rows = [r for r in rows if r["state"] == "READY"]
        return _json(rows)

    async def load(self, request: Request) -> Response:
        body = await self._body(request)
        if body.strip():
            try:
                parsed = orjson.loads(body)
            except orjson.JSONDecodeError as exc:
                raise MalformedRequestError(f"the body is not valid JSON ({exc})") from exc
            params = parsed.get("parameters") if isinstance(parsed, dict) else None
            if params is not None and not isinstance(params, dict):
                raise InferenceRequestError(
                    f"load 'parameters' must be a JSON object, got {params!r}; POST an empty "
                    "body to load the model from the repository folder"
                )
            if params:
                raise InferenceRequestError(
                    f"load parameters {sorted(params)!r} are not supported; put the model in "
                    "the repository folder and POST an empty body"
                )
        entry = await self.dataplane.load(request.path_params["name"])
        return _json({"name": entry.name, "state": entry.state, "versions": list(entry.versions)})

    async def unload(self, request: Request) -> Response:
        await self._body(request)  # parameters (unload_dependents) do not apply: no ensembles
        entry = self.dataplane.unload(request.path_params["name"])
        return _json({"name": entry.name, "state": entry.state})

    # Outside /v2 -------------------------------------------------------------------------------
    async def metrics_text(self, request: Request) -> Response:
        return Response(self.metrics.render(), media_type=CONTENT_TYPE)


# Python arguments the predict endpoint takes as query flags of the same name.
_QUERY_FLAGS = ("ignore_extra", "allow_missing")


def _message(exc: OnnxbridgeError) -> str:
    """The error's message, with a Python argument the client sets as a query flag written as
    that flag: ``pass ignore_extra=True`` → ``pass ?ignore_extra=true``."""
    text = str(exc)
    for name in exc.arguments:
        if name in _QUERY_FLAGS:
            text = re.sub(rf"(?<![\w.-]){name}=True\b", f"?{name}=true", text)
    return text


def _query_flag(value: str | None) -> bool:
    if value is None or value.lower() in ("", "0", "false", "no"):
        return False
    if value.lower() in ("1", "true", "yes"):
        return True
    raise InferenceRequestError(f"query flag value {value!r} is not allowed; use true or false")


def _encode_infer(result: InferenceResult) -> tuple[bytes, int | None]:
    """The v2 answer body, and the JSON header's length when outputs follow it as raw bytes."""
    model = result.model
    outputs: list[dict[str, Any]] = []
    blobs: list[bytes] = []
    for out in result.outputs:
        entry: dict[str, Any] = {
            "name": out.name,
            "datatype": out.datatype,
            "shape": list(out.array.shape),
        }
        if out.binary:
            blob = encode_binary_tensor(out.array, out.datatype)
            entry["parameters"] = {"binary_data_size": len(blob)}
            blobs.append(blob)
        else:
            entry["data"] = encode_json_data(out.array)
        outputs.append(entry)
    answer: dict[str, Any] = {"model_name": model.name, "model_version": model.version}
    if result.id is not None:
        answer["id"] = result.id
    answer["outputs"] = outputs
    try:
        header = orjson.dumps(answer, option=_NUMPY)
    except TypeError as exc:  # pragma: no cover - every datatype of the table encodes
        raise InferenceError(f"cannot encode the outputs: {first_line(exc)}") from exc
    if not blobs:
        return header, None
    return b"".join([header, *blobs]), len(header)


def _infer_response(content: bytes, header_length: int | None) -> Response:
    if header_length is None:
        return Response(content, media_type=JSON)
    return Response(
        content,
        media_type=BINARY,
        headers={"Inference-Header-Content-Length": str(header_length)},
    )
