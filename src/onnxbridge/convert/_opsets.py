"""Which opsets to convert to: the highest that skl2onnx, onnx and the installed ONNX Runtime share.

ONNX Runtime has no API for its highest supported opset, so it is probed once per process by loading
a one-node model at each candidate version, newest first.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from onnxbridge.errors import ConversionError

__all__ = [
    "OpsetChoice",
    "choose_opsets",
    "fallback_opsets",
    "onnxruntime_max_opset",
    "onnxruntime_runs_tree_ensemble",
    "skl2onnx_max_opset",
]

DEFAULT_DOMAIN = ""
ML_DOMAIN = "ai.onnx.ml"
# skl2onnx and onnxmltools emit ai.onnx.ml versions that their own guards then reject above 3
# (seen with skl2onnx 1.20 and onnxmltools 1.16, the pinned versions).
ML_OPSET_CAP = 3
MIN_OPSET = 9


@dataclass(frozen=True)
class OpsetChoice:
    """The opsets a conversion targets: default domain and ``ai.onnx.ml``."""

    default: int
    ml: int

    def as_target(self) -> dict[str, int]:
        """The ``target_opset`` dict skl2onnx takes."""
        return {DEFAULT_DOMAIN: self.default, ML_DOMAIN: self.ml}


def skl2onnx_max_opset() -> int:
    """The highest default-domain opset the installed skl2onnx converts to."""
    import onnx
    import skl2onnx

    return min(int(skl2onnx.__max_supported_opset__), onnx.defs.onnx_opset_version())


def _probe_model(domain: str, version: int) -> bytes:
    from onnx import TensorProto, helper

    if domain == DEFAULT_DOMAIN:
        node = helper.make_node("Identity", ["x"], ["y"])
        opsets = [helper.make_opsetid(DEFAULT_DOMAIN, version)]
    else:
        node = helper.make_node("Normalizer", ["x"], ["y"], domain=ML_DOMAIN, norm="MAX")
        opsets = [helper.make_opsetid(DEFAULT_DOMAIN, 13), helper.make_opsetid(ML_DOMAIN, version)]
    graph = helper.make_graph(
        [node],
        "opset_probe",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 2])],
    )
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = helper.find_min_ir_version_for(opsets, ignore_unknown=True)
    return model.SerializeToString()


@cache
def onnxruntime_max_opset(domain: str = DEFAULT_DOMAIN) -> int:
    """The highest opset of ``domain`` that the installed ONNX Runtime loads (probed, cached)."""
    import onnx
    import onnxruntime as ort

    if domain == DEFAULT_DOMAIN:
        candidates = range(onnx.defs.onnx_opset_version(), 6, -1)
    else:
        # VERSION_TABLE rows: (release, IR version, default opset, ai.onnx.ml opset, training).
        candidates = range(onnx.helper.VERSION_TABLE[-1][3], 0, -1)
    options = ort.SessionOptions()
    options.log_severity_level = 4
    for version in candidates:
        try:
            ort.InferenceSession(
                _probe_model(domain, version), options, providers=["CPUExecutionProvider"]
            )
        except Exception:  # ORT signals "too new" with its own exception types
            continue
        return version
    raise ConversionError(f"the installed onnxruntime loads no opset of domain {domain!r}")


@cache
def onnxruntime_runs_tree_ensemble() -> bool:
    """Whether the installed ONNX Runtime runs ``ai.onnx.ml`` 5 ``TreeEnsemble`` (probed, cached).

    Loading the opset is not enough: ONNX Runtime 1.20 loads ``ai.onnx.ml`` 5 but has no kernel
    for ``TreeEnsemble``.
    """
    import numpy as np
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    if onnxruntime_max_opset(ML_DOMAIN) < 5:
        return False

    def tensor(values: list[float], dtype: type) -> TensorProto:
        return numpy_helper.from_array(np.asarray(values, dtype=dtype), name="")

    # One split, x <= 0 -> 1.0 else 2.0.
    node = helper.make_node(
        "TreeEnsemble",
        ["x"],
        ["y"],
        domain=ML_DOMAIN,
        aggregate_function=1,
        post_transform=0,
        n_targets=1,
        nodes_featureids=[0],
        nodes_splits=tensor([0.0], np.float32),
        nodes_modes=tensor([0], np.uint8),
        nodes_truenodeids=[0],
        nodes_falsenodeids=[1],
        nodes_trueleafs=[1],
        nodes_falseleafs=[1],
        leaf_targetids=[0, 0],
        leaf_weights=tensor([1.0, 2.0], np.float32),
        tree_roots=[0],
    )
    graph = helper.make_graph(
        [node],
        "tree_probe",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 1])],
    )
    opsets = [helper.make_opsetid(DEFAULT_DOMAIN, 13), helper.make_opsetid(ML_DOMAIN, 5)]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = helper.find_min_ir_version_for(opsets, ignore_unknown=True)
    options = ort.SessionOptions()
    options.log_severity_level = 4
    try:
        session = ort.InferenceSession(
            model.SerializeToString(), options, providers=["CPUExecutionProvider"]
        )
        (y,) = session.run(None, {"x": np.asarray([[-1.0], [1.0]], dtype=np.float32)})
    except Exception:  # NOT_IMPLEMENTED where the kernel is missing
        return False
    return bool(np.array_equal(np.ravel(y), [1.0, 2.0]))


def choose_opsets(opset: int | None = None, ml_opset: int | None = None) -> OpsetChoice:
    """The opsets to target: the given ones, checked, or the highest that work together.

    Raises:
        ConversionError: if a requested opset is outside what skl2onnx and ONNX Runtime support.
    """
    highest = min(skl2onnx_max_opset(), onnxruntime_max_opset(DEFAULT_DOMAIN))
    highest_ml = min(ML_OPSET_CAP, onnxruntime_max_opset(ML_DOMAIN))
    if opset is None:
        opset = highest
    elif not MIN_OPSET <= opset <= highest:
        raise ConversionError(
            f"opset={opset} is not supported here: skl2onnx converts up to "
            f"{skl2onnx_max_opset()} and onnxruntime loads up to {onnxruntime_max_opset()}; "
            f"choose {MIN_OPSET}..{highest} or leave out opset= to get {highest}",
            arguments=("opset",),
        )
    if ml_opset is None:
        ml_opset = highest_ml
    elif not 1 <= ml_opset <= highest_ml:
        raise ConversionError(
            f"ml_opset={ml_opset} is not supported here: choose 1..{highest_ml} or leave it "
            f"out (ai.onnx.ml is capped at {ML_OPSET_CAP}: skl2onnx and onnxmltools converters "
            "emit ai.onnx.ml versions their own checks reject above it)",
            arguments=("ml_opset",),
        )
    return OpsetChoice(default=opset, ml=ml_opset)


# Default-domain opsets worth a retry, newest first: the releases converters commonly pin.
_FALLBACK_DEFAULTS = (21, 20, 19, 18, 17, 15, 13, 12, 11, 9)


def fallback_opsets(
    choice: OpsetChoice, *, keep_default: bool = False, keep_ml: bool = False
) -> list[OpsetChoice]:
    """Lower opset pairs to retry when a converter refuses ``choice``, most recent first.

    Args:
        choice: the opsets that failed.
        keep_default: the user pinned the default-domain opset; do not lower it.
        keep_ml: the user pinned ``ai.onnx.ml``; do not lower it.
    """
    defaults = (
        [choice.default]
        if keep_default
        else [
            choice.default,
            *(v for v in _FALLBACK_DEFAULTS if v < choice.default),
        ]
    )
    mls = [choice.ml] if keep_ml else list(range(choice.ml, 0, -1))
    return [
        OpsetChoice(default=d, ml=m)
        for d in defaults
        for m in mls
        if (d, m) != (choice.default, choice.ml)
    ]
