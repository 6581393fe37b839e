"""The onnxbridge metadata carried in an ONNX file's ``metadata_props``.

With it the ``.onnx`` file alone is enough to predict and serve: it names the feature columns and
their training dtypes, how they map onto graph inputs, the task, the class labels and which graph
output holds labels, probabilities or values. Every value is a string; structured values are JSON.

Keys (all prefixed ``onnxbridge.``): ``format``, ``task``, ``target``, ``features``, ``inputs``,
``outputs``, ``classes``, ``estimator``, ``opsets``, ``versions``, ``missing_values``,
``missing_by_column``.

``missing_by_column`` (``{column: "accepted" | "refused"}``) says per feature column whether the
source model predicts on a row whose value there is missing; ``missing_values`` sums it up for
readers that know only the one word (``"refused"`` when any column is refused). A model written
before the per-column record has only ``missing_values``: ``"refused"`` then means every column.

It also holds the one table of ONNX Runtime element types and their numpy types. This module
sits below convert, runtime, serve and score, and imports neither scikit-learn nor skl2onnx.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from onnxbridge._values import cast_values, refuse_table_misfits
from onnxbridge.data import FeatureSchema

__all__ = [
    "INPUT_DTYPES",
    "METADATA_PREFIX",
    "ORT_TO_NUMPY",
    "ModelMetadata",
    "input_block",
    "read_metadata",
    "role_parts",
    "target_role",
    "write_metadata",
]

METADATA_PREFIX = "onnxbridge."
METADATA_FORMAT = "1"
_JSON_KEYS = (
    "features",
    "inputs",
    "outputs",
    "classes",
    "opsets",
    "versions",
    "missing_by_column",
)
ACCEPTED = "accepted"
REFUSED = "refused"
# The element types a graph input recorded in the metadata can have.
INPUT_DTYPES: dict[str, Any] = {
    "float32": np.float32,
    "float64": np.float64,
    "int64": np.int64,
    "string": np.object_,
}
# ONNX Runtime's type strings (``NodeArg.type``) and the numpy element types they hold.
ORT_TO_NUMPY: dict[str, Any] = {
    "tensor(float)": np.float32,
    "tensor(double)": np.float64,
    "tensor(float16)": np.float16,
    "tensor(int64)": np.int64,
    "tensor(int32)": np.int32,
    "tensor(int8)": np.int8,
    "tensor(uint8)": np.uint8,
    "tensor(bool)": np.bool_,
    "tensor(string)": np.object_,
}


def target_role(role: str, target: int) -> str:
    """The role (and graph output name) of one target of a multi-output classifier:
    ``target_role("label", 0) == "label_0"``."""
    return f"{role}_{target}"


def role_parts(role: str) -> tuple[str, int | None]:
    """``(role, target)`` of an output role: ``"label_1" -> ("label", 1)``,
    ``"label" -> ("label", None)``.

    A multi-output classifier has one ``label_<t>`` and one ``probabilities_<t>`` role per
    target ``t`` (in target order); every other model has plain roles.
    """
    base, sep, suffix = role.rpartition("_")
    if sep and base and suffix.isdigit():
        return base, int(suffix)
    return role, None


@dataclass
class ModelMetadata:
    """What onnxbridge records about a converted model.

    Attributes:
        task: ``"classification"`` or ``"regression"``.
        features: the feature columns in training order.
        inputs: graph inputs: ``[{"name": "input", "dtype": "float32", "columns": [...]}]``.
        outputs: role → graph output name: ``{"label": ..., "probabilities": ...}`` or
            ``{"value": ...}``; a multi-output classifier has ``label_<t>`` and
            ``probabilities_<t>`` per target (:func:`role_parts`).
        classes: class labels in probability-column order (classifiers); one such list per
            target for a multi-output classifier.
        target: the target column name, if known.
        estimator: the estimator's description (spec string or class name).
        opsets: ``{"": 22, "ai.onnx.ml": 3}``.
        versions: library versions at conversion.
        missing_values: ``"accepted"`` when the source model predicts on rows with missing
            values (NaN) in any column, ``"refused"`` when it raises on them in some column,
            None when unknown.
        missing_by_column: ``{column: "accepted" | "refused"}``: the same, per feature column
            (None for models converted before it was recorded).
    """

    task: str
    features: FeatureSchema
    inputs: list[dict[str, Any]]
    outputs: dict[str, str]
    classes: list[Any] | None = None
    target: str | None = None
    estimator: str | None = None
    opsets: dict[str, int] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    missing_values: str | None = None
    missing_by_column: dict[str, str] | None = None

    def refuses_missing(self) -> bool:
        """Whether some column's missing values make the source model raise."""
        return bool(self.missing_refused_columns())

    def missing_refused_columns(self) -> list[str]:
        """The feature columns where a missing value makes the source model raise, in
        training order (every column for an older model recorded as ``"refused"``)."""
        if self.missing_by_column is not None:
            return [
                name for name in self.features.names if self.missing_by_column.get(name) == REFUSED
            ]
        return list(self.features.names) if self.missing_values == REFUSED else []

    def accepts_missing_everywhere(self) -> bool:
        """Whether the source model is known to predict with a missing value in any column."""
        if self.missing_by_column is not None:
            return all(self.missing_by_column.get(n) == ACCEPTED for n in self.features.names)
        return self.missing_values == ACCEPTED

    def to_props(self) -> dict[str, str]:
        """``metadata_props`` entries (string → string)."""
        values: dict[str, Any] = {
            "format": METADATA_FORMAT,
            "task": self.task,
            "target": self.target,
            "estimator": self.estimator,
            "features": self.features.to_list(),
            "inputs": self.inputs,
            "outputs": self.outputs,
            "classes": self.classes,
            "opsets": self.opsets,
            "versions": self.versions,
            "missing_values": self.missing_values,
            "missing_by_column": self.missing_by_column,
        }
        props = {}
        for key, value in values.items():
            if value is None:
                continue
            props[METADATA_PREFIX + key] = json.dumps(value) if key in _JSON_KEYS else str(value)
        return props

    @classmethod
    def from_props(cls, props: dict[str, str]) -> ModelMetadata | None:
        """Read the metadata back; ``None`` when the model has no onnxbridge metadata."""
        ours = {
            k[len(METADATA_PREFIX) :]: v for k, v in props.items() if k.startswith(METADATA_PREFIX)
        }
        if "task" not in ours or "features" not in ours:
            return None
        try:
            parsed: dict[str, Any] = {
                k: json.loads(v) if k in _JSON_KEYS else v for k, v in ours.items()
            }
        except ValueError:
            return None
        return cls(
            task=parsed["task"],
            features=FeatureSchema.from_list(parsed["features"]),
            inputs=parsed.get("inputs") or [],
            outputs=parsed.get("outputs") or {},
            classes=parsed.get("classes"),
            target=parsed.get("target"),
            estimator=parsed.get("estimator"),
            opsets={str(k): int(v) for k, v in (parsed.get("opsets") or {}).items()},
            versions=parsed.get("versions") or {},
            missing_values=parsed.get("missing_values"),
            missing_by_column=parsed.get("missing_by_column"),
        )


