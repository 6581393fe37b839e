"""ONNX Runtime sessions with schema-driven input coercion (knows nothing of scikit-learn)."""

from onnxbridge.runtime.predictor import PredictionResult, Predictor
from onnxbridge.runtime.settings import SessionSettings, TuningSpec

__all__ = ["PredictionResult", "Predictor", "SessionSettings", "TuningSpec"]
