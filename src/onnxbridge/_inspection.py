"""A readable summary of any ONNX file: ``onnxbridge inspect MODEL.onnx``.

:func:`inspect_model` reads one ``.onnx`` file and returns a :class:`ModelSummary`: what the file
is (size, SHA-256), whether it is valid (``onnx.checker``) and whether ONNX Runtime loads it, who
wrote it, its opsets, its inputs and outputs as readable types (``float32[N,4]``,
``seq(map(int64,float32))``), its operators, its ``metadata_props`` and, for tree ensembles, the
number of trees, nodes and leaves and the maximum depth.

A file that parses as an ONNX model is always summarised, even when the checker rejects it or
ONNX Runtime cannot load it: those outcomes are recorded in the summary. Only a file that is not an
ONNX model at all (missing, a directory, empty, truncated, another format) raises
:class:`~onnxbridge.errors.OnnxModelError`.

Conventions:

- Types: ``float`` is shown as ``float32`` and ``double`` as ``float64``; other element types by
  their lower-case ONNX name (``int64``, ``string``, ``bool``). A dimension is shown by its value,
  by its symbolic name (``dim_param``) if it has one, else as ``N``. A tensor of unknown rank has no
  brackets (``float32``); a scalar has empty ones (``float32[]``).
- Opsets: one entry per domain, the highest version when a domain is imported twice; the default
  domain (``""``) is shown as ``ai.onnx``.
- Operators: ``op_type`` for the default domain, ``<domain>.<op_type>`` otherwise
  (``ai.onnx.ml.TreeEnsembleClassifier``). Nodes inside subgraphs (``If``, ``Loop``, ``Scan``
  bodies) are counted too; the bodies of model-local functions are not.
- Tree depth follows scikit-learn's ``tree_.max_depth``: the root is at depth 0, so a tree that is
  only a leaf has depth 0 and a stump with one split has depth 1. Node counts include the leaves, as
  ``tree_.node_count`` does.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime
from google.protobuf.message import DecodeError
from onnx import numpy_helper

from onnxbridge._html import Html, badge, escape, heading, paragraph, table
from onnxbridge._onnxfile import external_data_files
from onnxbridge.errors import OnnxModelError

__all__ = ["ModelSummary", "TreeEnsembleInfo", "ValueInfo", "format_type", "inspect_model"]

_DEFAULT_DOMAIN = "ai.onnx"
_ML_DOMAIN = "ai.onnx.ml"
_TREE_OPS_V1 = frozenset({"TreeEnsembleClassifier", "TreeEnsembleRegressor"})
_TREE_OP_V5 = "TreeEnsemble"
# Protobuf refuses messages of 2 GiB or more, so no .onnx file (without its external data) is.
MAX_ONNX_BYTES = 2**31 - 1
_HINT = "pass a .onnx file written by `onnxbridge convert` or another ONNX exporter"

# ONNX calls these "float" and "double"; numpy and most users say float32 / float64.
_DTYPE_RENAMES = {"float": "float32", "double": "float64"}
# Enumerations of the ai.onnx.ml opset-5 TreeEnsemble operator (integers there, strings before).
_POST_TRANSFORMS_V5 = ("NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO", "PROBIT")
_AGGREGATES_V5 = ("AVERAGE", "SUM", "MIN", "MAX")


@dataclass(frozen=True)
class ValueInfo:
    """One graph input or output.

    Attributes:
        name: The name used to feed or fetch the value in ONNX Runtime.
        type: The readable type, e.g. ``float32[N,4]``, ``int64[N]``,
            ``seq(map(int64,float32))``.
    """

    name: str
    type: str


@dataclass(frozen=True)
class TreeEnsembleInfo:
    """Size and shape of one tree-ensemble node.

    Attributes:
        node_name: The node's name in the graph (may be empty).
        op_type: The operator with its domain, e.g. ``ai.onnx.ml.TreeEnsembleClassifier``.
        n_trees: Number of trees.
        n_nodes: Number of tree nodes, leaves included (scikit-learn's ``tree_.node_count``
            summed over the trees).
        n_leaves: Number of leaves.
        max_depth: Depth of the deepest leaf, the root being at depth 0 (scikit-learn's
            ``tree_.max_depth``); ``None`` for an ensemble without trees.
        n_targets: Number of classes for a classifier, of targets for a regressor; ``None`` when
            the node does not say.
        post_transform: The transform applied to the summed scores (``NONE``, ``SOFTMAX``,
            ``LOGISTIC``, ...).
        aggregate_function: How regressor leaves are combined (``SUM``, ``AVERAGE``, ...);
            ``None`` for classifiers.
    """

    node_name: str
    op_type: str
    n_trees: int
    n_nodes: int
    n_leaves: int
    max_depth: int | None
    n_targets: int | None
    post_transform: str
    aggregate_function: str | None


@dataclass(frozen=True)
class ModelSummary:
    """Everything ``onnxbridge inspect`` reports about one ONNX file.

    Attributes:
        path: The path as given.
        file_size_bytes: Size of the file (external data files not included).
        sha256: Hex SHA-256 of the file's bytes.
        valid: Whether ``onnx.checker.check_model`` accepts the model.
        checker_message: The checker's message on one line when ``valid`` is false, else ``None``.
        loads_in_onnxruntime: Whether an ONNX Runtime CPU session can be created from the file.
        onnxruntime_error: ONNX Runtime's error on one line when it cannot load, else ``None``.
        ir_version: The ONNX IR version.
        producer_name: The tool that wrote the file (e.g. ``skl2onnx``).
        producer_version: That tool's version.
        model_version: The model's own version number (0 when unset).
        doc_string: The model's doc string, ``None`` when empty.
        graph_name: The main graph's name.
        opsets: Domain → highest imported opset version; the default domain is ``ai.onnx``.
        inputs: Graph inputs (initializers listed as inputs are left out).
        outputs: Graph outputs.
        node_count: Number of nodes, subgraph nodes included.
        operators: Operator → number of nodes, most frequent first.
        metadata: ``metadata_props`` as a dict; values are kept as the strings stored.
        tree_ensembles: One entry per tree-ensemble node, in graph order.
        external_data: The external data files the model keeps its tensors in (file name beside
            the .onnx → size in bytes); empty when every tensor is inside the .onnx.
    """

    path: str
    file_size_bytes: int
    sha256: str
    valid: bool
    checker_message: str | None
    loads_in_onnxruntime: bool
    onnxruntime_error: str | None
    ir_version: int
    producer_name: str
    producer_version: str
    model_version: int
    doc_string: str | None
    graph_name: str
    opsets: dict[str, int]
    inputs: list[ValueInfo]
    outputs: list[ValueInfo]
    node_count: int
    operators: dict[str, int]
    metadata: dict[str, str] = field(default_factory=dict)
    tree_ensembles: list[TreeEnsembleInfo] = field(default_factory=list)
    external_data: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Return the summary as plain dicts, lists, strings and numbers (JSON-serialisable).

        Returns:
            A dict with one key per attribute, in the order documented on the class; inputs,
            outputs and tree ensembles become lists of dicts.
        """
        return dataclasses.asdict(self)

    def _repr_html_(self) -> str:
        """The summary as HTML tables: file, validity, opsets, inputs and outputs, operators,
        tree ensembles and metadata (what Jupyter shows for a summary)."""
        return _summary_html(self)


