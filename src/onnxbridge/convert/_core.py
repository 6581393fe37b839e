"""Convert a fitted estimator to ONNX: schema → input types, options, opsets, metadata, checks.

No hand-written ``initial_types``: the graph inputs come from the feature schema. All-numeric
data becomes one float32 input named ``input`` of shape ``[None, n_features]``, unless the model
selects columns by name (a ColumnTransformer with column names): then, as for a table with text
columns, each column is its own ``[None, 1]`` input named after it. ZipMap is off unless
asked for, so classifiers output a label tensor ``[N]`` and a probability tensor ``[N, C]``. The
result must pass ``onnx.checker`` and load and run in ONNX Runtime before it is returned.
"""

from __future__ import annotations

import numbers
import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from onnxbridge._meta import ModelMetadata, input_block, write_metadata
from onnxbridge.bundle import (
    ONNX_NAME,
    Bundle,
    library_versions,
    now_iso,
)
from onnxbridge.convert._check import ConversionCheck
from onnxbridge.convert._folding import fold_scaling_into_linear
from onnxbridge.convert._given_rows import conversion_rows
from onnxbridge.convert._opsets import (
    OpsetChoice,
    choose_opsets,
    fallback_opsets,
    onnxruntime_runs_tree_ensemble,
)
from onnxbridge.convert._registry import accepts_option, load_converters, tree_default_options
from onnxbridge.convert._roles import model_task, output_roles, reference_method, target_classes
from onnxbridge.data import FeatureSchema, blank_values, normalize_features
from onnxbridge.errors import (
    ConversionError,
    DataError,
    MissingConverterError,
    ModelNotFittedError,
    first_line,
)

__all__ = [
    "PRECISIONS",
    "ConversionResult",
    "convert_bundle",
    "convert_estimator",
    "convert_unchecked",
    "graph_inputs",
    "selects_columns_by_name",
]

INPUT_NAME = "input"
# float: float32 input and arithmetic (ONNX Runtime's fast path); double: float64 input;
# auto: float unless that changes results (see convert_estimator).
PRECISIONS = ("auto", "float", "double")
# A tree ensemble of more nodes (TreeEnsemble, TreeEnsembleRegressor, TreeEnsembleClassifier)
# is written as several nodes of whole trees, this many nodes at most each, and a Sum (a Concat
# where each block writes columns of its own)
# (onnxbridge.convert._tree_v5): ONNX Runtime loads blocks faster, in less memory, than one
# node of the whole ensemble.
TREE_BLOCK_NODES = 1 << 20


@dataclass
class ConversionResult:
    """A converted model and what was chosen to make it.

    Attributes:
        model: the ``onnx.ModelProto``.
        metadata: what was written into ``metadata_props``.
        opsets: the target opsets.
        zipmap: whether classifier probabilities go through ZipMap.
        precision: ``"float"`` or ``"double"``: what the input and arithmetic use.
        notes: what was decided on the way, for the user (e.g. why precision switched).
        path: where the model was written, if it was.
        check: what the comparison with scikit-learn before writing found (rows compared,
            differences, the diverging step); None for :func:`convert_unchecked`.
    """

    model: Any
    metadata: ModelMetadata
    opsets: OpsetChoice
    zipmap: bool
    precision: str = "float"
    notes: list[str] = field(default_factory=list)
    path: Path | None = None
    check: ConversionCheck | None = None
    # The ONNX Runtime session opened to check that the model loads, reused by the comparisons
    # that follow (loading a big forest is most of a conversion's time); dropped before
    # convert_estimator returns, so that a result does not hold the runtime's memory.
    _session: Any = field(default=None, init=False, repr=False, compare=False)

    def save(self, path: str | Path, *, external_data: bool | None = None) -> Path:
        """Write the model atomically to ``path``; returns the path.

        Args:
            path: the ``.onnx`` file.
            external_data: True writes the tensors to ``<name>.data`` beside ``path``; None
                (default) does so only when the model would pass the 2 GiB protobuf limit.
        """
        from onnxbridge._onnxfile import save_model

        path = Path(path)
        save_model(self.model, path, external_data=external_data)
        self.path = path
        return path


# Estimators whose input is not a table of columns, and why ONNX (or onnxbridge's one-row-in,
# one-row-out contract) cannot take it: refused before the sample is read, with what to do.
_NOT_TABULAR: dict[str, str] = {
    "DictVectorizer": (
        "takes a dict per row: no ONNX operator takes a sequence of dicts (an ONNX map is one "
        "row, of one value type)"
    ),
    "FeatureHasher": (
        "takes a dict or a list of names per row: no ONNX operator takes a sequence of dicts, "
        "and a list per row is no tensor"
    ),
    "MultiLabelBinarizer": (
        "takes a list of labels of any length per row: a graph input is a rectangular tensor"
    ),
    "PatchExtractor": (
        "makes many patches of each image: no output row per input row, which predict, "
        "validate and score need"
    ),
}


