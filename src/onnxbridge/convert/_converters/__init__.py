"""onnxbridge's own converters, one module per estimator family.

Each module builds its :class:`~onnxbridge.convert._registry.ConverterSpec` objects and ends with
``register_converter(...)`` calls. Adding a model is adding a module and one line below. Modules for
optional libraries (XGBoost, LightGBM, CatBoost) are imported only when the library is.
"""

from __future__ import annotations

import importlib
import importlib.util

# Always imported: they only need scikit-learn and skl2onnx.
_MODULES: tuple[str, ...] = (
    "chains",
    "cluster",
    "covariance",
    "cross_decomposition",
    "decomposition",
    "delegates",
    "dictionary",
    "discretization",
    "encoders",
    "dummy",
    "ensemble_embedding",
    "feature_selection",
    "hashing",
    "gaussian_process",
    "hist_gradient_boosting",
    "impute",
    "isotonic",
    "kernel_approximation",
    "kernel_ridge",
    "label_binarizer",
    "label_encoded",
    "lda",
    "manifold",
    "multiclass",
    "multioutput",
    "neighbors_centroid",
    "neighbors_knn",
    "neighbors_radius",
    "neighbors_search",
    "neighbors_transformer",
    "neural_network",
    "nmf",
    "random_projection",
    "semi_supervised",
    "sklearn_trees",
    "spline",
    "string_imputer",
    "svm",
    "target",
    "target_encoder",
    "text",
    "threshold",
    "voting",
)

# Imported when the library named first is installed.
_OPTIONAL_MODULES: tuple[tuple[str, str], ...] = (
    ("catboost", "catboost"),
    ("lightgbm", "lightgbm"),
    ("xgboost", "xgboost"),
)

for _name in _MODULES:
    importlib.import_module(f"{__name__}.{_name}")
for _library, _name in _OPTIONAL_MODULES:
    if importlib.util.find_spec(_library) is not None:
        importlib.import_module(f"{__name__}.{_name}")