def inspect_model(path: str | os.PathLike[str]) -> ModelSummary:
    """Summarise one ONNX file.

    The model is read without its external data; the checker and ONNX Runtime read the file
    themselves, so external data next to it is still checked and loaded. Its external data
    files are listed with their sizes; a reference to a file outside the model's folder is
    refused before anything opens it.

    Args:
        path: Path of a binary ``.onnx`` file.

    Returns:
        The summary. A model that parses but fails the checker or does not load in ONNX Runtime
        is summarised with ``valid=False`` or ``loads_in_onnxruntime=False`` and the reason.

    Raises:
        OnnxModelError: The path does not exist, is a directory, is empty, cannot be read, or does
            not hold a binary ONNX model (truncated file, other format), a tree-ensemble node's
            attributes cannot be read as trees, or its external data is outside its folder,
            missing or shorter than its tensors.
    """
    file_path = Path(path)
    size, digest = _hash_file(file_path)
    model = _load_model(file_path, size)
    data_files = external_data_files(file_path, model)
    valid, checker_message = _check(file_path)
    loads, ort_error = _try_onnxruntime(file_path)

    nodes = list(_iter_nodes(model.graph))
    initializer_names = {init.name for init in model.graph.initializer}
    operators = Counter(_op_name(node) for node in nodes)
    return ModelSummary(
        path=str(path),
        file_size_bytes=size,
        sha256=digest,
        valid=valid,
        checker_message=checker_message,
        loads_in_onnxruntime=loads,
        onnxruntime_error=ort_error,
        ir_version=int(model.ir_version),
        producer_name=model.producer_name,
        producer_version=model.producer_version,
        model_version=int(model.model_version),
        doc_string=model.doc_string or None,
        graph_name=model.graph.name,
        opsets=_opsets(model),
        inputs=[
            ValueInfo(name=value.name, type=format_type(value.type))
            for value in model.graph.input
            if value.name not in initializer_names
        ],
        outputs=[
            ValueInfo(name=value.name, type=format_type(value.type)) for value in model.graph.output
        ],
        node_count=len(nodes),
        operators=dict(sorted(operators.items(), key=lambda item: (-item[1], item[0]))),
        metadata={prop.key: prop.value for prop in model.metadata_props},
        tree_ensembles=[
            _tree_ensemble_info(node, file_path) for node in nodes if _is_tree_ensemble(node)
        ],
        external_data={data.name: data.stat().st_size for data in data_files},
    )


