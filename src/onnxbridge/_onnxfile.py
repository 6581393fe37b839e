"""ONNX model files: how a model is saved (with its tensors in an external data file when it
passes the protobuf limit) and which files on disk make up one model.

A model whose tensors do not fit in one protobuf message (2 GiB) is written as ``model.onnx``
(the graph, with references to its tensors) and ``model.onnx.data`` (the tensors' bytes) side
by side; ``--external-data`` on ``convert`` writes a small model that way too. Every command that
reads a model from a path asks this module which files belong to it and whether the external data
references are safe to follow: a reference that leaves the model's folder (``../..``, an absolute
path, a symbolic link out) is refused before any other code opens it.

:func:`unique_names` names the nodes and values that convert and the runtime's rewrites add to
a graph.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import mmap
import os
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import external_data_helper, helper, numpy_helper

from onnxbridge._files import check_not_folders
from onnxbridge.errors import OnnxModelError

__all__ = [
    "PROTOBUF_LIMIT",
    "data_file_name",
    "external_data_files",
    "loadable",
    "model_files",
    "model_sha256",
    "needs_external_data",
    "read_model_bytes",
    "save_model",
    "tensor_bytes",
    "total_bytes",
    "tree_runs",
    "unique_names",
]

# Protobuf refuses a message of 2 GiB or more: no .onnx file (without its external data) is.
PROTOBUF_LIMIT = 2**31 - 1
# Room left for the graph's other fields (names, attributes, metadata) when deciding from the
# tensors' size alone whether a model fits: beyond it, saving tries the whole model first.
_HEADROOM = 256 * 2**20
# Tensors smaller than this stay in the .onnx (as ONNX's own tools do): shapes, small constants.
_EXTERNAL_MIN_BYTES = 1024
# The key of an external data reference: a string's bytes stand as they are in the serialized
# file whatever the encoding of its tag and length, so a file without them has no external data,
# found without parsing the whole model (a file with them, say in a doc string, is parsed).
_LOCATION_KEY = b"location"


def data_file_name(path: str | os.PathLike[str]) -> str:
    """The external data file ``save_model`` writes beside ``path``: its name plus ``.data``."""
    return Path(path).name + ".data"


def _tensors(graph: onnx.GraphProto) -> Iterator[onnx.TensorProto]:
    """Every dense tensor of ``graph`` and its subgraphs: initializers and attribute values
    (what ``save_model`` may move out)."""
    for sub in _subgraphs(graph):
        yield from sub.initializer
        for node in sub.node:
            yield from _attribute_tensors(node, sparse=False)


def _referenced(model: onnx.ModelProto) -> Iterator[onnx.TensorProto]:
    """Every tensor ONNX Runtime may read from external data: :func:`_tensors`' and the values
    and indices of sparse tensors, in the graph, its subgraphs and the model's local functions."""
    graphs = list(_subgraphs(model.graph))
    functions = [node for function in model.functions for node in function.node]
    for node in functions:
        for attribute in node.attribute:
            for sub in _attribute_graphs(attribute):
                graphs.extend(_subgraphs(sub))
    for graph in graphs:
        yield from graph.initializer
        for sparse in graph.sparse_initializer:
            yield from (sparse.values, sparse.indices)
    for node in [*(n for graph in graphs for n in graph.node), *functions]:
        yield from _attribute_tensors(node, sparse=True)


def _attribute_tensors(node: onnx.NodeProto, *, sparse: bool) -> Iterator[onnx.TensorProto]:
    """The tensors a node's attributes hold (not those of its subgraphs); with ``sparse``, the
    values and indices of its sparse tensors too."""
    for attribute in node.attribute:
        if attribute.HasField("t"):
            yield attribute.t
        yield from attribute.tensors
        if sparse:
            held = list(attribute.sparse_tensors)
            if attribute.HasField("sparse_tensor"):
                held.append(attribute.sparse_tensor)
            for tensor in held:
                yield from (tensor.values, tensor.indices)


def _attribute_graphs(attribute: onnx.AttributeProto) -> list[onnx.GraphProto]:
    return ([attribute.g] if attribute.HasField("g") else []) + list(attribute.graphs)


def _subgraphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    """``graph`` and every graph nested in its nodes' attributes."""
    yield graph
    for node in graph.node:
        for attribute in node.attribute:
            for sub in _attribute_graphs(attribute):
                yield from _subgraphs(sub)


