"""What a model predicted: :class:`PredictionResult`, and the decoding of a graph's outputs into
one by the outputs' roles (labels, probabilities, scores, values, transformed columns)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from onnxbridge._meta import ModelMetadata, role_parts, target_role
from onnxbridge.errors import InferenceError

__all__ = ["OutputDecoder", "PredictionResult", "check_output_rows"]


@dataclass(slots=True)
class PredictionResult:
    """What a model predicted for ``N`` rows.

    Attributes:
        labels: ``[N]`` class labels (classifiers), else None.
        probabilities: ``[N, C]`` class probabilities in ``classes`` order, else None.
        scores: ``[N, C]`` (or ``[N, 1]``) decision scores, for classifiers without
            ``predict_proba`` (``SVC()``, ``RidgeClassifier``, ...), else None.
        values: ``[N]`` or ``[N, T]`` predictions (regressors), else None.
        classes: class labels in probability-column order, if known (one list per target for
            a multi-output classifier).
        transformed: ``[N, K]`` a transformer's output, else None.
        targets: a multi-output classifier's result per target, in target order (each with
            its ``labels [N]``, ``probabilities [N, C_t]`` and ``classes``); ``labels`` is then
            ``[N, T]``, as scikit-learn's ``predict``. None for other models.
    """

    labels: np.ndarray | None = None
    probabilities: np.ndarray | None = None
    values: np.ndarray | None = None
    classes: list[Any] | None = None
    scores: np.ndarray | None = None
    transformed: np.ndarray | None = None
    targets: list[PredictionResult] | None = None

    def __len__(self) -> int:
        for array in (self.labels, self.values, self.probabilities, self.scores, self.transformed):
            if array is not None:
                return len(array)
        return 0

    def to_frame(self) -> pd.DataFrame:
        """One row per input row: ``label`` then ``proba_<class>`` (or ``score_<class>``)
        columns for classifiers, ``prediction`` for regressors, ``out_<j>`` for transformers;
        ``label_<t>`` and ``proba_<t>_<class>`` per target ``t`` for multi-output classifiers.

        Raises:
            InferenceError: the outputs do not have one row each per input row (a faulty graph).
        """
        if self.targets is not None:
            return self._targets_frame()
        lengths = {
            role: len(array)
            for role, array in (
                ("label", self.labels),
                ("probabilities", self.probabilities),
                ("scores", self.scores),
                ("value", self.values),
                ("transformed", self.transformed),
            )
            if array is not None
        }
        check_output_rows(lengths)
        columns: dict[str, Any] = {}
        if self.labels is not None:
            columns["label"] = self.labels
        if self.probabilities is not None:
            classes = self.classes or list(range(self.probabilities.shape[1]))
            for i, cls in enumerate(classes):
                columns[f"proba_{cls}"] = self.probabilities[:, i]
        if self.scores is not None:
            n_scores = self.scores.shape[1]
            names = list(self.classes or [])
            if len(names) != n_scores:
                # A binary model may give one score: the positive class's.
                names = names[-n_scores:] if len(names) > n_scores else list(range(n_scores))
            for i, cls in enumerate(names):
                columns[f"score_{cls}"] = self.scores[:, i]
        if self.values is not None:
            values = self.values
            if values.ndim == 1 or values.shape[1] == 1:
                columns["prediction"] = values.reshape(len(values))
            else:
                for j in range(values.shape[1]):
                    columns[f"prediction_{j}"] = values[:, j]
        if self.transformed is not None:
            matrix = self.transformed.reshape(len(self.transformed), -1)
            for j in range(matrix.shape[1]):
                columns[f"out_{j}"] = matrix[:, j]
        return pd.DataFrame(columns)

    def _targets_frame(self) -> pd.DataFrame:
        targets = self.targets or []
        lengths: dict[str, int] = {}
        for t, part in enumerate(targets):
            for role, array in (("label", part.labels), ("probabilities", part.probabilities)):
                if array is not None:
                    lengths[target_role(role, t)] = len(array)
        check_output_rows(lengths)
        columns: dict[str, Any] = {}
        for t, part in enumerate(targets):
            columns[f"label_{t}"] = part.labels
            if part.probabilities is not None:
                classes = part.classes or list(range(part.probabilities.shape[1]))
                for i, cls in enumerate(classes):
                    columns[f"proba_{t}_{cls}"] = part.probabilities[:, i]
        return pd.DataFrame(columns)


def _stack_target_labels(labels: Sequence[np.ndarray]) -> np.ndarray:
    """``[N, T]`` labels from one ``[N]`` array per target, as scikit-learn's ``predict``
    gives them: one dtype when every target has it, else objects (no label turns into text)."""
    if not labels:
        return np.zeros((0, 0))
    kinds = {array.dtype for array in labels}
    if len(kinds) == 1:
        return np.column_stack(labels)
    stacked = np.empty((len(labels[0]), len(labels)), dtype=object)
    for t, array in enumerate(labels):
        stacked[:, t] = array
    return stacked


@dataclass(frozen=True, slots=True)
class _TargetOutputs:
    """Where one target of a multi-output classifier is among the outputs."""

    label_at: int
    probabilities_at: int | None
    classes: list[Any] | None
    restore: bool


def _target_layout(
    role_index: Mapping[str, int], classes: list[Any] | None
) -> list[_TargetOutputs] | None:
    """Per target, in target order, its outputs' positions; None for single-target models."""
    labels = {}
    for role, index in role_index.items():
        base, target = role_parts(role)
        if base == "label" and target is not None:
            labels[target] = index
    if not labels:
        return None
    layout = []
    for t in sorted(labels):
        own = classes[t] if classes is not None and t < len(classes) else None
        layout.append(
            _TargetOutputs(
                label_at=labels[t],
                probabilities_at=role_index.get(target_role("probabilities", t)),
                classes=own,
                restore=own is not None and np.asarray(own).dtype.kind in "bf",
            )
        )
    return layout