# Longest metadata value or message shown in HTML; the rest is cut (``to_dict()`` has it all).
_HTML_MAX_CHARS = 300


def _cut(text: str) -> str:
    return text if len(text) <= _HTML_MAX_CHARS else text[: _HTML_MAX_CHARS - 1] + "…"


def _status_html(ok: bool, yes: str, no: str, problem: str | None) -> Html:
    if ok:
        return badge(yes, good=True)
    return Html(f"{badge(no, good=False)} {escape(_cut(problem or ''))}")


def _summary_html(summary: ModelSummary) -> str:
    producer = " ".join(p for p in (summary.producer_name, summary.producer_version) if p)
    opsets = ", ".join(f"{domain} {version}" for domain, version in summary.opsets.items())
    facts: list[list[Any]] = [
        ["file", summary.path],
        ["size", f"{summary.file_size_bytes} bytes"],
        *(
            [f"external data {name}", f"{bytes_} bytes"]
            for name, bytes_ in summary.external_data.items()
        ),
        ["SHA-256", summary.sha256],
        ["onnx.checker", _status_html(summary.valid, "valid", "invalid", summary.checker_message)],
        [
            "ONNX Runtime",
            _status_html(
                summary.loads_in_onnxruntime, "loads", "does not load", summary.onnxruntime_error
            ),
        ],
        ["IR version", str(summary.ir_version)],
        ["producer", producer or "-"],
        ["opsets", opsets or "-"],
        ["nodes", str(summary.node_count)],
    ]
    if summary.doc_string:
        facts.append(["doc string", _cut(summary.doc_string)])
    parts = [
        paragraph(Html("<b>ONNX model</b>"), summary.path),
        table((), facts),
        heading("Inputs and outputs"),
        table(
            ["", "name", "type"],
            [["input", v.name, v.type] for v in summary.inputs]
            + [["output", v.name, v.type] for v in summary.outputs],
        ),
        heading("Operators"),
        table(["operator", "count"], [[op, count] for op, count in summary.operators.items()]),
    ]
    if summary.tree_ensembles:
        parts.append(heading("Tree ensembles"))
        parts.append(
            table(
                ["operator", "trees", "nodes", "leaves", "max depth", "targets", "post-transform"],
                [
                    [t.op_type, t.n_trees, t.n_nodes, t.n_leaves,
                     "-" if t.max_depth is None else t.max_depth,
                     "-" if t.n_targets is None else t.n_targets, t.post_transform]
                    for t in summary.tree_ensembles
                ],
            )
        )  # fmt: skip
        parts.append(
            paragraph(
                "Nodes include leaves; depth counts the root as 0 (scikit-learn's max_depth)."
            )
        )
    if summary.metadata:
        parts.append(heading("Metadata"))
        parts.append(table(["key", "value"], [[k, _cut(v)] for k, v in summary.metadata.items()]))
    return f"<div>{''.join(parts)}</div>"