def _data_bytes(tensor: onnx.TensorProto) -> int:
    """Bytes of a tensor's values (0 for strings, which cannot be stored externally)."""
    if tensor.data_type in (onnx.TensorProto.STRING, onnx.TensorProto.UNDEFINED):
        return 0
    itemsize = helper.tensor_dtype_to_np_dtype(tensor.data_type).itemsize
    return math.prod(tensor.dims) * itemsize


def tensor_bytes(model: onnx.ModelProto) -> int:
    """Bytes of every numeric tensor value in ``model`` (counted from shapes, nothing copied)."""
    return sum(_data_bytes(tensor) for tensor in _tensors(model.graph))


def needs_external_data(model: onnx.ModelProto, limit: int = PROTOBUF_LIMIT) -> bool:
    """Whether ``model``'s tensors alone come near ``limit`` bytes, so it must be written with
    external data (the graph's other fields are checked when it is serialized)."""
    return tensor_bytes(model) > max(limit - _HEADROOM, limit // 2)


def save_model(
    model: onnx.ModelProto,
    path: str | os.PathLike[str],
    *,
    external_data: bool | None = None,
    own_data: bool = False,
) -> list[Path]:
    """Write ``model`` to ``path`` atomically; returns the files written (``path`` first).

    Args:
        model: the model. It keeps its tensors (those moved out to the data file are read
            back in), as raw bytes.
        path: the ``.onnx`` file.
        external_data: True writes the tensors of 1 KiB or more to ``<name>.data`` beside
            ``path`` (no data file for a model without any); False never does; None (default)
            does when the model would pass the 2 GiB protobuf limit.
        own_data: the file at the data file's name is the caller's own whatever the model at
            ``path`` reads (a bundle whose card records it: its ``model.onnx`` may be missing
            after an interrupted save).

    Both files are written under temporary names in the same folder and renamed into place,
    the data file first (an earlier ``path`` that may read the old data file is removed just
    before, so no reader ever pairs an old graph with new tensors); the data file of the model
    being replaced, when the new model has none, is removed. A file at the data file's name that
    the model being replaced does not read is the user's: left alone, and where the new model's
    tensors would go, refused.

    Raises:
        OnnxModelError: the model is over the protobuf limit even without its tensors (its graph
            alone: say, integer attributes of a very large tree ensemble); or, with external
            data, a file the model being replaced does not read stands at the data file's name.
        OSError: the folder cannot be written, or ``path`` (or, with external data, the data
            file's name) is a folder; then nothing has changed.
    """
    path = Path(path)
    data_path = path.with_name(data_file_name(path))
    external = needs_external_data(model) if external_data is None else external_data
    check_not_folders(*((path, data_path) if external else (path,)))
    # A file at the data file's name is replaced or removed only when the model being replaced
    # reads it: any other file of that name is the user's.
    ours = data_path.is_file() and (own_data or _names_data_file(path, data_path.name))
    path.parent.mkdir(parents=True, exist_ok=True)
    with _scratch_folder(path) as scratch:
        writing = data_path  # the file a failed write is about, named as the user knows it
        try:
            graph = None
            if not external:
                graph = _serialized(model, allow_over=external_data is None)
            if graph is None:
                graph = _externalized(model, scratch / data_path.name)
                # A model with no tensor of 1 KiB or more has nothing to move out.
                external = (scratch / data_path.name).exists()
            writing = path
            (scratch / path.name).write_bytes(graph)
            del graph
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror or str(exc), str(writing)) from exc
        if external and data_path.exists() and not ours:
            raise OnnxModelError(
                f"{str(data_path)!r} exists and is not the external data of {str(path)!r}, "
                "where the model's tensors go; move that file away or save the model under "
                "another name"
            )
        if external:
            if data_path.exists():
                # The old graph may read this data file: it goes first, so that a reader (or
                # a crash) between the two renames finds no model rather than the old graph
                # over the new tensors.
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
            os.replace(scratch / data_path.name, data_path)
        os.replace(scratch / path.name, path)
    if not external and ours:
        with contextlib.suppress(FileNotFoundError):
            data_path.unlink()
    return [path, data_path] if external else [path]


def _external_tensors(model: onnx.ModelProto) -> Iterator[tuple[onnx.TensorProto, dict[str, str]]]:
    """Each tensor of ``model`` kept in external data, with its ``external_data`` entries."""
    for tensor in _referenced(model):
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            yield tensor, {entry.key: entry.value for entry in tensor.external_data}


def _names_data_file(path: Path, name: str) -> bool:
    """Whether the model now at ``path`` (if any, and readable) reads external data from the
    file ``name`` beside it."""
    try:
        if not path.is_file() or not _uses_external_data(path):
            return False
        model = _load_graph(path)
    except (OSError, ValueError, OnnxModelError):
        return False
    return any(info.get("location") == name for _, info in _external_tensors(model))