def _refuse_non_tabular(estimator: Any) -> None:
    name = type(_final_step(estimator)).__name__
    why = _NOT_TABULAR.get(name)
    if why is not None:
        raise ConversionError(
            f"{name} {why}; convert the model that follows it, fitted on the "
            f"{name}'s output columns"
        )


def _multi_output_classes() -> tuple[type, ...]:
    from sklearn.multioutput import ClassifierChain, MultiOutputClassifier

    return (ClassifierChain, MultiOutputClassifier)


def _plain(values: np.ndarray) -> list[Any]:
    """Class labels as plain Python values (JSON-ready)."""
    return [v.item() if isinstance(v, np.generic) else v for v in values]


def _final_step(estimator: Any) -> Any:
    while hasattr(estimator, "steps"):
        estimator = estimator.steps[-1][1]
    return estimator


def _check_fitted(estimator: Any) -> None:
    from sklearn.exceptions import NotFittedError
    from sklearn.utils.validation import check_is_fitted

    try:
        check_is_fitted(estimator)
    except NotFittedError as exc:
        raise ModelNotFittedError(
            f"{type(estimator).__name__} is not fitted; call fit() (or `onnxbridge train`) "
            "before converting"
        ) from exc
    except TypeError as exc:
        raise ConversionError(
            f"{type(estimator).__name__} is not a scikit-learn estimator"
        ) from exc


def sample_rows(rows: pd.DataFrame, n: int = 100) -> pd.DataFrame:
    """The ``n`` sample rows convert takes from a table: complete rows first (the ones the
    source model certainly scores, so its check compares them), then rows with missing values,
    each in the table's order."""
    complete = rows.notna().all(axis=1).to_numpy()
    return pd.concat([rows[complete].head(n), rows[~complete].head(n)]).head(n)


def _sample_frame(sample: Any, feature_names: list[str] | None) -> pd.DataFrame:
    if isinstance(sample, pd.DataFrame):
        frame = sample
    else:
        try:
            array = np.asarray(sample)
        except ValueError as exc:  # ragged rows (lists of labels, ...)
            raise DataError(
                f"sample data is not a table ({first_line(exc)}); pass a DataFrame or a 2-D "
                "array of a few training rows"
            ) from exc
        if array.ndim != 2:
            raise DataError(
                f"sample data must be 2-D [rows, features], got shape {array.shape}; pass a "
                "DataFrame or a 2-D array of a few training rows"
            )
        names = feature_names or [f"x{i}" for i in range(array.shape[1])]
        if len(names) != array.shape[1]:
            raise DataError(
                f"sample data has {array.shape[1]} columns but the model was fitted on "
                f"{len(names)} features; pass rows with the training columns"
            )
        frame = pd.DataFrame(array, columns=names)
    if len(frame) == 0:
        raise DataError("sample data has no rows; pass at least one training row")
    frame = frame.copy()
    frame.columns = [str(c) for c in frame.columns]
    return normalize_features(frame)


def _lightgbm_name(name: str) -> str:
    """LightGBM's spelling of a column name: it replaces spaces and JSON characters by ``_``."""
    return re.sub(r'[\s",:\[\]{}]', "_", name)


def _training_columns(estimator: Any, frame: pd.DataFrame) -> pd.DataFrame:
    """The sample's columns in the order the model was fitted on, checked.

    A LightGBM model records its columns with spaces turned into ``_``; the sample may use
    the original names, which are kept (they are what users' data has).
    """
    names = getattr(estimator, "feature_names_in_", None)
    if names is None:
        _check_sample_matches(estimator, frame)
        return frame
    names = [str(n) for n in names]
    if not set(names) <= set(frame.columns):
        spelled = {_lightgbm_name(c): c for c in frame.columns}
        if set(names) <= set(spelled) and len(spelled) == frame.shape[1]:
            return frame[[spelled[n] for n in names]]
    _check_sample_matches(estimator, frame)
    return frame[names]


def _check_sample_matches(estimator: Any, frame: pd.DataFrame) -> None:
    expected = getattr(estimator, "feature_names_in_", None)
    if expected is not None:
        expected = [str(c) for c in expected]
        missing = [c for c in expected if c not in frame.columns]
        extra = [c for c in frame.columns if c not in expected]
        if missing or extra:
            parts = []
            if missing:
                parts.append(f"missing {', '.join(map(repr, missing))}")
            if extra:
                parts.append(f"unexpected {', '.join(map(repr, extra))}")
            raise DataError(
                f"sample columns do not match the columns the model was fitted on: "
                f"{'; '.join(parts)}; pass rows of the training data"
            )
    n_in = getattr(estimator, "n_features_in_", None)
    # CatBoost reads 0 here after a skops round trip: only a positive count is checked.
    if n_in and expected is None and frame.shape[1] != n_in:
        raise DataError(
            f"sample data has {frame.shape[1]} columns but the model expects {n_in}; "
            "pass rows of the training data"
        )