def format_type(type_proto: onnx.TypeProto) -> str:
    """Format an ONNX type readably.

    Args:
        type_proto: The ``type`` of a graph input or output.

    Returns:
        e.g. ``float32[N,4]``, ``string[N,1]``, ``seq(map(int64,float32))``,
        ``optional(float32[N])``; ``?`` for a type the file leaves unset.
    """
    kind = type_proto.WhichOneof("value")
    if kind == "tensor_type":
        return _format_tensor(type_proto.tensor_type)
    if kind == "sparse_tensor_type":
        return f"sparse({_format_tensor(type_proto.sparse_tensor_type)})"
    if kind == "sequence_type":
        return f"seq({format_type(type_proto.sequence_type.elem_type)})"
    if kind == "map_type":
        map_type = type_proto.map_type
        return f"map({_dtype_name(map_type.key_type)},{format_type(map_type.value_type)})"
    if kind == "optional_type":
        return f"optional({format_type(type_proto.optional_type.elem_type)})"
    return "?"


def _format_tensor(tensor_type: onnx.TypeProto.Tensor | onnx.TypeProto.SparseTensor) -> str:
    dtype = _dtype_name(tensor_type.elem_type)
    if not tensor_type.HasField("shape"):
        return dtype
    dims = []
    for dim in tensor_type.shape.dim:
        if dim.HasField("dim_value"):
            dims.append(str(dim.dim_value))
        elif dim.dim_param:
            dims.append(dim.dim_param)
        else:
            dims.append("N")
    return f"{dtype}[{','.join(dims)}]"


def _dtype_name(elem_type: int) -> str:
    if elem_type == onnx.TensorProto.UNDEFINED:
        return "?"
    try:
        name = onnx.TensorProto.DataType.Name(elem_type).lower()
    except ValueError:
        return f"dtype{elem_type}"
    return _DTYPE_RENAMES.get(name, name)


def _hash_file(path: Path) -> tuple[int, str]:
    """Return the size and SHA-256 of ``path``, or raise OnnxModelError if it is not a file."""
    if not path.exists():
        raise OnnxModelError(
            f"cannot inspect {str(path)!r}: no such file; check the path and {_HINT}"
        )
    if path.is_dir():
        raise OnnxModelError(
            f"cannot inspect {str(path)!r}: it is a directory, not a file; {_HINT}"
        )
    # Checked before a byte is read: protobuf cannot parse a larger file, and reading one would
    # hold gigabytes in memory first. Big weights live in external data files, which stay small.
    size = path.stat().st_size
    if size > MAX_ONNX_BYTES:
        raise OnnxModelError(
            f"cannot inspect {str(path)!r}: it is {size} bytes, over the {MAX_ONNX_BYTES} bytes "
            "(2 GiB) an ONNX protobuf file can be; a model that large keeps its weights in "
            "external data files beside a small .onnx, so pass that .onnx"
        )
    digest = hashlib.sha256()
    size = 0
    try:
        with path.open("rb") as handle:
            while chunk := handle.read(1 << 20):
                digest.update(chunk)
                size += len(chunk)
    except OSError as exc:
        raise OnnxModelError(
            f"cannot inspect {str(path)!r}: the file cannot be read ({exc.strerror or exc}); "
            "check its permissions"
        ) from exc
    if size == 0:
        raise OnnxModelError(
            f"cannot inspect {str(path)!r}: the file is empty (0 bytes); "
            f"re-export the model, or {_HINT}"
        )
    return size, digest.hexdigest()


