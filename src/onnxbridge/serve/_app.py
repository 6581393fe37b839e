"""The ASGI app: routes and error handlers only (the endpoints live in ``endpoints``).

A lean Starlette app, no per-request validation models: the data plane checks requests itself,
which keeps a single-row request in tens of microseconds (docs/benchmarks.md, ``## serve``).
Run it with ``onnxbridge serve PATH`` or ``uvicorn --factory onnxbridge.serve:create_app``
with ``ONNXBRIDGE_SERVE_MODEL_PATH`` set (and ``--http`` naming a protocol of ``connections``
for the header / body deadlines and the connection cap).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from onnxbridge.errors import OnnxbridgeError, ServeSettingsError
from onnxbridge.serve._dataplane import DataPlane
from onnxbridge.serve._endpoints import Endpoints, error_response, status_of
from onnxbridge.serve._metrics import ServeMetrics
from onnxbridge.serve._openapi import DOCS_PAGE, openapi_document
from onnxbridge.serve._repository import ModelRepository
from onnxbridge.serve._settings import ServeSettings, load_settings

__all__ = ["ServeApp", "create_app", "session_options"]


def session_options(settings: ServeSettings) -> dict[str, Any]:
    """The ``Predictor`` keyword arguments the settings ask for (none: Predictor decides)."""
    options: dict[str, Any] = {}
    if settings.intra_op_threads is not None:
        options["intra_op_num_threads"] = settings.intra_op_threads
    if settings.allow_spinning is not None:
        options["allow_spinning"] = settings.allow_spinning
    return options


def create_app(
    settings: ServeSettings | None = None, repository: ModelRepository | None = None
) -> ServeApp:
    """The server app; models load at startup (in a thread), before the first request.

    Args:
        settings: server settings (default: from ``ONNXBRIDGE_SERVE_*`` variables).
        repository: the models (default: ``settings.model_path``).

    Raises:
        ServeSettingsError: no model path.
        RepositoryError: a path that is not a usable layout.
    """
    settings = settings or load_settings()
    if repository is None:
        if settings.model_path is None:
            raise ServeSettingsError(
                "no model to serve; pass PATH (onnxbridge serve PATH) or set "
                "ONNXBRIDGE_SERVE_MODEL_PATH"
            )
        repository = ModelRepository(settings.model_path, session_options=session_options(settings))
    dataplane = DataPlane(repository, settings)
    metrics = ServeMetrics()
    endpoints = Endpoints(dataplane, metrics, settings.max_request_bytes)
    openapi = orjson.dumps(openapi_document(dataplane.server_metadata["version"]))

    async def openapi_json(request: Request) -> Response:
        return Response(openapi, media_type="application/json")

    async def docs(request: Request) -> Response:
        return HTMLResponse(DOCS_PAGE)

    async def home(request: Request) -> Response:
        return RedirectResponse("/docs")

    routes = [
        Route(path, handler, methods=[method]) for method, path, _, handler in endpoints.routes()
    ]
    routes += [
        Route("/metrics", endpoints.metrics_text, methods=["GET"]),
        Route("/openapi.json", openapi_json, methods=["GET"]),
        Route("/docs", docs, methods=["GET"]),
        Route("/", home, methods=["GET"]),
    ]

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(dataplane.executor, repository.load_all)
        yield
        dataplane.close()

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)  # registered for HTTPException only
        if exc.status_code == 404:
            message = (
                f"no route {request.url.path!r}; the server speaks the Open Inference Protocol "
                "v2 (GET /v2, /v2/models/{name}, POST /v2/models/{name}/infer; see /docs)"
            )
        elif exc.status_code == 405:
            message = (
                f"{request.method} is not allowed on {request.url.path!r}; allowed: "
                f"{exc.headers.get('Allow', '') if exc.headers else ''}"
            )
        else:
            message = str(exc.detail)
        return error_response(exc.status_code, message)

    async def onnxbridge_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, OnnxbridgeError)
        return error_response(status_of(exc), str(exc))

    async def unexpected(request: Request, exc: Exception) -> Response:
        return error_response(
            500, f"internal error {type(exc).__name__}: {exc}; the server keeps serving"
        )

    app = ServeApp(
        routes=routes,
        lifespan=lifespan,
        exception_handlers={
            HTTPException: http_error,
            OnnxbridgeError: onnxbridge_error,
            Exception: unexpected,
        },
    )
    app.state.dataplane = dataplane
    app.state.metrics = metrics
    app.state.settings = settings
    app.infer_endpoint = endpoints.infer_asgi
    return app


class ServeApp(Starlette):
    """Starlette, with ``POST /v2/models/{name}[/versions/{v}]/infer`` answered before routing.

    Everything else (and a GET on an infer path, which gets 405) goes through Starlette.
    """

    infer_endpoint: Any = None
    fast_infer = True  # off: infer goes through Starlette's route like the rest (tests compare)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if self.fast_infer and scope["type"] == "http" and scope["method"] == "POST":
            path: str = scope["path"]
            if path.startswith("/v2/models/") and path.endswith("/infer"):
                parts = path[11:-6].split("/")
                if len(parts) == 1 and parts[0]:
                    await self.infer_endpoint(scope, receive, send, parts[0], None)
                    return
                if len(parts) == 3 and parts[1] == "versions" and parts[0] and parts[2]:
                    await self.infer_endpoint(scope, receive, send, parts[0], parts[2])
                    return
        await super().__call__(scope, receive, send)