def _supported_names() -> str:
    try:
        from skl2onnx import supported_converters

        names = sorted(
            {n.replace("Sklearn", "", 1) for n in supported_converters(from_sklearn=False)}
        )
    except Exception:
        return "see skl2onnx.supported_converters()"
    return f"{len(names)} estimators are supported, e.g. " + ", ".join(names[:12]) + ", …"


def _wrap_conversion_error(exc: Exception, estimator: Any) -> ConversionError:
    text = first_line(exc)
    name = type(estimator).__name__
    missing_markers = ("Unable to find a shape calculator", "Unable to find converter")
    if (
        any(m in str(exc) for m in missing_markers)
        or type(exc).__name__ == "MissingShapeCalculator"
    ):
        culprit = name
        for candidate in _walk(estimator):
            if f"'{type(candidate)}'" in str(exc) or type(candidate).__name__ in str(exc):
                culprit = type(candidate).__name__
        return MissingConverterError(
            f"no ONNX converter for {culprit}; {_supported_names()} "
            '(`python -c "import skl2onnx; print(skl2onnx.supported_converters())"` lists all)'
        )
    # A converter's own refusal may name arguments of ours (sample=, opset=): keep them named.
    return ConversionError(
        f"converting {name} to ONNX failed: {text}", arguments=getattr(exc, "arguments", ())
    )


def _walk(estimator: Any) -> list[Any]:
    found = [estimator]
    for step in getattr(estimator, "steps", []) or []:
        found.extend(_walk(step[1]))
    return found


def _has_zipmap(model: Any) -> bool:
    return any(node.op_type == "ZipMap" for node in model.graph.node)


def _check_loads(model: Any, frame: pd.DataFrame, inputs: list[dict[str, Any]]) -> Any:
    """Check the graph (onnx.checker) and run it on a few rows; returns the session."""
    import onnx
    import onnxruntime as ort

    from onnxbridge._onnxfile import loadable

    with loadable(model) as source:  # over 2 GiB: a temporary copy with external data
        try:
            onnx.checker.check_model(source)
        except Exception as exc:
            raise ConversionError(f"the converted graph fails onnx.checker: {exc}") from exc
        options = ort.SessionOptions()
        options.log_severity_level = 3  # errors only; shape warnings are not the user's concern
        try:
            session = ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])
            head = frame.head(5)
            feeds = {i["name"]: input_block(head, i["columns"], i["dtype"]) for i in inputs}
            session.run(None, feeds)
            return session
        except Exception as exc:
            raise ConversionError(
                f"the converted graph does not run in onnxruntime: {first_line(exc)}; "
                "try another opset=",
                arguments=("opset",),
            ) from exc


def convert_estimator(
    estimator: Any,
    sample: Any,
    *,
    opset: int | None = None,
    ml_opset: int | None = None,
    tree_block_nodes: int = TREE_BLOCK_NODES,
    zipmap: bool = False,
    precision: str = "auto",
    target: str | None = None,
    description: str | None = None,
    fold: bool = True,
    categories: Mapping[str, Sequence[Any]] | None = None,
    allow_divergent: bool = False,
) -> ConversionResult:
    """Convert a fitted scikit-learn estimator or pipeline to a checked ONNX model.

    Classifiers, regressors, clusterers, outlier detectors and transformers convert; the
    outputs' roles (label, probabilities, scores, value, transformed) are recorded in the
    metadata (see :mod:`onnxbridge.convert._roles`).

    Before the model is returned, scikit-learn and ONNX Runtime are compared on the sample rows
    and a few probe rows (:mod:`onnxbridge.convert._check`); what was found is
    :attr:`ConversionResult.check`. When they disagree the conversion is refused, naming the
    output and the pipeline step that diverge, unless ``allow_divergent``.

    Args:
        estimator: the fitted estimator.
        sample: a few training rows (DataFrame, or 2-D array); the input schema comes from them.
        opset: default-domain opset; the highest that skl2onnx and onnxruntime share if None
            (lower ones are tried when a converter refuses it).
        ml_opset: ``ai.onnx.ml`` opset; the highest that works if None.
        tree_block_nodes: a tree ensemble (``TreeEnsemble``, ``TreeEnsembleRegressor``,
            ``TreeEnsembleClassifier``) of more nodes than this becomes several such nodes of
            whole trees, each of at most this many nodes (a bigger tree alone), and a ``Sum``
            of their scores (a ``Concat`` where each block writes columns of its own): ONNX
            Runtime loads it faster and in less memory. 0: one node per ensemble.
        zipmap: keep skl2onnx's ZipMap (probabilities as a list of dicts) for classifiers.
        precision: ``"float"`` (float32 input), ``"double"`` (float64 input) or ``"auto"``
            (float32 unless that changes the model's decisions).
        target: the target column name, recorded in the metadata.
        description: how the estimator was specified (e.g. the ``--model`` spec).
        fold: fold a scaler before a linear model into its coefficients
            (:mod:`onnxbridge.convert._folding`); False keeps one node per pipeline step.
        allow_divergent: return a model that differs from scikit-learn anyway, with a
            warning (``UserWarning``) and a note; ``result.check.ok`` is then False.
            When no sample row could be compared (scikit-learn refuses every one), the model
            is returned unchecked (``result.check.ok`` None), with a warning and a note.
        categories: column -> values that column can hold, added to the sample's. A CatBoost
            model with ``cat_features`` keeps only hashes of its categories, so the graph knows
            exactly the categories found in ``sample`` and here: give every training category
            (or pass the training rows as ``sample``).

    Returns:
        The converted model, its metadata, the choices made and the check's findings.

    Raises:
        ModelNotFittedError, MissingConverterError, DataError, ConversionError (also when
        the ONNX graph differs from scikit-learn, unless ``allow_divergent``).
    """
    from onnxbridge.convert._steps import release_session

    opened: list[ConversionResult] = []
    try:
        return _convert_checked(
            estimator,
            sample,
            opset=opset,
            ml_opset=ml_opset,
            tree_block_nodes=tree_block_nodes,
            zipmap=zipmap,
            precision=precision,
            target=target,
            description=description,
            fold=fold,
            categories=categories,
            allow_divergent=allow_divergent,
            opened=opened,
        )
    finally:
        # The checks are done (or failed): free the runtime's copies of the models, also
        # when an exception's traceback keeps the results alive.
        release_session(*opened)


