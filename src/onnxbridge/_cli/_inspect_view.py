"""Rich rendering of a :class:`~onnxbridge._inspection.ModelSummary` for ``onnxbridge inspect``.

The tables fit an 80-column terminal (a pipe, a CI log) without cutting a cell: a header (file,
validity, producer, opsets), the inputs and outputs, the operators, the tree ensembles and the
metadata. Every string that comes from the model file is printed as plain text, never parsed as
rich markup (``float32[N,4]`` would be).
"""

from __future__ import annotations

import json

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from onnxbridge._inspection import ModelSummary

__all__ = ["format_opsets", "render_inspection"]

_ML_DOMAIN = "ai.onnx.ml"
# Longest metadata value shown; the rest is cut and marked with an ellipsis (--json has it all).
_MAX_VALUE_CHARS = 300


def format_opsets(opsets: dict[str, int]) -> str:
    """``{"": 15, "ai.onnx.ml": 1}`` -> ``"ai.onnx 15, ai.onnx.ml 1"``."""
    return ", ".join(f"{domain or 'ai.onnx'} {version}" for domain, version in opsets.items())


def render_inspection(summary: ModelSummary, console: Console) -> None:
    """Print the summary of one ONNX file as tables.

    Args:
        summary: What :func:`onnxbridge._inspection.inspect_model` returned.
        console: Where to print.
    """
    console.print(_header_table(summary))
    console.print(_io_table(summary))
    if summary.operators:
        console.print(_operators_table(summary))
    if summary.tree_ensembles:
        console.print(_trees_table(summary))
    if summary.metadata:
        console.print(_metadata_table(summary))


def _table(title: str, *, show_header: bool = True) -> Table:
    return Table(
        title=title,
        title_justify="left",
        title_style="bold",
        box=box.SIMPLE_HEAD,
        show_header=show_header,
        header_style="bold",
        pad_edge=False,
    )


def _status(ok: bool, problem: str | None) -> Text:
    if ok:
        return Text("yes", style="green")
    text = Text("no", style="bold red")
    if problem:
        text.append(f" — {_truncate(problem)}", style="red")
    return text


def _header_table(summary: ModelSummary) -> Table:
    table = _table("Model", show_header=False)
    table.add_column("field", style="bold", no_wrap=True)
    table.add_column("value", overflow="fold")
    producer = " ".join(p for p in (summary.producer_name, summary.producer_version) if p)
    opsets = ", ".join(f"{domain} {version}" for domain, version in summary.opsets.items())
    rows: list[tuple[str, Text]] = [
        ("File", Text(summary.path)),
        ("Size", Text(_human_size(summary.file_size_bytes))),
        ("SHA-256", Text(summary.sha256)),
        ("Valid (onnx.checker)", _status(summary.valid, summary.checker_message)),
        ("Loads in ONNX Runtime", _status(summary.loads_in_onnxruntime, summary.onnxruntime_error)),
        ("IR version", Text(str(summary.ir_version))),
        ("Producer", Text(producer or "-")),
        ("Model version", Text(str(summary.model_version))),
        ("Opsets", Text(opsets or "-")),
        ("Nodes", Text(str(summary.node_count))),
    ]
    if summary.graph_name:
        rows.insert(7, ("Graph", Text(summary.graph_name)))
    for offset, (name, size) in enumerate(summary.external_data.items()):
        # Right below the .onnx's own size: the tensors' bytes are in this file.
        rows.insert(2 + offset, ("External data", Text(f"{name}, {_human_size(size)}")))
    if summary.doc_string:
        rows.append(("Doc string", Text(_truncate(summary.doc_string))))
    for label, value in rows:
        table.add_row(label, value)
    return table


def _io_table(summary: ModelSummary) -> Table:
    table = _table("Inputs and outputs")
    table.add_column("", style="dim", no_wrap=True)
    table.add_column("Name", overflow="fold")
    table.add_column("Type", style="cyan", overflow="fold")
    for kind, values in (("input", summary.inputs), ("output", summary.outputs)):
        for value in values:
            table.add_row(kind, Text(value.name), Text(value.type))
    return table


def _operators_table(summary: ModelSummary) -> Table:
    table = _table("Operators")
    table.add_column("Operator", overflow="fold")
    table.add_column("Count", justify="right")
    for op, count in summary.operators.items():
        table.add_row(Text(op), str(count))
    return table


def _trees_table(summary: ModelSummary) -> Table:
    table = _table("Tree ensembles")
    # The convention matters when comparing with scikit-learn, so say it where the number is.
    table.caption = "Nodes include leaves; depth counts the root as 0 (sklearn's tree_.max_depth)."
    table.caption_justify = "left"
    # Two-line headers and the operator without its usual domain keep the table within 80
    # columns (a pipe, a CI log); the Operators table above gives the full name.
    table.add_column("Operator", overflow="fold")
    table.add_column("Trees", justify="right", no_wrap=True)
    table.add_column("Nodes", justify="right", no_wrap=True)
    table.add_column("Leaves", justify="right", no_wrap=True)
    table.add_column("Max\ndepth", justify="right", no_wrap=True)
    table.add_column("Targets", justify="right", no_wrap=True)
    table.add_column("Post-\ntransform", overflow="fold")
    for tree in summary.tree_ensembles:
        table.add_row(
            Text(tree.op_type.removeprefix(f"{_ML_DOMAIN}.")),
            str(tree.n_trees),
            str(tree.n_nodes),
            str(tree.n_leaves),
            "-" if tree.max_depth is None else str(tree.max_depth),
            "-" if tree.n_targets is None else str(tree.n_targets),
            Text(tree.post_transform),
        )
    return table


def _metadata_table(summary: ModelSummary) -> Table:
    table = _table("Metadata")
    table.add_column("Key", style="bold", overflow="fold", max_width=30)
    table.add_column("Value", overflow="fold")
    for key, value in summary.metadata.items():
        table.add_row(Text(key), Text(_truncate(_compact(value))))
    return table


def _compact(value: str) -> str:
    """Re-print a JSON object or array on one line; leave any other string as it is."""
    stripped = value.strip()
    if not stripped.startswith(("{", "[")):
        return value
    try:
        parsed = json.loads(stripped)
    except ValueError:
        return value
    return json.dumps(parsed, ensure_ascii=False, separators=(", ", ": "))


def _truncate(text: str, limit: int = _MAX_VALUE_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _human_size(size: int) -> str:
    """Return e.g. ``649 bytes`` or ``8.2 KiB (8353 bytes)``."""
    if size < 1024:
        return f"{size} bytes"
    value = size / 1024
    for unit in ("KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            break
        value /= 1024
    return f"{value:.1f} {unit} ({size} bytes)"
