"""The OpenAPI document of the server and a page that shows it with no network (no CDN assets)."""

from __future__ import annotations

from typing import Any

__all__ = ["DOCS_PAGE", "openapi_document"]

_ERROR = {
    "description": "What was wrong and what was expected.",
    "content": {
        "application/json": {
            "schema": {
                "type": "object",
                "required": ["error"],
                "properties": {"error": {"type": "string"}},
            }
        }
    },
}
_TENSOR = {
    "type": "object",
    "required": ["name", "datatype", "shape"],
    "properties": {
        "name": {"type": "string"},
        "datatype": {
            "type": "string",
            "enum": [
                "BOOL",
                "UINT8",
                "UINT16",
                "UINT32",
                "UINT64",
                "INT8",
                "INT16",
                "INT32",
                "INT64",
                "FP16",
                "FP32",
                "FP64",
                "BYTES",
            ],
        },
        "shape": {"type": "array", "items": {"type": "integer", "minimum": 0}},
        "parameters": {
            "type": "object",
            "properties": {"binary_data_size": {"type": "integer", "minimum": 0}},
        },
        "data": {"description": "flat (row-major) or nested to shape; strings for BYTES"},
    },
}
_INFER_REQUEST = {
    "type": "object",
    "required": ["inputs"],
    "properties": {
        "id": {"type": "string"},
        "parameters": {
            "type": "object",
            "properties": {"binary_data_output": {"type": "boolean"}},
        },
        "inputs": {"type": "array", "items": _TENSOR},
        "outputs": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["name"],
                "properties": {
                    "name": {"type": "string"},
                    "parameters": {
                        "type": "object",
                        "properties": {"binary_data": {"type": "boolean"}},
                    },
                },
            },
        },
    },
    "example": {
        "id": "42",
        "inputs": [
            {"name": "input", "datatype": "FP32", "shape": [1, 4], "data": [5.1, 3.5, 1.4, 0.2]}
        ],
    },
}
_INFER_RESPONSE = {
    "type": "object",
    "properties": {
        "model_name": {"type": "string"},
        "model_version": {"type": "string"},
        "id": {"type": "string"},
        "outputs": {"type": "array", "items": _TENSOR},
    },
}
_PREDICT_REQUEST = {
    "oneOf": [
        {"type": "array", "items": {"type": "object"}, "description": "records"},
        {
            "type": "object",
            "required": ["columns", "data"],
            "properties": {
                "columns": {"type": "array", "items": {"type": "string"}},
                "data": {"type": "array", "items": {"type": "array"}},
            },
        },
    ],
    "example": [
        {
            "sepal length (cm)": 5.1,
            "sepal width (cm)": 3.5,
            "petal length (cm)": 1.4,
            "petal width (cm)": 0.2,
        }
    ],
}


_HEADER_LENGTH = {
    "name": "Inference-Header-Content-Length",
    "in": "header",
    "required": False,
    "schema": {"type": "integer"},
}


def _json_body(schema: dict[str, Any]) -> dict[str, Any]:
    return {"required": True, "content": {"application/json": {"schema": schema}}}


def _ok(description: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"description": description}
    if schema is not None:
        out["content"] = {"application/json": {"schema": schema}}
    return out


