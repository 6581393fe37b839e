"""Matrix decompositions skl2onnx does not convert, ``[N, F] -> transformed [N, K]``.

- FactorAnalysis: the posterior mean of the latent factors,
  ``(X - mean_) @ Wpsi.T @ inv(I + Wpsi @ W.T)`` with ``Wpsi = components_ / noise_variance_``;
  a linear map, folded into one matrix at conversion.
- FastICA: ``(X - mean_) @ components_.T`` (no centring with ``whiten=False``).
- SparsePCA / MiniBatchSparsePCA: the ridge least-squares projection onto the components,
  ``(X - mean_) @ C.T @ inv(C @ C.T + ridge_alpha·I)``, also one matrix.
- NMF / MiniBatchNMF: see :mod:`onnxbridge.convert._converters.nmf`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import linalg
from sklearn.datasets import make_regression
from sklearn.decomposition import FactorAnalysis, FastICA, MiniBatchSparsePCA, SparsePCA

from onnxbridge.convert._converters._graph import Graph, set_float_output
from onnxbridge.convert._registry import ConverterSpec, register_converter


def _components_shape(operator: Any) -> None:
    set_float_output(operator, 0, [None, operator.raw_operator.components_.shape[0]])


def _centred_projection(
    scope: Any, operator: Any, container: Any, mean: np.ndarray | None, matrix: np.ndarray
) -> None:
    """``(x - mean) @ matrix`` (the subtraction first, as scikit-learn does)."""
    g = Graph(scope, operator, container)
    x = g.input if mean is None else g.sub_const(g.input, np.asarray(mean).reshape(1, -1))
    g.matmul_const(x, np.asarray(matrix, dtype=np.float64).astype(g.dtype), g.output())


def _factor_analysis_convert(scope: Any, operator: Any, container: Any) -> None:
    model = operator.raw_operator
    components = np.asarray(model.components_, dtype=np.float64)
    wpsi = components / model.noise_variance_
    cov_z = linalg.inv(np.eye(len(components)) + wpsi @ components.T)
    _centred_projection(scope, operator, container, model.mean_, wpsi.T @ cov_z)


def _fast_ica_convert(scope: Any, operator: Any, container: Any) -> None:
    model = operator.raw_operator
    mean = model.mean_ if model.whiten else None
    _centred_projection(scope, operator, container, mean, np.asarray(model.components_).T)


def _sparse_pca_convert(scope: Any, operator: Any, container: Any) -> None:
    model = operator.raw_operator
    components = np.asarray(model.components_, dtype=np.float64)
    gram = components @ components.T + model.ridge_alpha * np.eye(len(components))
    matrix = linalg.solve(gram, components, assume_a="pos").T
    _centred_projection(scope, operator, container, model.mean_, matrix)


def _data() -> np.ndarray:
    X, _ = make_regression(n_samples=80, n_features=6, effective_rank=4, random_state=0)
    return X * 10


def _factor_analysis_example() -> tuple[Any, Any]:
    X = _data()
    return FactorAnalysis(n_components=3, random_state=0).fit(X), X


def _fast_ica_example() -> tuple[Any, Any]:
    rng = np.random.RandomState(0)
    sources = np.c_[np.sin(np.linspace(0, 8, 100)), rng.laplace(size=100), rng.uniform(size=100)]
    X = sources @ rng.normal(size=(3, 5))
    return FastICA(n_components=3, random_state=0).fit(X), X


def _sparse_pca_example() -> tuple[Any, Any]:
    X = _data()
    return SparsePCA(n_components=3, random_state=0).fit(X), X


def _minibatch_sparse_pca_example() -> tuple[Any, Any]:
    X = _data()
    return MiniBatchSparsePCA(n_components=3, batch_size=10, random_state=0).fit(X), X


for _spec in (
    ConverterSpec(
        FactorAnalysis, _components_shape, _factor_analysis_convert, _factor_analysis_example
    ),
    ConverterSpec(FastICA, _components_shape, _fast_ica_convert, _fast_ica_example),
    ConverterSpec(SparsePCA, _components_shape, _sparse_pca_convert, _sparse_pca_example),
    ConverterSpec(
        MiniBatchSparsePCA, _components_shape, _sparse_pca_convert, _minibatch_sparse_pca_example
    ),
):
    register_converter(_spec)