def check_output_rows(lengths: Mapping[str, int], rows: int | None = None) -> None:
    """Raise unless every output has the same number of rows (``rows``, the input's, if given).

    Args:
        lengths: output (or role) name → its number of rows.
        rows: the number of input rows, when known.

    Raises:
        InferenceError: naming the outputs and their lengths; the graph is faulty.
    """
    wanted = {rows} if rows is not None else set()
    if len(set(lengths.values()) | wanted) <= 1:
        return
    shown = ", ".join(f"{name} {n}" for name, n in lengths.items())
    given = f" for {rows} input rows" if rows is not None else ""
    raise InferenceError(
        f"the model's outputs have different numbers of rows ({shown}){given}, so they cannot "
        "be put side by side one row per input row; the ONNX graph is faulty: re-export it "
        "(`onnxbridge convert`) or check the exporter"
    )


class OutputDecoder:
    """Turns a model's outputs, in graph order, into a :class:`PredictionResult`.

    Which roles exist, where they are and whether labels need restoring are worked out once,
    here: :meth:`decode` runs on every call.

    Args:
        metadata: the model's onnxbridge metadata (None for a model from elsewhere).
        output_names: the graph's outputs, in order.
    """

    def __init__(self, metadata: ModelMetadata | None, output_names: list[str]) -> None:
        roles = dict(metadata.outputs) if metadata else {}
        if not roles:
            # A model from elsewhere: label + probabilities, or one value output.
            if len(output_names) >= 2:
                roles = {"label": output_names[0], "probabilities": output_names[1]}
            else:
                roles = {"value": output_names[0]}
        self.roles = roles
        self._role_index = {
            role: output_names.index(name) for role, name in roles.items() if name in output_names
        }
        self._classes = metadata.classes if metadata else None
        # A multi-output classifier: per target, its label and probabilities outputs.
        self._targets = _target_layout(self._role_index, self._classes)
        # Labels need mapping back only for bool / float classes (see _restore_labels).
        self._restore = (
            self._targets is None
            and self._classes is not None
            and np.asarray(self._classes).dtype.kind in "bf"
        )
        # The common case, labels + probabilities tensors as they are, gets a shortcut.
        self._plain_classifier = set(roles) == {"label", "probabilities"} and not self._restore
        self._label_at = self._role_index.get("label", -1)
        self._probabilities_at = self._role_index.get("probabilities", -1)

    def decode(self, outputs: list[Any]) -> PredictionResult:
        """Outputs in graph order → a :class:`PredictionResult` by the outputs' roles."""
        if self._plain_classifier:
            labels, probabilities = outputs[self._label_at], outputs[self._probabilities_at]
            if (
                type(labels) is np.ndarray
                and labels.ndim == 1
                and type(probabilities) is np.ndarray
                and probabilities.ndim == 2
            ):
                return PredictionResult(labels, probabilities, None, self._classes)
        if self._targets is not None:
            return self._targets_result(outputs)
        result = PredictionResult()
        index = self._role_index.get("label")
        if index is not None:
            labels = outputs[index]
            if type(labels) is not np.ndarray or labels.ndim != 1:
                labels = np.asarray(labels).reshape(-1)
            result.labels = _restore_labels(labels, self._classes) if self._restore else labels
        for role in ("probabilities", "scores"):
            index = self._role_index.get(role)
            if index is not None:
                raw = outputs[index]
                if type(raw) is np.ndarray:
                    matrix, classes = raw, self._classes
                else:
                    matrix, classes = _probabilities(raw, self._classes)
                if matrix.ndim == 1:
                    matrix = matrix.reshape(-1, 1)
                setattr(result, role, matrix)
                result.classes = classes
        index = self._role_index.get("value")
        if index is not None:
            values = np.asarray(outputs[index])
            if values.ndim == 2 and values.shape[1] == 1:
                values = values.reshape(-1)
            result.values = values
        index = self._role_index.get("transformed")
        if index is not None:
            result.transformed = np.asarray(outputs[index])
        return result

    def _targets_result(self, outputs: list[Any]) -> PredictionResult:
        """A multi-output classifier's outputs → one result per target, labels ``[N, T]``."""
        parts = []
        for target in self._targets or []:
            labels = np.asarray(outputs[target.label_at]).reshape(-1)
            if target.restore:
                labels = _restore_labels(labels, target.classes)
            probabilities = None
            if target.probabilities_at is not None:
                probabilities, _ = _probabilities(outputs[target.probabilities_at], None)
            parts.append(
                PredictionResult(labels=labels, probabilities=probabilities, classes=target.classes)
            )
        return PredictionResult(
            labels=_stack_target_labels([p.labels for p in parts if p.labels is not None]),
            classes=self._classes,
            targets=parts,
        )


def _restore_labels(labels: np.ndarray, classes: list[Any] | None) -> np.ndarray:
    """Give labels the type of the training classes.

    ONNX labels are int64 or string; skl2onnx writes bool and (integral) float classes as int64,
    so ``True`` comes back as ``1``. Map them back so predictions equal scikit-learn's.
    """
    if classes is None or labels.dtype.kind not in "iu":
        return labels
    values = np.asarray(classes)
    if values.dtype.kind not in "bf":
        return labels
    keys = values.astype(np.int64)
    order = np.argsort(keys)
    sorted_keys = keys[order]
    pos = np.clip(np.searchsorted(sorted_keys, labels), 0, len(sorted_keys) - 1)
    if not np.array_equal(sorted_keys[pos], labels):
        return labels
    return values[order][pos]


def _probabilities(raw: Any, classes: list[Any] | None) -> tuple[np.ndarray, list[Any] | None]:
    if isinstance(raw, list):
        # ZipMap output: one {class: probability} dict per row.
        keys = classes if classes is not None else (list(raw[0].keys()) if raw else [])
        matrix = np.array([[row[k] for k in keys] for row in raw], dtype=np.float32)
        return matrix, list(keys)
    return np.asarray(raw), classes