@contextlib.contextmanager
def _scratch_folder(path: Path) -> Iterator[Path]:
    """A private folder beside ``path`` (same file system, so renames out of it are atomic)."""
    # (A file name is at most 255 bytes: the scratch name keeps the start of a long one.)
    prefix = f".{path.name[:100]}."
    scratch = Path(tempfile.mkdtemp(prefix=prefix, suffix=".tmp", dir=path.parent))
    try:
        yield scratch
    finally:
        for leftover in scratch.iterdir():
            leftover.unlink()
        scratch.rmdir()


def _serialized(model: onnx.ModelProto, *, allow_over: bool) -> bytes | None:
    """The model's bytes; None when they pass the protobuf limit and ``allow_over`` (the caller
    then writes it with external data). Protobuf writes such a message but cannot read it back."""
    try:
        data = model.SerializeToString()
    except ValueError:  # some protobuf builds refuse to write it at all
        data = None
    if data is not None and len(data) <= PROTOBUF_LIMIT:
        return data
    if allow_over:
        return None
    raise OnnxModelError(
        "the model is over the 2 GiB protobuf limit; write it with external data "
        "(`convert --external-data`, or external_data=True)"
    )


def _externalized(model: onnx.ModelProto, data_path: Path) -> bytes:
    """Write the tensors of ``model`` to ``data_path`` and return the graph that refers to them;
    ``model`` gets its tensors back afterwards."""
    moved = []
    for tensor in _tensors(model.graph):
        if _data_bytes(tensor) < _EXTERNAL_MIN_BYTES:
            continue
        if not tensor.HasField("raw_data"):
            values = numpy_helper.to_array(tensor)
            tensor.ClearField(helper.tensor_dtype_to_field(tensor.data_type))
            tensor.raw_data = values.tobytes()
        external_data_helper.set_external_data(tensor, data_path.name)
        moved.append(tensor)
    if not moved:
        graph = _serialized(model, allow_over=True)
        if graph is None:
            raise OnnxModelError(_graph_too_big(model, moved))
        return graph
    saved = 0
    try:
        data_path.touch()
        for tensor in moved:
            external_data_helper.save_external_data(tensor, str(data_path.parent))
            tensor.ClearField("raw_data")
            saved += 1
        graph = _serialized(model, allow_over=True)
        if graph is None:
            raise OnnxModelError(_graph_too_big(model, moved))
    finally:
        for index, tensor in enumerate(moved):
            if index < saved:
                external_data_helper.load_external_data_for_tensor(tensor, str(data_path.parent))
            # As it was: no location field at all (ONNX's helper sets it to DEFAULT).
            tensor.ClearField("data_location")
            tensor.ClearField("external_data")
    return graph


def _graph_too_big(model: onnx.ModelProto, moved: list[onnx.TensorProto]) -> str:
    """Why a model stays over the limit with its tensors out: its largest node's values."""
    counts = [
        (sum(len(a.ints) + len(a.floats) + len(a.strings) for a in node.attribute), node.op_type)
        for node in model.graph.node
    ]
    values, op_type = max(counts, default=(0, "?"))
    return (
        f"the model is over the 2 GiB protobuf limit even with its "
        f"{sum(_data_bytes(t) for t in moved)} bytes of tensors in external data: its graph "
        f"alone is {model.ByteSize()} bytes, over the {PROTOBUF_LIMIT} a protobuf message can "
        f"be (its largest node, {op_type}, has {values} integer, float and string attribute "
        "values, which cannot be stored outside the graph); make the model smaller (fewer or "
        "shallower trees)"
    )


@contextlib.contextmanager
def loadable(model: onnx.ModelProto, limit: int = PROTOBUF_LIMIT) -> Iterator[bytes | str]:
    """``model`` as ONNX Runtime and ``onnx.checker`` take it: its bytes, or, when it passes
    ``limit`` (no one message can hold it), the path of a copy saved with external data in a
    temporary folder, removed when the block ends."""
    data = None
    if not needs_external_data(model, limit):
        data = _serialized(model, allow_over=True)
    if data is not None and len(data) <= limit:
        yield data
        return
    del data
    # (A session opened from the copy keeps what it read; the files may go.)
    with tempfile.TemporaryDirectory(
        prefix="onnxbridge-model-", ignore_cleanup_errors=True
    ) as folder:
        path = Path(folder) / "model.onnx"
        save_model(model, path, external_data=True)
        yield str(path)