def _load_model(path: Path, size: int) -> onnx.ModelProto:
    try:
        # format="protobuf": onnx would otherwise pick a text parser from the extension
        # (.json, .txt), and neither the checker nor ONNX Runtime reads those.
        model = onnx.load(path, format="protobuf", load_external_data=False)
    except (DecodeError, RuntimeError, ValueError) as exc:
        raise OnnxModelError(
            f"{str(path)!r} ({size} bytes) is not an ONNX model (protobuf parse failed: "
            f"{_one_line(str(exc))}); the file may be truncated or another format; {_HINT}"
        ) from exc
    except OSError as exc:
        raise OnnxModelError(
            f"cannot inspect {str(path)!r}: the file cannot be read ({exc.strerror or exc}); "
            "check its permissions"
        ) from exc
    # Protobuf accepts many byte strings as a message with no known fields; an ONNX exporter
    # always writes an IR version or a graph.
    if not (model.ir_version or model.HasField("graph") or model.opset_import):
        raise OnnxModelError(
            f"{str(path)!r} ({size} bytes) is not an ONNX model (it parses as protobuf but has "
            f"no IR version, opset or graph); {_HINT}"
        )
    return model


def _check(path: Path) -> tuple[bool, str | None]:
    try:
        # The path form reads the file itself, so models over 2 GB and external data work.
        onnx.checker.check_model(str(path), full_check=False)
    except (onnx.checker.ValidationError, RuntimeError, ValueError) as exc:
        return False, _one_line(str(exc))
    return True, None


def _try_onnxruntime(path: Path) -> tuple[bool, str | None]:
    options = onnxruntime.SessionOptions()
    # Errors are reported through the summary; keep ONNX Runtime's own log off the terminal.
    options.log_severity_level = 3
    try:
        onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    # ONNX Runtime raises its own exception classes (Fail, InvalidGraph, ...) that derive
    # straight from Exception; any of them means "does not load", which is what we report.
    except Exception as exc:
        return False, _one_line(str(exc)) or type(exc).__name__
    return True, None


def _one_line(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _opsets(model: onnx.ModelProto) -> dict[str, int]:
    versions: dict[str, int] = {}
    for opset in model.opset_import:
        domain = opset.domain or _DEFAULT_DOMAIN
        versions[domain] = max(versions.get(domain, opset.version), opset.version)
    # Default domain first, then the others alphabetically.
    return dict(sorted(versions.items(), key=lambda item: (item[0] != _DEFAULT_DOMAIN, item[0])))


def _iter_nodes(graph: onnx.GraphProto) -> Iterator[onnx.NodeProto]:
    """Yield every node of ``graph``, then those of its subgraphs, depth first."""
    for node in graph.node:
        yield node
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from _iter_nodes(attr.g)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for subgraph in attr.graphs:
                    yield from _iter_nodes(subgraph)


def _op_name(node: onnx.NodeProto) -> str:
    if node.domain in ("", _DEFAULT_DOMAIN):
        return node.op_type
    return f"{node.domain}.{node.op_type}"


def _is_tree_ensemble(node: onnx.NodeProto) -> bool:
    return node.domain == _ML_DOMAIN and (
        node.op_type in _TREE_OPS_V1 or node.op_type == _TREE_OP_V5
    )


def _attr(node: onnx.NodeProto, name: str) -> Any:
    """Return attribute ``name`` (or ``name_as_tensor``) of ``node``, tensors as numpy arrays."""
    for attr in node.attribute:
        if attr.name in (name, f"{name}_as_tensor"):
            value = onnx.helper.get_attribute_value(attr)
            if isinstance(value, onnx.TensorProto):
                return numpy_helper.to_array(value)
            return value
    return None


def _ints(node: onnx.NodeProto, name: str) -> np.ndarray:
    value = _attr(node, name)
    if value is None:
        return np.zeros(0, dtype=np.int64)
    return np.asarray(value).astype(np.int64).ravel()


def _strings(node: onnx.NodeProto, name: str) -> list[str]:
    value = _attr(node, name)
    if value is None:
        return []
    items = np.asarray(value, dtype=object).ravel().tolist()
    return [item.decode() if isinstance(item, bytes) else str(item) for item in items]


def _text(value: Any, names: tuple[str, ...], default: str) -> str:
    """Turn an enum attribute (bytes before opset 5, an int from opset 5) into its name."""
    if value is None:
        return default
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, int) and 0 <= value < len(names):
        return names[value]
    return str(value)


