"""One served model version: its ONNX Runtime session (through ``Predictor``) and everything the
hot path needs precomputed: tensor specs by name, the metadata answer, the non-finite policy.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from onnxbridge.errors import InferenceError, first_line
from onnxbridge.runtime import Predictor
from onnxbridge.serve.codecs import DATATYPES, ORT_TO_DATATYPE

__all__ = ["PLATFORM", "ServedModel", "TensorSpec"]

PLATFORM = "onnxruntime_onnx"


@dataclass(frozen=True)
class TensorSpec:
    """A graph input or output as the protocol sees it.

    Attributes:
        name: the graph's name for it.
        datatype: v2 datatype (``FP32``, ``BYTES``, ...); ``""`` for a non-tensor output
            (a ZipMap sequence of maps), which the protocol cannot carry.
        shape: dimensions, ``-1`` where variable.
        symbols: the symbolic name of each variable dimension (``"N"``), None if unnamed; two
            inputs that share a symbol must agree on its size.
    """

    name: str
    datatype: str
    shape: tuple[int, ...]
    symbols: tuple[str | None, ...]

    @classmethod
    def from_ort(cls, node: Any) -> TensorSpec:
        dims = node.shape if isinstance(node.shape, list) else []
        return cls(
            name=node.name,
            datatype=ORT_TO_DATATYPE.get(node.type, ""),
            shape=tuple(d if isinstance(d, int) and d >= 0 else -1 for d in dims),
            symbols=tuple(d if isinstance(d, str) and d else None for d in dims),
        )

    def describe(self) -> str:
        return f"{self.name!r} ({self.datatype}, shape {list(self.shape)})"

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "datatype": self.datatype, "shape": list(self.shape)}


class ServedModel:
    """A loaded model version, ready to run.

    Args:
        name: the model's name in the repository.
        version: its version (``"1"`` for an unversioned model).
        path: the .onnx file.
        session_options: keyword arguments for :class:`~onnxbridge.runtime.Predictor`
            (``intra_op_num_threads``, ``allow_spinning``); empty: Predictor's own choice.

    Raises:
        OnnxModelError: the file is missing or does not load in ONNX Runtime.
    """

    def __init__(
        self, name: str, version: str, path: Path, session_options: dict[str, Any]
    ) -> None:
        self.name = name
        self.version = version
        self.path = path
        self.predictor = Predictor(path, **session_options)
        self.metadata = self.predictor.metadata
        self.inputs = [TensorSpec.from_ort(i) for i in self.predictor.inputs]
        self.outputs = [TensorSpec.from_ort(o) for o in self.predictor.outputs]
        self.input_by_name = {spec.name: spec for spec in self.inputs}
        self.output_by_name = {spec.name: spec for spec in self.outputs}
        # Outputs the protocol can carry; a ZipMap output (a sequence of maps) is left out.
        self.tensor_outputs = [spec for spec in self.outputs if spec.datatype]
        self.input_names = ", ".join(spec.describe() for spec in self.inputs)
        # Non-finite values: a model converted by onnxbridge says whether its source took NaN;
        # scikit-learn refuses infinity even where it takes NaN. A model from elsewhere gets
        # whatever it is sent.
        missing = self.metadata.missing_values if self.metadata else None
        self.refuse_nan = missing == "refused"
        self.refuse_inf = self.metadata is not None
        self.float_inputs = {
            spec.name
            for spec in self.inputs
            if DATATYPES.get(spec.datatype, DATATYPES["BOOL"]).kind == "f"
        }
        self.metadata_json = self.metadata_answer([version])

    def metadata_answer(self, versions: list[str]) -> bytes:
        """The JSON body of ``GET /v2/models/{name}[/versions/{v}]``."""
        return orjson.dumps(
            {
                "name": self.name,
                "versions": versions,
                "platform": PLATFORM,
                "inputs": [spec.to_json() for spec in self.inputs],
                "outputs": [spec.to_json() for spec in self.tensor_outputs],
            }
        )

    def run(self, output_names: list[str], feeds: dict[str, Any]) -> list[Any]:
        """Run the session (called in an executor thread, never on the event loop).

        Raises:
            InferenceError: ONNX Runtime refused the feeds.
        """
        rows = next((len(v) for v in feeds.values() if getattr(v, "ndim", 0) > 0), 1)
        try:
            # The tuned session of the regime this batch size falls in (see `onnxbridge tune`).
            return self.predictor.session_for(rows).run(output_names, feeds)
        except Exception as exc:  # ORT's own Fail / InvalidArgument
            raise InferenceError(
                f"model {self.name!r} failed on this input (onnxruntime: {first_line(exc)}); "
                "check the values against GET /v2/models/" + self.name
            ) from exc
