"""The data plane: what the server answers, without HTTP (MLServer's handlers/dataplane shape).

Requests arrive here as parsed JSON (plus the binary tensors after the JSON header); answers
leave as plain dicts, numpy arrays and bytes, which ``endpoints`` encodes. ONNX Runtime runs in
a thread pool, never on the event loop.

Shapes: ``infer`` takes ``{input name: [d0, d1, ...]}`` tensors and returns the requested outputs
as they come from the graph; ``predict`` takes ``N`` records and returns ``N`` predictions.
"""

from __future__ import annotations

import asyncio
import math
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import numpy as np
import pandas as pd

from onnxbridge._values import all_finite
from onnxbridge.data import preview_names
from onnxbridge.errors import InferenceRequestError
from onnxbridge.serve._codecs import decode_binary_tensor, decode_json_tensor, parse_shape
from onnxbridge.serve._model import ServedModel
from onnxbridge.serve._repository import ModelEntry, ModelRepository
from onnxbridge.serve._runner import InferenceRunner
from onnxbridge.serve._settings import ServeSettings

__all__ = ["EXTENSIONS", "DataPlane", "InferenceOutput", "InferenceResult"]

EXTENSIONS = ["binary_tensor_data", "model_repository", "onnxbridge_predict", "metrics"]


@dataclass
class InferenceOutput:
    """One output tensor of an answer; ``binary`` when it goes as raw bytes after the header."""

    name: str
    datatype: str
    array: np.ndarray
    binary: bool


@dataclass
class InferenceResult:
    """The answer to an ``infer`` request, before encoding."""

    model: ServedModel
    id: str | None
    outputs: list[InferenceOutput]
    rows: int


def _server_version() -> str:
    try:
        return version("onnxbridge")
    except PackageNotFoundError:  # pragma: no cover - source tree without install
        return "0.0.0"


def _cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def _flag(name: str, params: dict[str, Any], key: str) -> bool:
    value = params.get(key, False)
    if not isinstance(value, bool):
        raise InferenceRequestError(
            f"{name}: parameter {key!r} must be true or false, got {value!r}"
        )
    return value


