"""ONNX Runtime sessions with schema-driven input coercion (knows nothing of scikit-learn)."""

from onnxbridge.runtime._predictor import PredictionResult, Predictor
from onnxbridge.runtime._settings import SessionSettings, TuningSpec

__all__ = ["PredictionResult", "Predictor", "SessionSettings", "TuningSpec"]