def _convert_checked(
    estimator: Any,
    sample: Any,
    *,
    opset: int | None,
    ml_opset: int | None,
    tree_block_nodes: int,
    zipmap: bool,
    precision: str,
    target: str | None,
    description: str | None,
    fold: bool,
    categories: Mapping[str, Sequence[Any]] | None,
    allow_divergent: bool,
    opened: list[ConversionResult],
) -> ConversionResult:
    from onnxbridge.convert._check import check_conversion
    from onnxbridge.convert._steps import release_session

    result = convert_unchecked(
        estimator,
        sample,
        opset=opset,
        ml_opset=ml_opset,
        tree_block_nodes=tree_block_nodes,
        zipmap=zipmap,
        precision=precision,
        target=target,
        description=description,
        fold=fold,
        categories=categories,
    )
    opened.append(result)
    names = getattr(estimator, "feature_names_in_", None)
    frame = _sample_frame(sample, None if names is None else [str(n) for n in names])
    frame = _training_columns(estimator, frame)
    result.check = check_conversion(estimator, result, frame)
    if result.check.ok is None:
        # Nothing compared proves nothing: refused like a divergence, unless allowed.
        if not allow_divergent:
            raise ConversionError(
                f"convert refused: nothing could be compared with scikit-learn: "
                f"{result.check.unchecked}; nothing was written. Pass sample rows the source "
                "model scores (e.g. rows without missing values), or pass allow_divergent=True "
                "to write it anyway, marked unchecked",
                arguments=("allow_divergent",),
            )
        warning = (
            f"NOT CHECKED: {result.check.unchecked}; written anyway because unchecked models "
            "were allowed"
        )
        warnings.warn(warning, UserWarning, stacklevel=2)
        result.notes.append(warning)
        return result
    also_double = ""  # what the float64 graph did, when auto tried it in vain
    if not result.check.ok and precision == "auto" and result.precision == "float":
        # auto means float32 unless that changes results: here it does, so try float64.
        first = result.check
        release_session(result)  # not two big sessions at once while the float64 graph loads
        try:
            double = convert_unchecked(
                estimator,
                sample,
                opset=opset,
                ml_opset=ml_opset,
                tree_block_nodes=tree_block_nodes,
                zipmap=zipmap,
                precision="double",
                target=target,
                description=description,
                fold=fold,
                categories=categories,
                missing_policy=False,
            )
        except ConversionError:
            double = None
        if double is not None:
            opened.append(double)
            # The same source model and rows: the float graph's policy, not asked again.
            policy = (result.metadata.missing_values, result.metadata.missing_by_column)
            _set_missing_policy(double, policy)
            double.check = check_conversion(estimator, double, frame)
            if double.check.ok:
                double.notes.append(
                    f"switched to double precision: in float32 {first.differing_rows} of "
                    f"{first.rows} checked rows differed from scikit-learn"
                )
                return double
            also_double = (
                f" (in float64 too: {double.check.differing_rows} of {double.check.rows} rows)"
            )
    if result.check.ok:
        return result
    if not allow_divergent:
        rounding = (
            " convert with precision='double' if float32 rounding is the cause,"
            if result.precision == "float" and precision != "auto"
            else ""
        )
        raise ConversionError(
            f"convert refused: the ONNX graph differs from scikit-learn: "
            f"{result.check.summary()}{also_double}; nothing was written. Fix or replace the "
            f"diverging converter (docs/convert.md),{rounding} or pass allow_divergent=True to "
            "write it anyway, marked unchecked",
            arguments=("precision", "allow_divergent"),
        )
    warning = (
        f"NOT CHECKED: the ONNX graph differs from scikit-learn: {result.check.summary()}"
        f"{also_double}; written anyway because divergent models were allowed"
    )
    warnings.warn(warning, UserWarning, stacklevel=2)
    result.notes.append(warning)
    return result