def write_metadata(model: Any, metadata: ModelMetadata) -> None:
    """Set the onnxbridge entries of ``model.metadata_props`` (replacing earlier ones)."""
    keep = [p for p in model.metadata_props if not p.key.startswith(METADATA_PREFIX)]
    del model.metadata_props[:]
    for prop in keep:
        model.metadata_props.add(key=prop.key, value=prop.value)
    for key, value in metadata.to_props().items():
        model.metadata_props.add(key=key, value=value)


def read_metadata(model: Any) -> ModelMetadata | None:
    """The onnxbridge metadata of an ``onnx.ModelProto``, or ``None``."""
    return ModelMetadata.from_props({p.key: p.value for p in model.metadata_props})


def input_block(
    frame: pd.DataFrame, columns: list[str], dtype: str, *, check: bool = False
) -> np.ndarray:
    """The ``[N, len(columns)]`` array a graph input takes, from a frame's columns.

    Numbers, booleans and missing values (NaN) are cast to ``dtype``; for string inputs each
    value becomes ``str`` and a missing value the empty string (ONNX string tensors have no
    missing value; onnxbridge's converters treat ``""`` as missing).

    Args:
        frame: the rows.
        columns: the columns the input takes, in order.
        dtype: the input's element type (a key of :data:`INPUT_DTYPES`).
        check: refuse values the element type cannot take (:mod:`onnxbridge._values`):
            ``inf``, a float64 value beyond float32's range, a non-integral value for int64.

    Raises:
        ValueError, TypeError: a value that cannot be cast (the caller names the column).
        SchemaMismatchError: with ``check``, a value that does not fit, by row and column.
    """
    block = frame[columns]
    if dtype == "string":
        values = block.to_numpy(dtype=object)
        missing = pd.isna(values)
        out = np.empty(values.shape, dtype=object)
        out[missing] = ""
        out[~missing] = [str(v) for v in values[~missing]]
        return out
    given = block.to_numpy(dtype=np.float64, na_value=np.nan)
    cast = cast_values(given, INPUT_DTYPES[dtype])
    if check:
        refuse_table_misfits(given, cast.dtype, cast, columns=columns)
    return cast
