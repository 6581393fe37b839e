"""ONNX Runtime sessions with schema-driven input coercion (knows nothing of scikit-learn)."""

from onnxbridge.runtime.predictor import PredictionResult, Predictor

__all__ = ["PredictionResult", "Predictor"]