def _uses_external_data(path: Path) -> bool:
    """Whether the file may hold an external data reference (a fast byte scan, no parse)."""
    with path.open("rb") as handle:
        if os.fstat(handle.fileno()).st_size == 0:
            return False
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as view:
            return view.find(_LOCATION_KEY) >= 0


def external_data_files(
    path: str | os.PathLike[str], model: onnx.ModelProto | None = None
) -> list[Path]:
    """The external data files the model at ``path`` refers to, checked; [] for none.

    Args:
        path: the ``.onnx`` file.
        model: the model already read from ``path`` (without external data), to skip reading
            it again.

    Raises:
        OnnxModelError: a reference leaves the model's folder (absolute, ``..``, a link out of
            it), names a file that is missing, or reaches past the end of its file.
    """
    path = Path(path)
    files = dict.fromkeys(external_data_locations(path, model).values())
    return [path.parent / file.name for file in files]


def external_data_locations(
    path: str | os.PathLike[str], model: onnx.ModelProto | None = None
) -> dict[str, Path]:
    """``{location: file}``: each external data location the model at ``path`` writes (as
    ONNX Runtime looks it up) and the file it resolves to, checked as
    :func:`external_data_files` does; {} for none."""
    path = Path(path)
    if model is None:
        if not _uses_external_data(path):
            return {}
        model = _load_graph(path)
    # ONNX Runtime looks for the data beside the path it was given (a link to the .onnx is not
    # followed for that), so that folder is the one the data must be in.
    folder = path.parent.resolve()
    ends: dict[Path, int] = {}
    locations: dict[str, Path] = {}
    for tensor, info in _external_tensors(model):
        location = info.get("location", "")
        file = _inside(path, folder, location, tensor.name)
        end = _data_end(path, tensor, info)
        ends[file] = max(ends.get(file, 0), end)
        locations[location] = file
    for file, end in ends.items():
        _check_data_file(path, file, end)
    return locations


def _data_end(path: Path, tensor: onnx.TensorProto, info: dict[str, str]) -> int:
    """The byte of its data file where a tensor's values end, from its offset and length."""
    return sum(_span(path, tensor, info))


def _span(path: Path, tensor: onnx.TensorProto, info: dict[str, str]) -> tuple[int, int]:
    """``(offset, length)`` of a tensor's values in its data file."""
    try:
        offset = int(info.get("offset") or 0)
        # No length, or 0: ONNX Runtime reads the tensor's own size.
        length = int(info.get("length") or 0) or _data_bytes(tensor)
    except ValueError:
        offset = length = -1
    if offset < 0 or length < 0:
        raise OnnxModelError(
            f"{str(path)!r} gives tensor {tensor.name!r} an external data offset "
            f"{info.get('offset')!r} and length {info.get('length')!r}, which are not byte "
            "counts; re-save the model with its data file (onnx.save_model, "
            "save_as_external_data=True)"
        )
    return offset, length


def _load_graph(path: Path) -> onnx.ModelProto:
    try:
        return onnx.load(str(path), format="protobuf", load_external_data=False)
    except Exception as exc:  # protobuf's DecodeError and onnx's own errors
        raise OnnxModelError(
            f"{str(path)!r} is not an ONNX model ({str(exc).splitlines()[0] if str(exc) else exc!r}"
            "); pass a .onnx file written by `onnxbridge convert` or another exporter"
        ) from exc


def _inside(path: Path, folder: Path, location: str, tensor: str) -> Path:
    """The resolved file of an external data ``location``, refused unless it is a plain file
    name in the model's own folder."""
    where = Path(location)
    try:
        resolved = (folder / where).resolve()
    except (ValueError, OSError):  # a NUL byte, a name the file system refuses
        resolved = folder
    except RuntimeError:  # a link loop (Python < 3.13): _check_data_file says so
        resolved = folder / where
    if (
        not location
        or where.is_absolute()
        or ".." in where.parts
        or len(where.parts) != 1
        or resolved.parent != folder
    ):
        raise OnnxModelError(
            f"{str(path)!r} refers to external data at {location!r} (tensor {tensor!r}), "
            "outside the model's folder; onnxbridge reads external data only from a file beside "
            "the .onnx: re-save the model with its data file next to it"
        )
    return resolved


