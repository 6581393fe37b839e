"""Batch scoring of files larger than memory with an ONNX model, locally or on a Dask cluster.

Needs only the ``.onnx`` file and ONNX Runtime (plus Dask for ``engine="dask"``); nothing here
imports scikit-learn.
"""

from onnxbridge._score.core import PartResult, ScoreResult, score

__all__ = ["PartResult", "ScoreResult", "score"]