def convert_unchecked(
    estimator: Any,
    sample: Any,
    *,
    opset: int | None = None,
    ml_opset: int | None = None,
    tree_block_nodes: int = TREE_BLOCK_NODES,
    zipmap: bool = False,
    precision: str = "auto",
    target: str | None = None,
    description: str | None = None,
    fold: bool = True,
    categories: Mapping[str, Sequence[Any]] | None = None,
    missing_policy: bool = True,
) -> ConversionResult:
    """Convert a fitted scikit-learn estimator or pipeline to an ONNX model that loads and runs,
    without comparing it with scikit-learn (:func:`convert_estimator` does).

    Arguments as for :func:`convert_estimator` (without ``allow_divergent``), and
    ``missing_policy``: False leaves out asking scikit-learn which columns it takes missing
    values in, for a conversion that is only compared; the metadata then records every column
    as refusing them (``missing_values="refused"``), the safe side.

    Raises:
        ModelNotFittedError, MissingConverterError, ConversionError, DataError.
    """
    from onnxbridge.train import class_labels

    if precision not in PRECISIONS:
        raise ConversionError(
            f"precision={precision!r} is not supported; use one of {', '.join(PRECISIONS)}",
            arguments=("precision",),
        )
    if isinstance(tree_block_nodes, bool) or not isinstance(tree_block_nodes, numbers.Integral):
        raise ConversionError(
            f"tree_block_nodes={tree_block_nodes!r} is not a whole number; pass a number of "
            f"nodes (default {TREE_BLOCK_NODES}), or 0 for one operator per tree ensemble",
            arguments=("tree_block_nodes",),
        )
    if tree_block_nodes < 0:
        raise ConversionError(
            f"tree_block_nodes={tree_block_nodes} is negative; pass a number of nodes "
            f"(default {TREE_BLOCK_NODES}), or 0 for one operator per tree ensemble",
            arguments=("tree_block_nodes",),
        )
    tree_block_nodes = int(tree_block_nodes)
    _check_fitted(estimator)
    _refuse_non_tabular(estimator)
    task = model_task(estimator)
    per_target = target_classes(estimator)
    if per_target is not None and not isinstance(_final_step(estimator), _multi_output_classes()):
        raise ConversionError(
            f"{type(estimator).__name__} predicts several targets at once (one class list per "
            "target); onnxbridge converts multi-output classifiers as MultiOutputClassifier or "
            "ClassifierChain: fit one of those around a single-target classifier, or convert "
            "one classifier per target"
        )
    names = getattr(estimator, "feature_names_in_", None)
    frame = _sample_frame(sample, None if names is None else [str(n) for n in names])
    # The graph takes columns in training order, whatever the sample's order.
    frame = _training_columns(estimator, frame)
    if precision == "auto":
        # Float32 unless that flips tree decisions (onnxbridge.convert._precision).
        from onnxbridge.convert._precision import convert_auto

        def convert_as(chosen: str) -> ConversionResult:
            # The policy does not depend on precision: asked once, for the graph chosen.
            return convert_unchecked(
                estimator,
                frame,
                opset=opset,
                ml_opset=ml_opset,
                tree_block_nodes=tree_block_nodes,
                zipmap=zipmap,
                precision=chosen,
                target=target,
                description=description,
                fold=fold,
                categories=categories,
                missing_policy=False,
            )

        chosen = convert_auto(estimator, frame, convert_as)
        if missing_policy:
            roles = dict(chosen.metadata.outputs)
            _set_missing_policy(chosen, _missing_values_policy(estimator, frame, roles))
        return chosen
    schema = FeatureSchema.from_frame(frame)
    load_converters()
    float_name = "float64" if precision == "double" else "float32"
    inputs = graph_inputs(schema, float_name, by_name=selects_columns_by_name(estimator))
    # Converters that need the data's values (CatBoost's categories) read them from here.
    with conversion_rows(frame, categories):
        model, choice = _convert_with_opsets(
            estimator,
            inputs,
            opset,
            ml_opset,
            zipmap=zipmap and task == "classification",
            tree_block_nodes=tree_block_nodes,
        )
    if precision == "double":
        from onnxbridge.convert._precision import fix_double_graph

        model = fix_double_graph(model, estimator)
    # Scalers before a linear model become part of its coefficients (convert/folding.py).
    folded = fold_scaling_into_linear(model) if fold else []
    # skl2onnx turns names into identifiers ("age years" -> "age_years"): record its names.
    graph_names = [i.name for i in model.graph.input]
    if len(graph_names) == len(inputs):
        inputs = [{**spec, "name": name} for spec, name in zip(inputs, graph_names, strict=True)]
    roles = output_roles([o.name for o in model.graph.output], estimator, task)
    # Without the policy nothing is known: record every column as refusing missing values
    # (the safe side), so a model saved from here never feeds scikit-learn's refused rows.
    missing_values, missing_by_column = (
        _missing_values_policy(estimator, frame, roles) if missing_policy else ("refused", None)
    )
    metadata = ModelMetadata(
        task=task,
        features=schema,
        inputs=inputs,
        outputs=roles,
        classes=(
            class_labels(_final_step(estimator))
            if per_target is None
            else [_plain(classes) for classes in per_target]
        ),
        target=target,
        estimator=description or type(estimator).__name__,
        opsets=_used_opsets(model),
        versions=library_versions(),
        missing_values=missing_values,
        missing_by_column=missing_by_column,
    )
    write_metadata(model, metadata)
    model.doc_string = f"{metadata.estimator} converted by onnxbridge"
    # skl2onnx names the graph with a random UUID; a fixed name makes the same model convert to
    # the same bytes (and the same sha256 in card.json) on every run.
    model.graph.name = type(estimator).__name__
    session = _check_loads(model, frame, inputs)
    result = ConversionResult(
        model=model,
        metadata=metadata,
        opsets=choice,
        zipmap=_has_zipmap(model),
        precision="double" if precision == "double" else "float",
        notes=folded,
    )
    result._session = session
    return result


