"""An Open Inference Protocol (KServe v2) REST server for ONNX models (``onnxbridge serve``).

Layers inside: ``codecs`` (tensors <-> JSON / binary), ``repository`` (what is served),
``dataplane`` (answers, no HTTP), ``endpoints`` + ``app`` (HTTP), ``connections`` (the HTTP
protocol: header / body deadlines, connection cap, shutdown), ``metrics``, ``settings``.
Needs the ``serve`` extra (starlette, uvicorn, orjson, prometheus-client, pydantic-settings).
"""

from onnxbridge.serve.app import create_app
from onnxbridge.serve.dataplane import DataPlane
from onnxbridge.serve.repository import ModelRepository
from onnxbridge.serve.settings import ServeSettings, load_settings

__all__ = ["DataPlane", "ModelRepository", "ServeSettings", "create_app", "load_settings"]
