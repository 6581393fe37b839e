"""One served model version: its ONNX Runtime session (through ``Predictor``) and everything the
hot path needs precomputed: tensor specs by name, the metadata answer, the non-finite policy,
and whether concurrent small requests may be merged into one session call.

Merging (dynamic batching, :meth:`ServedModel.run_merged`) must not change a single bit of any
answer, so a model qualifies only when that holds by construction, not by luck:

- every operator of its graph is a tree ensemble (ONNX Runtime scores each row on its own,
  summing the trees in a fixed order) or an operator whose result for an element depends on
  that element alone and is exactly rounded (casts, gathers, arg-max, reshapes, ``+ - * /``);
  a linear model's ``LinearClassifier`` / ``MatMul`` runs a matrix kernel that ONNX Runtime
  picks by the shape of the call, and merged results measurably differ in the last bit
  (tests/serve/test_batching.py), so linear models, ``Sigmoid``, ``Softmax`` and every other
  operator are never merged;
- the session that would run the merged call is the one a single row runs on, with one
  intra-op thread (with more, a tree ensemble splits its trees between threads differently for
  one row and for many, which changes the order of the sums);
- every output comes back with one row per input row (checked on each merged call; a model
  whose outputs do not is never merged again).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from onnxbridge.errors import InferenceError, OnnxbridgeError, first_line
from onnxbridge.runtime import Predictor, TuningSpec
from onnxbridge.serve._codecs import DATATYPES, ORT_TO_DATATYPE

__all__ = ["MERGEABLE_OPS", "MERGE_MAX_ROWS", "PLATFORM", "ServedModel", "TensorSpec"]

PLATFORM = "onnxruntime_onnx"
# Requests of at most this many rows are merged, into calls of at most this many rows: small
# enough that a request waiting on a merged call is not held up long by the others in it.
MERGE_MAX_ROWS = 64
_ML = "ai.onnx.ml"
# (domain, operator) pairs whose result per row is the same whatever else is in the batch (see
# the module docstring). "" is the default ONNX domain.
MERGEABLE_OPS = frozenset(
    {(_ML, "TreeEnsembleClassifier"), (_ML, "TreeEnsembleRegressor"), (_ML, "TreeEnsemble")}
    | {(_ML, op) for op in ("ArrayFeatureExtractor", "ZipMap")}
    | {
        ("", op)
        for op in (
            "Abs", "Add", "ArgMax", "ArgMin", "Cast", "Concat", "Div", "Flatten", "Gather",
            "Identity", "Mul", "Neg", "Reshape", "Squeeze", "Sub", "Sum", "Unsqueeze",
        )
    }
)  # fmt: skip


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


def _rows_first(spec: TensorSpec) -> TensorSpec:
    """``spec`` with an unnamed variable first dimension named ``rows``."""
    if not spec.shape or spec.shape[0] != -1 or spec.symbols[0] is not None:
        return spec
    return replace(spec, symbols=("rows", *spec.symbols[1:]))


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
        operators, tuned = _scan(path)
        options = dict(session_options)
        if "intra_op_num_threads" not in options and not tuned:
            # A server runs many small calls at once on --inference-threads threads; one
            # intra-op thread per call avoids waking a second thread for every row (and makes
            # tree models mergeable). Tuned settings, when the model has them, decide instead.
            options["intra_op_num_threads"] = 1
        self.predictor = Predictor(path, **options)
        # Both regimes' sessions now, so that the first large request does not open (and, for a
        # big forest, rewrite into blocks of trees) the throughput session mid-request.
        self.predictor.open_sessions()
        self.operators = operators
        self.metadata = self.predictor.metadata
        self.inputs = [TensorSpec.from_ort(i) for i in self.predictor.inputs]
        if self.metadata is not None and len(self.metadata.inputs) > 1:
            # One input per column of one table: their first dimension is the table's rows,
            # named or not in the graph.
            self.inputs = [_rows_first(spec) for spec in self.inputs]
        self.outputs = [TensorSpec.from_ort(o) for o in self.predictor.outputs]
        self.input_by_name = {spec.name: spec for spec in self.inputs}
        self.output_by_name = {spec.name: spec for spec in self.outputs}
        # Outputs the protocol can carry; a ZipMap output (a sequence of maps) is left out.
        self.tensor_outputs = [spec for spec in self.outputs if spec.datatype]
        self.input_names = ", ".join(spec.describe() for spec in self.inputs)
        # NaN: a model converted by onnxbridge says in which columns its source took it; a
        # model from elsewhere gets it. (±inf is refused for every model, by the codecs' value
        # rule.) input name -> [(position in the input, column)] where NaN is refused.
        refused = set(self.metadata.missing_refused_columns()) if self.metadata else set()
        self.refuse_nan_at: dict[str, list[tuple[int, str]]] = {}
        for spec in self.metadata.inputs if self.metadata else []:
            at = [(k, c) for k, c in enumerate(spec.get("columns", [])) if c in refused]
            if at:
                self.refuse_nan_at[spec["name"]] = at
        self.float_inputs = {
            spec.name
            for spec in self.inputs
            if DATATYPES.get(spec.datatype, DATATYPES["BOOL"]).kind == "f"
        }
        self.metadata_json = self.metadata_answer([version])
        self.merge_max_rows = self._merge_limit()
        # Requests answered by merged calls, and those calls (written by runner threads only;
        # read by tests and docs/benchmarks.md, not by the hot path).
        self.merged_requests = 0
        self.merged_calls = 0
        # Read on every request: the merge key's input part, when the model has one input.
        self._single_input = self.inputs[0].name if len(self.inputs) == 1 else None

    def _merge_limit(self) -> int:
        """The largest merged call (0: never merge), from the operators and the sessions."""
        if self.operators is None or not self.operators <= MERGEABLE_OPS:
            return 0
        single = self.predictor.settings_for(1)
        if single.intra_op_num_threads != 1:
            return 0
        limit = MERGE_MAX_ROWS
        while limit > 1 and self.predictor.settings_for(limit) != single:
            limit //= 2  # tuned regimes: stay on the single-row session
        return limit if limit > 1 else 0

    @property
    def mergeable(self) -> bool:
        """Whether concurrent small requests are merged into one session call."""
        return self.merge_max_rows > 0

    def merge_key(self, output_names: list[str], feeds: dict[str, np.ndarray]) -> Any:
        """What requests must share to be merged (None: run this one alone).

        Requests merge when they ask for the same outputs and their inputs differ only in the
        number of rows (same names, dtypes and other dimensions), each of at most
        ``merge_max_rows`` rows.
        """
        if not self.merge_max_rows:
            return None
        if self._single_input is not None:
            array = feeds[self._single_input]
            shape = array.shape
            if not shape or shape[0] > self.merge_max_rows:
                return None
            return (tuple(output_names), array.dtype, shape[1:])
        rows = -1
        parts: list[Any] = [tuple(output_names)]
        for name, array in feeds.items():
            shape = array.shape
            if not shape or shape[0] > self.merge_max_rows or (rows >= 0 and shape[0] != rows):
                return None
            rows = shape[0]
            parts.append((name, array.dtype, shape[1:]))
        return tuple(parts)

    def run_merged(self, calls: list[tuple[list[str], dict[str, np.ndarray]]]) -> list[Any]:
        """Run calls that share a :meth:`merge_key` as few session calls; one result each.

        Each result is the list of output arrays :meth:`run` gives for that call alone, exactly
        (see the module docstring for why), or the exception it raises. Called in a runner
        thread.
        """
        results: list[Any] = []
        start = 0
        while start < len(calls):
            end, total = start, 0
            while end < len(calls):
                rows = len(next(iter(calls[end][1].values())))
                if end > start and total + rows > self.merge_max_rows:
                    break
                total += rows
                end += 1
            results.extend(self._run_chunk(calls[start:end], total))
            start = end
        return results

    def _run_chunk(
        self, calls: list[tuple[list[str], dict[str, np.ndarray]]], total: int
    ) -> list[Any]:
        names = calls[0][0]
        if len(calls) > 1:
            merged = {
                name: np.concatenate([feeds[name] for _, feeds in calls]) for name in calls[0][1]
            }
            try:
                outputs = self.run(names, merged)
            except OnnxbridgeError:
                outputs = None  # one request's values: run them one by one for their own errors
            if outputs is not None and all(
                isinstance(out, np.ndarray) and out.ndim and out.shape[0] == total
                for out in outputs
            ):
                self.merged_calls += 1
                self.merged_requests += len(calls)
                answers: list[Any] = []
                offset = 0
                for _, feeds in calls:
                    rows = len(next(iter(feeds.values())))
                    answers.append([out[offset : offset + rows] for out in outputs])
                    offset += rows
                return answers
            if outputs is not None:
                self.merge_max_rows = 0  # outputs not row-aligned: never merge this model again
        answers = []
        for call_names, feeds in calls:
            try:
                answers.append(self.run(call_names, feeds))
            except Exception as exc:  # handed to that request alone
                answers.append(exc)
        return answers

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


def _scan(path: Path) -> tuple[frozenset[tuple[str, str]] | None, bool]:
    """The graph's ``(domain, operator)`` pairs (subgraphs included) and whether it is tuned.

    ``(None, True)`` when the file cannot be read here: the model is then never merged and
    ``Predictor`` reports the problem when it opens the file.
    """
    import onnx  # a dependency of onnxbridge itself; only read here, at load time

    try:
        proto = onnx.load(str(path), load_external_data=False)
        tuned = TuningSpec.find_in_props({p.key: p.value for p in proto.metadata_props})
    except Exception:  # OSError, protobuf's DecodeError, damaged settings: Predictor says why
        return None, True
    operators: set[tuple[str, str]] = set()
    graphs = [proto.graph]
    while graphs:
        graph = graphs.pop()
        for node in graph.node:
            operators.add(("" if node.domain in ("", "ai.onnx") else node.domain, node.op_type))
            for attribute in node.attribute:
                if attribute.type == onnx.AttributeProto.GRAPH:
                    graphs.append(attribute.g)
                graphs.extend(attribute.graphs)
    return frozenset(operators), tuned is not None