def _tree_ensemble_info(node: onnx.NodeProto, path: Path) -> TreeEnsembleInfo:
    try:
        return _read_tree_ensemble(node)
    except (TypeError, ValueError, IndexError) as exc:
        raise OnnxModelError(
            f"{str(path)!r} has a {node.op_type} node {node.name!r} whose tree attributes cannot "
            f"be read ({_one_line(str(exc))}); re-export the model with its converter"
        ) from exc


def _read_tree_ensemble(node: onnx.NodeProto) -> TreeEnsembleInfo:
    if node.op_type == _TREE_OP_V5:
        n_trees, n_nodes, n_leaves, max_depth = _tree_stats_v5(node)
        n_targets = _attr(node, "n_targets")
        post_transform = _text(_attr(node, "post_transform"), _POST_TRANSFORMS_V5, "NONE")
        aggregate = _text(_attr(node, "aggregate_function"), _AGGREGATES_V5, "SUM")
    else:
        n_trees, n_nodes, n_leaves, max_depth = _tree_stats_v1(node)
        post_transform = _text(_attr(node, "post_transform"), (), "NONE")
        if node.op_type == "TreeEnsembleClassifier":
            labels = _attr(node, "classlabels_int64s")
            if labels is None:
                labels = _attr(node, "classlabels_strings")
            n_targets = None if labels is None else len(labels)
            aggregate = None
        else:
            n_targets = _attr(node, "n_targets")
            aggregate = _text(_attr(node, "aggregate_function"), (), "SUM")
    return TreeEnsembleInfo(
        node_name=node.name,
        op_type=_op_name(node),
        n_trees=n_trees,
        n_nodes=n_nodes,
        n_leaves=n_leaves,
        max_depth=max_depth,
        n_targets=None if n_targets is None else int(n_targets),
        post_transform=post_transform,
        aggregate_function=aggregate,
    )


def _tree_stats_v1(node: onnx.NodeProto) -> tuple[int, int, int, int | None]:
    """Trees, nodes, leaves and max depth of a TreeEnsembleClassifier / Regressor.

    Each tree node is one entry of the ``nodes_*`` attributes, leaves included (mode ``LEAF``);
    child ids are node ids within the same tree.
    """
    tree_ids = _ints(node, "nodes_treeids")
    node_ids = _ints(node, "nodes_nodeids")
    true_ids = _ints(node, "nodes_truenodeids")
    false_ids = _ints(node, "nodes_falsenodeids")
    is_leaf = np.array([mode == "LEAF" for mode in _strings(node, "nodes_modes")], dtype=bool)
    n_nodes = len(node_ids)
    if (
        n_nodes == 0
        or not (len(tree_ids) == len(true_ids) == len(false_ids) == len(is_leaf) == n_nodes)
        or min(node_ids.min(), true_ids.min(), false_ids.min()) < 0
    ):
        return len(np.unique(tree_ids)), n_nodes, int(is_leaf.sum()), None

    # Address each node by (tree id, node id) packed into one integer, then find children by
    # binary search: vectorised, so forests with millions of nodes stay fast.
    stride = int(max(node_ids.max(), true_ids.max(), false_ids.max())) + 1
    keys = tree_ids * stride + node_ids
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]

    def child_index(child_ids: np.ndarray) -> np.ndarray:
        wanted = tree_ids * stride + child_ids
        pos = np.clip(np.searchsorted(sorted_keys, wanted), 0, n_nodes - 1)
        found = (sorted_keys[pos] == wanted) & ~is_leaf
        return np.where(found, order[pos], -1)

    true_child = child_index(true_ids)
    false_child = child_index(false_ids)
    is_child = np.zeros(n_nodes, dtype=bool)
    for children in (true_child, false_child):
        is_child[children[children >= 0]] = True
    roots = np.flatnonzero(~is_child)
    max_depth = _max_depth(roots, true_child, false_child)
    return len(np.unique(tree_ids)), n_nodes, int(is_leaf.sum()), max_depth


