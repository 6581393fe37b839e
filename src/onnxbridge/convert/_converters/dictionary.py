"""Sparse coding: DictionaryLearning, MiniBatchDictionaryLearning and SparseCoder ``transform``.

skl2onnx converts none of them. ``[N, F] -> transformed [N, n_components]`` (twice as wide with
``split_sign``). Computed in float64 whatever the input precision (the output is cast back): the
pursuit compares correlations and solves small systems where float32 would pick other atoms.

- ``transform_algorithm="omp"`` (the default): orthogonal matching pursuit on the Gram matrix, as
  scikit-learn's ``orthogonal_mp_gram``: for ``n_nonzero_coefs`` steps (default
  ``min(max(n_features / 10, 1), n_components)``), the atom of largest absolute residual
  correlation joins the active set and the codes are the least-squares solution on that set. All
  rows step together: each step's active set is an ``[N, s, n_components]`` one-hot tensor, its
  ``s x s`` Gram system is solved per row by unrolled Gauss-Jordan elimination. A row stops early
  where scikit-learn does (its best correlation squared below machine epsilon, or an atom chosen
  twice, or the new atom linearly dependent on the active ones; scikit-learn warns then), keeping
  its codes.
- ``transform_algorithm="threshold"``: soft thresholding of ``X @ dictionary.T`` by the alpha.

``lasso_lars``, ``lasso_cd`` and ``lars`` (iterative path solvers) are refused.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import TensorProto
from sklearn.datasets import make_sparse_coded_signal
from sklearn.decomposition import DictionaryLearning, MiniBatchDictionaryLearning, SparseCoder

from onnxbridge.convert._converters._graph import Graph, set_float_output
from onnxbridge.convert._registry import ConverterSpec, register_converter
from onnxbridge.errors import ConversionError

_ALGORITHMS = ("omp", "threshold")


def _dictionary(model: Any) -> np.ndarray:
    atoms = model.dictionary if isinstance(model, SparseCoder) else model.components_
    return np.asarray(atoms, dtype=np.float64)


def _shape(operator: Any) -> None:
    model = operator.raw_operator
    width = _dictionary(model).shape[0] * (2 if model.split_sign else 1)
    set_float_output(operator, 0, [None, width])


def _omp(g: Graph, cov: str, dictionary: np.ndarray, n_steps: int) -> str:
    n_atoms = dictionary.shape[0]
    gram = dictionary @ dictionary.T
    eps = float(np.finfo(np.float64).eps)
    positions = g.int64(np.arange(n_atoms).reshape(1, -1))
    alpha = cov
    code = g.node("Mul", [cov, g.const(0.0)])
    chosen = code  # [N, A]: 1 for atoms in the active set
    active = g.const(np.ones((1, 1), dtype=bool), dtype=bool)
    steps: list[str] = []
    for s in range(n_steps):
        magnitude = g.node("Abs", [alpha])
        best = g.node("ArgMax", [magnitude], axis=1, keepdims=1)  # [N, 1]
        largest = g.node("ReduceMax", [magnitude, g.int64([1])], keepdims=1)
        onehot = g.node("Cast", [g.node("Equal", [best, positions])], to=TensorProto.DOUBLE)
        overlap = g.node("ReduceSum", [g.node("Mul", [onehot, chosen]), g.int64([1])], keepdims=1)
        fresh = g.node("Not", [g.node("Greater", [overlap, g.const(0.0)])])
        strong = g.node("GreaterOrEqual", [g.node("Mul", [largest, largest]), g.const(eps)])
        proceed = g.node("And", [active, g.node("And", [strong, fresh])])
        steps.append(g.node("Unsqueeze", [onehot, g.int64([1])]))  # [N, 1, A]
        selection = steps[0] if s == 0 else g.node("Concat", steps, axis=1)  # [N, s+1, A]
        selection_t = g.node("Transpose", [selection], perm=[0, 2, 1])
        sub_gram = g.node("MatMul", [g.matmul_const(selection, gram), selection_t])
        sub_cov = g.node("MatMul", [selection, g.node("Unsqueeze", [cov, g.int64([2])])])
        pivots: list[str] = []
        gamma = g.solve_spd(sub_gram, sub_cov, s + 1, pivots)  # [N, s+1, 1]
        if s > 0:
            # The new atom depends on the active ones (Cholesky's new diagonal entry squared is
            # at most eps): scikit-learn stops there.
            schur = g.node("Reshape", [pivots[-1], g.int64([-1, 1])])
            independent = g.node("Greater", [schur, g.const(eps)])
            proceed = g.node("And", [proceed, independent])
        new_code = g.node(
            "ReduceSum", [g.node("Mul", [selection, gamma]), g.int64([1])], keepdims=0
        )
        new_alpha = g.node("Sub", [cov, g.matmul_const(new_code, gram)])
        code = g.node("Where", [proceed, new_code, code])
        alpha = g.node("Where", [proceed, new_alpha, alpha])
        chosen = g.node("Where", [proceed, g.node("Add", [chosen, onehot]), chosen])
        active = proceed
    return code


def _convert(scope: Any, operator: Any, container: Any) -> None:
    model = operator.raw_operator
    name = type(model).__name__
    algorithm = model.transform_algorithm
    if algorithm not in _ALGORITHMS:
        raise ConversionError(
            f"{name}(transform_algorithm={algorithm!r}) cannot be converted: its iterative path "
            f"solver has no graph here; use transform_algorithm in {_ALGORITHMS} (omp is the "
            "default)"
        )
    dictionary = _dictionary(model)
    n_atoms, n_features = dictionary.shape
    g = Graph(scope, operator, container)
    output_type = g.onnx_type
    x = g.node("Cast", [g.input], to=TensorProto.DOUBLE)
    g.dtype, g.onnx_type = np.float64, TensorProto.DOUBLE  # float64 from here on
    cov = g.matmul_const(x, dictionary.T)  # [N, A]
    if algorithm == "threshold":
        alpha = (
            model.alpha
            if hasattr(model, "alpha") and model.transform_alpha is None
            else (model.transform_alpha)
        )
        alpha = 1.0 if alpha is None else float(alpha)
        shrunk = g.node(
            "Max", [g.node("Sub", [g.node("Abs", [cov]), g.const(alpha)]), g.const(0.0)]
        )
        code = g.node("Mul", [g.node("Sign", [cov]), shrunk])
        if model.positive_code:
            code = g.node("Max", [code, g.const(0.0)])
    else:
        if model.positive_code:
            raise ConversionError(
                f"{name}(positive_code=True) is refused by scikit-learn with omp; refit without it"
            )
        n_steps = model.transform_n_nonzero_coefs
        if n_steps is None:
            n_steps = min(max(n_features / 10, 1), n_atoms)
        code = _omp(g, cov, dictionary, int(n_steps))
    if model.split_sign:
        positive = g.node("Max", [code, g.const(0.0)])
        negative = g.node("Neg", [g.node("Min", [code, g.const(0.0)])])
        code = g.node("Concat", [positive, negative], axis=1)
    g.node("Cast", [code], g.output(), to=output_type)


def _signals() -> tuple[np.ndarray, np.ndarray]:
    """Rows made of 3 atoms of a 12-atom dictionary over 20 features, plus a little noise (with
    these seeds no row's pursuit stops early, which scikit-learn would warn about)."""
    y, dictionary, _ = make_sparse_coded_signal(
        n_samples=70, n_components=12, n_features=20, n_nonzero_coefs=3, random_state=3
    )
    return y + 0.05 * np.random.RandomState(3).normal(size=y.shape), dictionary


def _dictionary_learning_example() -> tuple[Any, Any]:
    X, _ = _signals()
    return DictionaryLearning(n_components=12, random_state=0, max_iter=200).fit(X), X


def _minibatch_example() -> tuple[Any, Any]:
    X, _ = _signals()
    model = MiniBatchDictionaryLearning(n_components=12, batch_size=10, random_state=0)
    return model.fit(X), X


def _sparse_coder_example() -> tuple[Any, Any]:
    X, dictionary = _signals()
    return SparseCoder(dictionary=dictionary, transform_n_nonzero_coefs=3).fit(X), X


for _spec in (
    ConverterSpec(DictionaryLearning, _shape, _convert, _dictionary_learning_example),
    ConverterSpec(MiniBatchDictionaryLearning, _shape, _convert, _minibatch_example),
    ConverterSpec(SparseCoder, _shape, _convert, _sparse_coder_example),
):
    register_converter(_spec)