def _name(with_version: bool) -> list[dict[str, Any]]:
    params = [{"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}]
    if with_version:
        params.append(
            {"name": "version", "in": "path", "required": True, "schema": {"type": "string"}}
        )
    return params


def openapi_document(version: str) -> dict[str, Any]:
    """The OpenAPI 3.1 document of every route."""
    paths: dict[str, Any] = {
        "/v2/health/live": {"get": {"summary": "Liveness", "responses": {"200": _ok("live")}}},
        "/v2/health/ready": {
            "get": {
                "summary": "Readiness: every model loaded (strict) or at least one",
                "responses": {"200": _ok("ready"), "503": _ERROR},
            }
        },
        "/v2": {
            "get": {
                "summary": "Server metadata and extensions",
                "responses": {"200": _ok("name, version, extensions")},
            }
        },
        "/v2/repository/index": {
            "post": {
                "summary": "Every model of the repository with its state",
                "responses": {"200": _ok("[{name, version, state, reason}]")},
            }
        },
        "/v2/repository/models/{name}/load": {
            "post": {
                "summary": "(Re)load a model from the repository folder",
                "parameters": _name(False),
                "responses": {"200": _ok("loaded"), "400": _ERROR, "404": _ERROR},
            }
        },
        "/v2/repository/models/{name}/unload": {
            "post": {
                "summary": "Stop serving a model",
                "parameters": _name(False),
                "responses": {"200": _ok("unloaded"), "404": _ERROR},
            }
        },
        "/metrics": {"get": {"summary": "Prometheus metrics", "responses": {"200": _ok("text")}}},
    }
    for with_version in (False, True):
        base = "/v2/models/{name}" + ("/versions/{version}" if with_version else "")
        params = _name(with_version)
        paths[base] = {
            "get": {
                "summary": "Model metadata: inputs and outputs (-1: any size)",
                "parameters": params,
                "responses": {"200": _ok("metadata"), "404": _ERROR},
            }
        }
        paths[base + "/ready"] = {
            "get": {
                "summary": "Model readiness",
                "parameters": params,
                "responses": {"200": _ok("ready"), "404": _ERROR, "503": _ERROR},
            }
        }
        paths[base + "/infer"] = {
            "post": {
                "summary": "Open Inference Protocol inference (JSON or binary tensor data)",
                "parameters": [
                    *params,
                    {
                        "name": "Inference-Header-Content-Length",
                        "in": "header",
                        "required": False,
                        "schema": {"type": "integer"},
                    },
                ],
                "requestBody": _json_body(_INFER_REQUEST),
                "responses": {
                    "200": _ok("outputs", _INFER_RESPONSE),
                    "400": _ERROR,
                    "404": _ERROR,
                    "413": _ERROR,
                    "422": _ERROR,
                    "503": _ERROR,
                },
            }
        }
        paths[base + "/predict"] = {
            "post": {
                "summary": "Records in, labels and probabilities by class name out",
                "parameters": params
                + [
                    {"name": q, "in": "query", "required": False, "schema": {"type": "boolean"}}
                    for q in ("ignore_extra", "allow_missing")
                ],
                "requestBody": _json_body(_PREDICT_REQUEST),
                "responses": {
                    "200": _ok("predictions"),
                    "400": _ERROR,
                    "404": _ERROR,
                    "413": _ERROR,
                    "422": _ERROR,
                },
            }
        }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "onnxbridge serve",
            "version": version,
            "description": "Open Inference Protocol (KServe v2) REST server for ONNX models; "
            "see docs/serve.md.",
        },
        "paths": dict(sorted(paths.items())),
    }


# One self-contained page: it reads /openapi.json and lists every route with a form to try it.
DOCS_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>onnxbridge serve: API</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:2em;max-width:70em}
details{border:1px solid #ccc;border-radius:4px;margin:.4em 0;padding:.4em .8em}
summary{cursor:pointer}.m{display:inline-block;width:4em;font-weight:bold}
.get{color:#0a6}.post{color:#06c}textarea{width:100%;height:8em;font-family:monospace}
pre{background:#f6f6f6;padding:.6em;overflow:auto;max-height:20em}
</style></head><body>
<h1>onnxbridge serve</h1><p id="info">loading /openapi.json …</p><div id="routes"></div>
<script>
async function main(){
  const doc = await (await fetch('openapi.json')).json();
  document.getElementById('info').textContent = doc.info.title + ' ' + doc.info.version +
    ' — ' + doc.info.description;
  const root = document.getElementById('routes');
  for (const [path, ops] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(ops)) {
      const d = document.createElement('details');
      const s = document.createElement('summary');
      s.innerHTML = '<span class="m ' + method + '">' + method.toUpperCase() + '</span>';
      s.appendChild(document.createTextNode(path + ' — ' + op.summary));
      d.appendChild(s);
      const url = document.createElement('input'); url.size = 80; url.value = path;
      d.appendChild(url);
      let body = null;
      if (method === 'post') {
        body = document.createElement('textarea');
        const c = op.requestBody && op.requestBody.content['application/json'].schema;
        body.value = c && c.example ? JSON.stringify(c.example, null, 1) : '';
        d.appendChild(body);
      }
      const go = document.createElement('button'); go.textContent = 'send';
      const out = document.createElement('pre');
      go.onclick = async () => {
        const r = await fetch(url.value, {method: method.toUpperCase(),
          headers: {'Content-Type': 'application/json'}, body: body ? body.value : undefined});
        out.textContent = r.status + ' ' + r.statusText + '\\n' + await r.text();
      };
      d.appendChild(go); d.appendChild(out); root.appendChild(d);
    }
  }
}
main().catch(e => { document.getElementById('info').textContent = 'error: ' + e; });
</script></body></html>
"""
