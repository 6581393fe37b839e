"""Conversion of fitted estimators to ONNX: opsets, input types, options, metadata, checks."""

from onnxbridge._meta import ModelMetadata, read_metadata, write_metadata
from onnxbridge.convert._core import ConversionResult, convert_bundle, convert_estimator
from onnxbridge.convert._opsets import OpsetChoice, choose_opsets
from onnxbridge.convert._registry import (
    ConverterSpec,
    find_converter,
    get_converter,
    register_converter,
    registered_converters,
    upstream_converters,
)
from onnxbridge.convert._roles import expected_outputs, model_task

__all__ = [
    "ConversionResult",
    "ConverterSpec",
    "ModelMetadata",
    "OpsetChoice",
    "choose_opsets",
    "convert_bundle",
    "convert_estimator",
    "expected_outputs",
    "find_converter",
    "get_converter",
    "model_task",
    "read_metadata",
    "register_converter",
    "registered_converters",
    "upstream_converters",
    "write_metadata",
]
