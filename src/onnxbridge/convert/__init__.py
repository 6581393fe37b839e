"""Conversion of fitted estimators to ONNX: opsets, input types, options, metadata, checks."""

from onnxbridge.convert.core import ConversionResult, convert_bundle, convert_estimator
from onnxbridge.convert.metadata import ModelMetadata, read_metadata, write_metadata
from onnxbridge.convert.opsets import OpsetChoice, choose_opsets

__all__ = [
    "ConversionResult",
    "ModelMetadata",
    "OpsetChoice",
    "choose_opsets",
    "convert_bundle",
    "convert_estimator",
    "read_metadata",
    "write_metadata",
]