class DataPlane:
    """Health, metadata, inference and repository operations over a :class:`ModelRepository`.

    Args:
        repository: the models.
        settings: the server settings (readiness policy, thread pool size).
    """

    def __init__(self, repository: ModelRepository, settings: ServeSettings) -> None:
        self.repository = repository
        self.settings = settings
        self.runner = InferenceRunner(settings.inference_threads or _cores())
        self.merge = settings.merge_requests
        # Loading builds sessions (seconds for a large forest): its own thread, so inference
        # goes on meanwhile.
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="onnxbridge-load")
        self.server_metadata: dict[str, Any] = {
            "name": "onnxbridge",
            "version": _server_version(),
            "extensions": EXTENSIONS,
        }

    def close(self) -> None:
        """Stop the worker threads after the work already queued."""
        self.runner.close()
        self.executor.shutdown(wait=True, cancel_futures=False)

    # Health ------------------------------------------------------------------------------------
    def ready(self) -> tuple[bool, list[str]]:
        """Whether the server is ready, and the problems when it is not."""
        entries = [e for e in self.repository.entries() if e.state != "UNLOADED"]
        failed = [f"{e.name}: {e.reason}" for e in entries if not e.versions]
        loaded = [e for e in entries if e.versions]
        if not loaded:
            return False, failed or ["no model is loaded"]
        if self.settings.strict_readiness and failed:
            return False, failed
        return True, []

    # Repository --------------------------------------------------------------------------------
    def index(self) -> list[dict[str, str]]:
        rows: list[dict[str, str]] = []
        known = {e.name for e in self.repository.entries()}
        for entry in self.repository.entries():
            rows.extend(entry.index_rows())
        for name in self.repository.model_names():
            if name not in known:
                rows.append({"name": name, "version": "", "state": "UNLOADED", "reason": ""})
        return sorted(rows, key=lambda r: (r["name"], r["version"]))

    async def load(self, name: str) -> ModelEntry:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.executor, self.repository.load, name)

    def unload(self, name: str) -> ModelEntry:
        return self.repository.unload(name)

    # Inference ---------------------------------------------------------------------------------
    async def infer(
        self, model: ServedModel, request: Any, binary: memoryview | bytes = b""
    ) -> InferenceResult:
        """Run one v2 inference request.

        Args:
            model: the model version (from ``repository.get_model``).
            request: the parsed JSON header: ``{"id"?, "parameters"?, "inputs": [...],
                "outputs"?: [...]}``.
            binary: the bytes after the JSON header (binary tensor data extension).

        Raises:
            InferenceRequestError: the request does not fit the protocol or the model.
            MalformedRequestError: the binary framing does not add up.
            InferenceError: ONNX Runtime refused the (checked) feeds.
        """
        if not isinstance(request, dict):
            raise InferenceRequestError(
                'the body must be a JSON object {"inputs": [{"name", "datatype", "shape", '
                f'"data"}}, ...]}}, got a JSON {type(request).__name__}'
            )
        request_id = request.get("id")
        if request_id is not None and not isinstance(request_id, str):
            raise InferenceRequestError(f"'id' must be a string, got {request_id!r}")
        params = request.get("parameters", {})
        if not isinstance(params, dict):
            raise InferenceRequestError(f"'parameters' must be a JSON object, got {params!r}")
        feeds = self._decode_inputs(model, request.get("inputs"), binary)
        names, binary_flags = self._requested_outputs(
            model, request.get("outputs"), _flag("request", params, "binary_data_output")
        )
        key = model.merge_key(names, feeds) if self.merge else None
        if key is None:
            arrays = await self.runner.submit(model.run, names, feeds)
        else:
            arrays = await self.runner.submit_mergeable(
                model.run, (names, feeds), model.run_merged, key
            )
        first = next(iter(feeds.values()))
        rows = first.shape[0] if first.ndim else 1
        outputs = [
            InferenceOutput(name, model.output_by_name[name].datatype, np.asarray(array), flag)
            for name, array, flag in zip(names, arrays, binary_flags, strict=True)
        ]
        return InferenceResult(model, request_id, outputs, rows)

    def _decode_inputs(
        self, model: ServedModel, inputs: Any, binary: memoryview | bytes
    ) -> dict[str, np.ndarray]:
        if not isinstance(inputs, list) or not inputs:
            raise InferenceRequestError(
                f"'inputs' must be a non-empty list of tensors; model {model.name!r} takes "
                f"{model.input_names}"
            )
        feeds: dict[str, np.ndarray] = {}
        symbols: dict[str, tuple[int, str]] = {}
        offset = 0
        for item in inputs:
            if not isinstance(item, dict):
                raise InferenceRequestError(
                    "each input must be an object with name, datatype, shape and data; "
                    f"got {item!r}"
                )
            name = item.get("name")
            if not isinstance(name, str) or name not in model.input_by_name:
                raise InferenceRequestError(
                    f"model {model.name!r} has no input {name!r}; its inputs are "
                    f"{model.input_names}"
                )
            spec = model.input_by_name[name]
            if name in feeds:
                raise InferenceRequestError(f"input {name!r} is given twice")
            datatype = spec.datatype
            if item.get("datatype") != datatype:
                raise InferenceRequestError(
                    f"input {name!r} has datatype {item.get('datatype')!r}; model "
                    f"{model.name!r} expects {datatype}"
                )
            shape = parse_shape(name, item.get("shape"))
            self._check_shape(model, spec, shape, symbols)
            params = item.get("parameters", {})
            if not isinstance(params, dict):
                raise InferenceRequestError(
                    f"input {name!r}: 'parameters' must be a JSON object, got {params!r}"
                )
            size = params.get("binary_data_size")
            if size is not None:
                if type(size) is not int or size < 0:
                    raise InferenceRequestError(
                        f"input {name!r}: binary_data_size must be a non-negative integer, "
                        f"got {size!r}"
                    )
                if offset + size > len(binary):
                    raise InferenceRequestError(
                        f"input {name!r}: binary_data_size {size} runs past the end of the "
                        f"binary data ({len(binary) - offset} bytes left after the JSON "
                        "header); check Inference-Header-Content-Length"
                    )
                array = decode_binary_tensor(name, datatype, shape, binary[offset : offset + size])
                offset += size
            elif "data" in item:
                array = decode_json_tensor(
                    name, datatype, shape, item["data"], null_is_nan=not self.settings.strict_v2
                )
            else:
                raise InferenceRequestError(
                    f"input {name!r} has neither 'data' nor parameters.binary_data_size"
                )
            # ±inf and values out of the datatype's range were refused by the codec (the
            # value rule of every path); NaN is a missing value, refused where the model's
            # source refused it.
            if name in model.refuse_nan_at and name in model.float_inputs:
                self._refuse_nan(model, name, array)
            feeds[name] = array
        if offset != len(binary):
            raise InferenceRequestError(
                f"{len(binary) - offset} bytes after the JSON header belong to no input; the "
                "binary_data_size of the inputs must add up to the body after "
                "Inference-Header-Content-Length"
            )
        if len(feeds) != len(model.inputs):
            missing = [spec.describe() for spec in model.inputs if spec.name not in feeds]
            raise InferenceRequestError(
                f"model {model.name!r} needs input{'s' if len(missing) > 1 else ''} "
                f"{', '.join(missing)}; the request has only {', '.join(map(repr, feeds))}"
            )
        return feeds

    @staticmethod
    def _check_shape(
        model: ServedModel,
        spec: Any,
        shape: tuple[int, ...],
        symbols: dict[str, tuple[int, str]],
    ) -> None:
        expected = spec.shape
        if len(shape) != len(expected) or any(
            e != -1 and e != d for e, d in zip(expected, shape, strict=True)
        ):
            raise InferenceRequestError(
                f"input {spec.name!r} has shape {list(shape)}; model {model.name!r} expects "
                f"{list(expected)} (-1: any size)"
            )
        if math.prod(shape) == 0:
            raise InferenceRequestError(
                f"input {spec.name!r} has shape {list(shape)}, which holds no values; send at "
                "least one row"
            )
        for symbol, size in zip(spec.symbols, shape, strict=True):
            if symbol is None:
                continue
            seen = symbols.setdefault(symbol, (size, spec.name))
            if seen[0] != size:
                raise InferenceRequestError(
                    f"input {spec.name!r} has {size} along dimension {symbol!r} but input "
                    f"{seen[1]!r} has {seen[0]}; the model needs them equal"
                )

    @staticmethod
    def _refuse_nan(model: ServedModel, name: str, array: np.ndarray) -> None:
        # One check when every value is finite (the common case); NaN counted only otherwise.
        if all_finite(array):
            return
        refused = model.refuse_nan_at[name]
        by_column = array.reshape(array.shape[0], -1) if array.ndim else array.reshape(1, 1)
        counts = [
            (column, int(np.isnan(by_column[:, k]).sum()))
            for k, column in refused
            if k < by_column.shape[1]
        ]
        counts = [(column, n) for column, n in counts if n]
        if counts:
            total = sum(n for _, n in counts)
            shown = preview_names([f"{column!r} ({n})" for column, n in counts], limit=5)
            raise InferenceRequestError(
                f"input {name!r} holds {total} NaN value{'s' if total > 1 else ''} (missing, or "
                f"null in JSON) in column{'s' if len(counts) > 1 else ''} {shown}; model "
                f"{model.name!r} was converted from a model that refuses missing values there, "
                "so fill or drop them"
            )

    @staticmethod
    def _requested_outputs(
        model: ServedModel, outputs: Any, binary_all: bool
    ) -> tuple[list[str], list[bool]]:
        if outputs is None or outputs == []:
            # No outputs named (the field left out, or an empty list as some clients send):
            # every tensor output, as Triton answers.
            specs = model.tensor_outputs
            return [s.name for s in specs], [binary_all] * len(specs)
        if not isinstance(outputs, list):
            raise InferenceRequestError(
                f"'outputs' must be a list of {{\"name\"}} objects, got {outputs!r}"
            )
        names: list[str] = []
        flags: list[bool] = []
        available = ", ".join(s.describe() for s in model.tensor_outputs)
        for item in outputs:
            name = item.get("name") if isinstance(item, dict) else None
            if not isinstance(name, str) or name not in model.output_by_name:
                raise InferenceRequestError(
                    f"model {model.name!r} has no output {name!r}; its outputs are {available}"
                )
            spec = model.output_by_name[name]
            if not spec.datatype:
                raise InferenceRequestError(
                    f"output {name!r} is not a tensor (a sequence of maps, e.g. ZipMap) and "
                    f"cannot be sent; ask for {available}"
                )
            if name in names:
                raise InferenceRequestError(
                    f"output {name!r} is asked for twice; name each output once"
                )
            params = item.get("parameters", {})
            if not isinstance(params, dict):
                raise InferenceRequestError(
                    f"output {name!r}: 'parameters' must be a JSON object, got {params!r}"
                )
            if "binary_data" in params:
                flags.append(_flag(f"output {name!r}", params, "binary_data"))
            else:
                flags.append(binary_all)
            names.append(name)
        return names, flags

    # The simple endpoint -----------------------------------------------------------------------
    async def predict(
        self, model: ServedModel, body: Any, *, ignore_extra: bool, allow_missing: bool
    ) -> dict[str, Any]:
        """Predict for records ``[{"col": value, ...}]`` or a split ``{"columns", "data"}``.

        Returns:
            ``{"model_name", "model_version", "predictions": [...]}``: per row ``label`` and
            ``probabilities`` by class name (classifiers) or ``prediction`` (regressors); for
            a multi-output classifier, ``label`` lists one label per target and
            ``probabilities`` one mapping per target.

        Raises:
            InferenceRequestError: a body of another shape.
            SchemaMismatchError: columns that do not match the model's schema.
        """
        frame = _records_frame(body)
        result = await self.runner.submit(
            lambda: model.predictor.predict(
                frame, ignore_extra=ignore_extra, allow_missing=allow_missing
            )
        )
        predictions: list[dict[str, Any]] = [{} for _ in range(len(result))]
        if result.labels is not None:
            for row, label in zip(predictions, result.labels.tolist(), strict=True):
                row["label"] = label
        if result.targets is not None:
            # A multi-output classifier: "label" is one label per target (set above), and
            # "probabilities" one {class: probability} per target, in target order.
            for target in result.targets:
                if target.probabilities is None:
                    continue
                names = [str(c) for c in (target.classes or range(target.probabilities.shape[1]))]
                for row, values in zip(predictions, target.probabilities, strict=True):
                    row.setdefault("probabilities", []).append(
                        dict(zip(names, values, strict=True))
                    )
        for role in ("probabilities", "scores"):
            matrix = getattr(result, role)
            if matrix is None:
                continue
            names = [str(c) for c in (result.classes or range(matrix.shape[1]))]
            if len(names) != matrix.shape[1]:
                names = names[-matrix.shape[1] :]
            # numpy scalars: orjson writes a float32 as its shortest repr (0.9, not 0.899999976)
            for row, values in zip(predictions, matrix, strict=True):
                row[role] = dict(zip(names, values, strict=True))
        if result.values is not None:
            for row, value in zip(predictions, result.values.tolist(), strict=True):
                row["prediction"] = value
        if result.transformed is not None:
            for row, value in zip(predictions, result.transformed.tolist(), strict=True):
                row["transformed"] = value
        return {
            "model_name": model.name,
            "model_version": model.version,
            "predictions": predictions,
        }