def selects_columns_by_name(estimator: Any) -> bool:
    """Whether ``estimator`` picks input columns by name anywhere inside it.

    A ColumnTransformer given column names (or a callable / ``make_column_selector``, which it
    resolves to names when fitted: its ``transformers_`` hold the resolved columns) finds its
    columns among the graph's input names, so such a model needs one input per column. The
    search goes through Pipelines, ColumnTransformers, FeatureUnions and the fitted sub-models
    of meta-estimators.
    """
    seen: set[int] = set()

    def named(columns: Any) -> bool:
        if isinstance(columns, str):
            return True
        if isinstance(columns, slice):
            return isinstance(columns.start, str) or isinstance(columns.stop, str)
        try:
            values = list(np.ravel(np.asarray(columns, dtype=object)))
        except Exception:
            return False
        return any(isinstance(v, str) for v in values)

    def walk(item: Any, depth: int) -> bool:
        if depth > 8 or id(item) in seen or not hasattr(item, "get_params"):
            return False
        seen.add(id(item))
        entries = getattr(item, "transformers_", None)
        if entries is None:
            entries = getattr(item, "transformers", None)
        if isinstance(entries, list):
            for entry in entries:
                if len(entry) >= 3 and named(entry[2]):
                    return True
        children: list[Any] = []
        for attribute in ("steps", "transformer_list", "transformers_"):
            children.extend(entry[1] for entry in getattr(item, attribute, None) or [])
        for attribute in ("estimator_", "estimators_", "regressor_", "final_estimator_"):
            value = getattr(item, attribute, None)
            if isinstance(value, list | tuple | np.ndarray):
                children.extend(np.ravel(np.asarray(value, dtype=object)))
            elif value is not None:
                children.append(value)
        return any(walk(child, depth + 1) for child in children)

    return walk(estimator, 0)


def graph_inputs(
    schema: FeatureSchema, float_name: str = "float32", *, by_name: bool = False
) -> list[dict[str, Any]]:
    """The graph inputs for a feature schema, as recorded in the metadata.

    All-numeric data becomes one ``[N, F]`` input named ``input``; a table with text or
    category columns, or a model that selects its columns by name (``by_name``, see
    :func:`selects_columns_by_name`), gets one ``[N, 1]`` input per column, named after it,
    numbers as ``float_name`` and text as ``string``, so the DataFrame can be fed as it is.
    """
    if schema.all_numeric and not by_name:
        return [{"name": INPUT_NAME, "dtype": float_name, "columns": schema.names}]
    return [
        {
            "name": f.name,
            "dtype": float_name if f.kind == "numeric" else "string",
            "columns": [f.name],
        }
        for f in schema.features
    ]


