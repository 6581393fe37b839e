"""An Open Inference Protocol (KServe v2) REST server for ONNX models (``onnxbridge serve``).

Layers inside (internal modules, each with a leading underscore): ``codecs`` (tensors <->
JSON / binary), ``repository`` (what is served), ``dataplane`` (answers, no HTTP),
``endpoints`` + ``app`` (HTTP), ``connections`` (the HTTP protocol: header / body deadlines,
connection cap, shutdown), ``metrics``, ``settings``.
Needs the ``serve`` extra (starlette, uvicorn, orjson, prometheus-client, pydantic-settings).
"""

from typing import Any

from onnxbridge.serve import _connections
from onnxbridge.serve._app import create_app
from onnxbridge.serve._connections import GuardedH11Protocol
from onnxbridge.serve._dataplane import DataPlane
from onnxbridge.serve._model import MERGEABLE_OPS
from onnxbridge.serve._repository import ModelRepository
from onnxbridge.serve._settings import ServeSettings, load_settings

__all__ = [
    "MERGEABLE_OPS",
    "DataPlane",
    "GuardedH11Protocol",
    "ModelRepository",
    "ServeSettings",
    "create_app",
    "load_settings",
]


def __getattr__(name: str) -> Any:
    # The guarded protocol over httptools exists only where httptools is installed (uvicorn's
    # ``--http onnxbridge.serve:GuardedHttpToolsProtocol`` finds it here).
    if name == "GuardedHttpToolsProtocol" and hasattr(_connections, name):
        return getattr(_connections, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