def _records_frame(body: Any) -> pd.DataFrame:
    """A DataFrame from records or a ``{"columns", "data"}`` split."""
    usage = (
        'send records [{"column": value, ...}, ...] or a split '
        '{"columns": [names], "data": [[row values], ...]}'
    )
    if isinstance(body, dict) and "columns" in body and "data" in body:
        columns, data = body["columns"], body["data"]
        if not isinstance(columns, list) or not all(isinstance(c, str) for c in columns):
            raise InferenceRequestError(f"'columns' must be a list of names; {usage}")
        if not isinstance(data, list) or not all(
            isinstance(r, list) and len(r) == len(columns) for r in data
        ):
            raise InferenceRequestError(
                f"'data' must be a list of rows of {len(columns)} values each (one per column); "
                + usage
            )
        if len(set(columns)) != len(columns):
            raise InferenceRequestError(f"'columns' names a column twice: {columns!r}")
        rows = data
    elif isinstance(body, list) and all(isinstance(r, dict) for r in body):
        columns, rows = None, body
    else:
        raise InferenceRequestError(f"the body is a JSON {type(body).__name__}; {usage}")
    if not rows:
        raise InferenceRequestError(f"no rows to predict; {usage}")
    bad = [
        v
        for r in (rows if columns is not None else [list(r.values()) for r in rows])
        for v in r
        if isinstance(v, (list, dict))
    ]
    if bad:
        raise InferenceRequestError(
            f"values must be numbers, strings, booleans or null, got {bad[0]!r}; {usage}"
        )
    frame = pd.DataFrame(rows, columns=columns) if columns is not None else pd.DataFrame(rows)
    # JSON null is a missing value: a column of numbers and nulls (or of nulls only) becomes
    # float with NaN, as it would be read from a CSV file.
    for column in [c for c in frame.columns if frame[c].dtype.kind == "O"]:
        values = frame[column].dropna()
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            frame[column] = pd.to_numeric(frame[column], errors="coerce").astype(float)
    return frame.infer_objects()