def _initial_types(inputs: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    from skl2onnx.common.data_types import DoubleTensorType, FloatTensorType, StringTensorType

    types = {"float32": FloatTensorType, "float64": DoubleTensorType, "string": StringTensorType}
    return [(i["name"], types[i["dtype"]]([None, len(i["columns"])])) for i in inputs]


def _convert_with_opsets(
    estimator: Any,
    inputs: list[dict[str, Any]],
    opset: int | None,
    ml_opset: int | None,
    *,
    zipmap: bool,
    tree_block_nodes: int = TREE_BLOCK_NODES,
) -> tuple[Any, OpsetChoice]:
    """Convert at the chosen opsets; when a converter refuses them, retry lower ones.

    Only opsets the user left open are lowered; the first error is the one reported.
    """
    choice = choose_opsets(opset, ml_opset)
    # Unless ai.onnx.ml is pinned, tree ensembles that allow it become the smaller opset-5
    # TreeEnsemble (onnxbridge.convert._tree_v5).
    opset5 = ml_opset is None and onnxruntime_runs_tree_ensemble()
    try:
        return _run_skl2onnx(
            estimator, inputs, choice, zipmap, opset5=opset5, block_nodes=tree_block_nodes
        ), choice
    except ConversionError as first:
        if "opset" not in str(first).lower() or (opset is not None and ml_opset is not None):
            raise
        for candidate in fallback_opsets(
            choice, keep_default=opset is not None, keep_ml=ml_opset is not None
        ):
            try:
                model = _run_skl2onnx(
                    estimator,
                    inputs,
                    candidate,
                    zipmap,
                    opset5=opset5,
                    block_nodes=tree_block_nodes,
                )
                return model, candidate
            except ConversionError:
                continue
        raise


def _set_missing_policy(
    result: ConversionResult, policy: tuple[str | None, dict[str, str] | None]
) -> None:
    """Record ``policy`` (:func:`_missing_values_policy`) in the result's metadata and model."""
    result.metadata.missing_values, result.metadata.missing_by_column = policy
    write_metadata(result.model, result.metadata)


def _missing_values_policy(
    estimator: Any, frame: pd.DataFrame, roles: dict[str, str]
) -> tuple[str | None, dict[str, str] | None]:
    """Whether the source model predicts with a missing value in each column.

    A real sample row (one without missing values when there is one) is copied once per
    column with that column missing (:func:`onnxbridge.data.blank_column`: NaN in a number
    column, a missing value in a text one), and all copies are scored in one call; when that
    raises, refused groups of copies are split in halves
    (:func:`onnxbridge.convert._steps.accepted_rows`), and a column whose copy was not shown to
    score within that budget counts as refused. Returns the summary (``"refused"`` when any
    column is, else ``"accepted"``) and ``{column: "accepted" | "refused"}``. When the row
    itself does not score, nothing is known per column: ``("refused", None)``, which refuses a
    missing value in every column.
    """
    from threadpoolctl import threadpool_limits

    from onnxbridge.convert._steps import accepted_rows
    from onnxbridge.train import source_frame

    method = getattr(estimator, reference_method(estimator, next(iter(roles))))
    complete = np.flatnonzero(~frame.isna().any(axis=1).to_numpy())
    row = frame.iloc[[complete[0] if len(complete) else 0]]
    columns = list(frame.columns)
    probe = pd.concat([row] * (len(columns) + 1), ignore_index=True)
    # Built column by column: one block per dtype, which scikit-learn reads fast when wide.
    # normalize_features: as rows reach scikit-learn everywhere (a missing text value as NaN).
    probe = normalize_features(
        pd.DataFrame(
            {column: blank_values(probe[column], [i + 1]) for i, column in enumerate(columns)}
        )
    )

    def scores(rows: pd.DataFrame) -> bool:
        try:
            # One thread: OpenMP models (HistGradientBoosting) spin-wait seconds on a busy
            # machine.
            with warnings.catch_warnings(), threadpool_limits(1):
                warnings.simplefilter("ignore")
                method(source_frame(estimator, rows.reset_index(drop=True), like=frame))
        except Exception:  # scikit-learn raises ValueError("Input X contains NaN") and kin
            return False
        return True

    if not scores(probe.iloc[[0]]):
        return "refused", None
    accepted = accepted_rows(scores, probe.iloc[1:])
    by_column = {
        c: "accepted" if ok else "refused" for c, ok in zip(columns, accepted, strict=True)
    }
    summary = "refused" if "refused" in by_column.values() else "accepted"
    return summary, by_column


def _used_opsets(model: Any) -> dict[str, int]:
    """Opsets the graph imports, each domain once (skl2onnx lists the default domain twice)."""
    used: dict[str, int] = {}
    for entry in model.opset_import:
        used[entry.domain] = max(used.get(entry.domain, 0), int(entry.version))
    return dict(sorted(used.items()))


def _run_skl2onnx(
    estimator: Any,
    inputs: list[dict[str, Any]],
    choice: OpsetChoice,
    zipmap: bool,
    *,
    opset5: bool = False,
    block_nodes: int = 0,
) -> Any:
    from skl2onnx import convert_sklearn

    from onnxbridge.convert._tree_ensemble import deferred_arrays

    # Defaults per estimator class (e.g. locale='C' for text vectorizers), then zipmap.
    options = tree_default_options(estimator)
    final = _final_step(estimator)
    # Transformers fitted on classes (TargetEncoder, RFE) have classes_ but no zipmap option.
    if hasattr(final, "classes_") and not zipmap and accepts_option(final, "zipmap"):
        options.setdefault(id(final), {})["zipmap"] = False

    def run(opts: dict[int, dict[str, Any]]) -> Any:
        with warnings.catch_warnings():
            # skl2onnx warns about its own internals; the checks below are what count.
            warnings.simplefilter("ignore")
            with deferred_arrays(opset5=opset5, block_nodes=block_nodes) as attach:
                model = convert_sklearn(
                    estimator,
                    initial_types=_initial_types(inputs),
                    options=opts or None,
                    target_opset=choice.as_target(),
                )
                attach(model)
                return model

    try:
        try:
            return run(options)
        except NameError as exc:
            # Some converters (LinearSVC, ...) have no zipmap option and never add a ZipMap;
            # skl2onnx still asks them for it unless another option is set, so set their
            # default "nocl" (keep class labels) instead.
            if "Option 'zipmap' not in" not in str(exc) or "'nocl'" not in str(exc):
                raise
            options[id(final)] = {**options.get(id(final), {}), "nocl": False}
            options[id(final)].pop("zipmap", None)
            return run(options)
    except Exception as exc:  # skl2onnx raises RuntimeError, ValueError, NameError, ...
        raise _wrap_conversion_error(exc, estimator) from exc


def convert_bundle(
    bundle: str | Path | Bundle,
    *,
    opset: int | None = None,
    ml_opset: int | None = None,
    tree_block_nodes: int = TREE_BLOCK_NODES,
    zipmap: bool = False,
    precision: str = "auto",
    fold: bool = True,
    trusted: Sequence[str] = (),
    allow_divergent: bool = False,
    external_data: bool | None = None,
) -> ConversionResult:
    """Convert a bundle's ``model.skops`` and write ``model.onnx`` beside it, updating the card.

    ``fold``, ``allow_divergent``: as in :func:`convert_estimator` (a divergent model written
    with ``allow_divergent`` is recorded in card.json as ``"checked": false``). ``trusted``:
    extra names to trust in ``model.skops`` for this call (see
    :func:`onnxbridge.bundle.load_estimator`); never stored. ``external_data``: as in
    :meth:`ConversionResult.save` (``model.onnx.data`` beside ``model.onnx``, hashed too).

    Raises:
        BundleError, ConversionError, ...: the bundle is left as it was on any error.
    """
    if not isinstance(bundle, Bundle):
        bundle = Bundle.open(bundle)
    estimator = bundle.load_estimator(trusted=trusted)
    X, _ = bundle.load_holdout()
    result = convert_estimator(
        estimator,
        sample_rows(X),
        opset=opset,
        ml_opset=ml_opset,
        tree_block_nodes=tree_block_nodes,
        zipmap=zipmap,
        precision=precision,
        target=bundle.target,
        description=bundle.card.get("model", {}).get("spec"),
        fold=fold,
        # The held-out rows may miss training categories a CatBoost model knows by hash only.
        categories=bundle.categories,
        allow_divergent=allow_divergent,
    )
    from onnxbridge._onnxfile import data_file_name, save_model

    # The data file the card records is the bundle's own, even when an interrupted save left
    # no model.onnx to name it.
    recorded = data_file_name(ONNX_NAME) in bundle.card.get("files", {})
    save_model(result.model, bundle.onnx_path, external_data=external_data, own_data=recorded)
    result.path = bundle.onnx_path
    bundle.record_file(ONNX_NAME)
    # A verdict about the previous model.onnx no longer applies: drop it and its report.
    bundle.card.pop("validation", None)
    for stale in ("validation.json", "validation.html"):
        (bundle.reports_dir / stale).unlink(missing_ok=True)
    bundle.card["conversion"] = {
        "converter": "skl2onnx",
        "opsets": result.metadata.opsets,
        "target_opsets": result.opsets.as_target(),
        "zipmap": result.zipmap,
        "precision": result.precision,
        "inputs": result.metadata.inputs,
        "outputs": result.metadata.outputs,
        "converted_at": now_iso(),
        # Whether scikit-learn and ONNX Runtime agreed before writing (false when written with
        # allow_divergent, or when no sample row could be compared), and what was compared.
        "checked": result.check is not None and result.check.ok is True,
        "check": None if result.check is None else result.check.as_dict(),
    }
    bundle.save_card()
    return result