def _check_data_file(path: Path, file: Path, end: int) -> None:
    try:
        found = os.stat(file)
    except FileNotFoundError:
        raise OnnxModelError(
            f"{str(path)!r} keeps its tensors in {file.name!r}, which is missing beside it; "
            f"copy {file.name} together with {path.name} (they are one model)"
        ) from None
    except OSError as exc:  # a link loop, a name too long for the file system
        raise OnnxModelError(
            f"{str(path)!r} keeps its tensors in {file.name!r}, which cannot be read "
            f"({exc.strerror or exc}); copy the data file written with the model beside it"
        ) from exc
    if not stat.S_ISREG(found.st_mode):
        what = "a folder" if stat.S_ISDIR(found.st_mode) else "not a regular file"
        raise OnnxModelError(
            f"{str(path)!r} keeps its tensors in {file.name!r}, which is {what}, not the data "
            f"file; copy the {file.name} written with {path.name} in its place"
        )
    size = found.st_size
    if size < end:
        raise OnnxModelError(
            f"{str(path)!r} keeps its tensors in {file.name!r}, which is damaged: {size} bytes, "
            f"its tensors reach byte {end}; copy {file.name} again together with {path.name}"
        )


def model_files(path: str | os.PathLike[str], model: onnx.ModelProto | None = None) -> list[Path]:
    """The files of the model at ``path``: the ``.onnx`` first, then its external data files
    (checked as :func:`external_data_files` does)."""
    path = Path(path)
    return [path, *external_data_files(path, model)]


def total_bytes(path: str | os.PathLike[str]) -> int:
    """Bytes of the model at ``path`` with its external data files."""
    return sum(file.stat().st_size for file in model_files(path))


def read_model_bytes(path: str | os.PathLike[str], limit: int = PROTOBUF_LIMIT) -> bytes | None:
    """The model at ``path`` as one serialized message, its external data read in; None when
    that message would pass ``limit`` bytes (it could not be parsed back).

    Raises:
        OnnxModelError: its external data is outside its folder, missing or damaged.
    """
    path = Path(path)
    if not _uses_external_data(path):
        return path.read_bytes()
    model: Any = _load_graph(path)
    locations = external_data_locations(path, model)
    if not locations:
        return path.read_bytes()
    files = dict.fromkeys(locations.values())
    if path.stat().st_size + sum(file.stat().st_size for file in files) >= limit:
        return None
    # Read here, from the checked files (onnx's own loader refuses a data file that is a link,
    # even to a file beside it).
    for tensor, info in list(_external_tensors(model)):  # listed: the loop changes them
        offset, length = _span(path, tensor, info)
        with locations[info.get("location", "")].open("rb") as handle:
            handle.seek(offset)
            tensor.raw_data = handle.read(length)
        del tensor.external_data[:]
        tensor.data_location = onnx.TensorProto.DEFAULT
    return bytes(model.SerializeToString())


def model_sha256(path: str | os.PathLike[str]) -> str:
    """The content hash of the model at ``path``: the sha256 of the ``.onnx`` file when it has
    no external data; else a sha256 over the ``.onnx`` file's sha256 and each data file's name
    (as the graph refers to it) and sha256, so a changed data file changes it too and a renamed
    ``.onnx`` does not."""
    from onnxbridge._files import file_sha256

    files = model_files(path)
    if len(files) == 1:
        return file_sha256(files[0])
    digest = hashlib.sha256()
    digest.update(f"{file_sha256(files[0])}\n".encode())
    for file in files[1:]:
        digest.update(f"{file.name}\0{file_sha256(file)}\n".encode())
    return digest.hexdigest()


def unique_names(graph: Any) -> Callable[[str], str]:
    """``unique(base)``: a node / value name not yet used in ``graph`` (nor by earlier calls)."""
    taken = {n.name for n in graph.node} | {v for n in graph.node for v in n.output}
    taken |= {i.name for i in graph.input} | {i.name for i in graph.initializer}

    def unique(base: str) -> str:
        candidate, i = base, 0
        while candidate in taken:
            i += 1
            candidate = f"{base}_{i}"
        taken.add(candidate)
        return candidate

    return unique


def tree_runs(ids: np.ndarray, counts: np.ndarray, max_nodes: int) -> list[np.ndarray] | None:
    """``ids`` (trees, in order) cut into runs of at most ``max_nodes`` summed ``counts`` (at
    least one id a run), or None when they make a single run. The blocks of trees that
    convert writes and the runtime's tree-blocks rewrite make."""
    blocks: list[list[int]] = [[]]
    size = 0
    for tree, count in zip(ids.tolist(), counts.tolist(), strict=True):
        if blocks[-1] and size + count > max_nodes:
            blocks.append([])
            size = 0
        blocks[-1].append(tree)
        size += count
    if len(blocks) < 2:
        return None
    return [np.asarray(b, dtype=np.int64) for b in blocks]