def _max_depth(roots: np.ndarray, true_child: np.ndarray, false_child: np.ndarray) -> int | None:
    """Depth of the deepest node reachable from ``roots`` (roots at depth 0), level by level.

    A node reached twice (malformed or shared subtrees) is expanded once, so cycles end.
    """
    if len(roots) == 0:
        return None
    visited = np.zeros(len(true_child), dtype=bool)
    visited[roots] = True
    frontier = roots
    depth = 0
    while True:
        children = np.concatenate([true_child[frontier], false_child[frontier]])
        children = np.unique(children[children >= 0])
        children = children[~visited[children]]
        if len(children) == 0:
            return depth
        visited[children] = True
        frontier = children
        depth += 1


def _tree_stats_v5(node: onnx.NodeProto) -> tuple[int, int, int, int | None]:
    """Trees, nodes, leaves and max depth of an ai.onnx.ml opset-5 TreeEnsemble.

    There, ``nodes_*`` hold only the splits and ``leaf_*`` the leaves; a child is a leaf index when
    ``nodes_trueleafs`` / ``nodes_falseleafs`` say so. A split whose two branches reach the same
    leaf is how the operator encodes a tree that is a single leaf, so it is counted as that leaf.
    """
    roots = _ints(node, "tree_roots")
    true_ids = _ints(node, "nodes_truenodeids")
    false_ids = _ints(node, "nodes_falsenodeids")
    true_leaf = _ints(node, "nodes_trueleafs").astype(bool)
    false_leaf = _ints(node, "nodes_falseleafs").astype(bool)
    n_splits = len(true_ids)
    n_trees = len(roots)
    if (
        n_trees == 0
        or not (len(false_ids) == len(true_leaf) == len(false_leaf) == n_splits)
        or roots.min() < 0
        or roots.max() >= n_splits
    ):
        return n_trees, n_splits + len(_ints(node, "leaf_targetids")), 0, None

    is_leaf_node = true_leaf & false_leaf & (true_ids == false_ids)
    true_child = np.where(~true_leaf & (true_ids >= 0) & (true_ids < n_splits), true_ids, -1)
    false_child = np.where(~false_leaf & (false_ids >= 0) & (false_ids < n_splits), false_ids, -1)

    # Walk the splits level by level from the roots; a leaf sits one level below its parent
    # split, except a collapsed single-leaf split, which is itself the leaf.
    visited = np.zeros(n_splits, dtype=bool)
    frontier = np.unique(roots)
    visited[frontier] = True
    n_internal = n_leaves = 0
    max_depth = 0
    depth = 0
    while len(frontier):
        collapsed = is_leaf_node[frontier]
        splits = frontier[~collapsed]
        n_leaves += int(collapsed.sum())
        n_internal += len(splits)
        leaf_refs = int(true_leaf[splits].sum() + false_leaf[splits].sum())
        n_leaves += leaf_refs
        if collapsed.any():
            max_depth = max(max_depth, depth)
        if leaf_refs:
            max_depth = max(max_depth, depth + 1)
        children = np.concatenate([true_child[splits], false_child[splits]])
        children = np.unique(children[children >= 0])
        children = children[~visited[children]]
        visited[children] = True
        frontier = children
        depth += 1
    return n_trees, n_internal + n_leaves, n_leaves, max_depth
