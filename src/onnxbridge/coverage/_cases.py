"""Which estimators the coverage run covers, how each is built and which data it is trained on.

Groups:

- ``core``: every class of ``sklearn.utils.all_estimators(type_filter=["classifier",
  "regressor", "transformer", "cluster"])`` (181 on scikit-learn 1.9.1; an estimator listed
  under two types, such as ``LinearDiscriminantAnalysis``, counts once);
- ``outlier``: the outlier detectors, which that filter leaves out (``IsolationForest``, ...);
- ``booster``: XGBoost, LightGBM and CatBoost classifiers and regressors, when installed;
- ``categorical``: the boosters fitted on category columns with their native categorical
  splits, as tabular practitioners fit them (named ``<class>[categorical]``);
- ``other``: estimators users convert often that the filter also leaves out (mixtures, text
  vectorizers, NearestNeighbors).

An estimator is built with its defaults except where it cannot be (meta-estimators get an inner
estimator) or where the default does not suit small data (see :data:`_BUILDERS`); then every
``random_state`` is set to 0 (and any ``n_jobs`` above one to 1).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["GROUPS", "CoverageCase", "all_cases", "core_estimator_names"]

GROUPS = ("core", "outlier", "booster", "categorical", "other")
CORE_TYPES = ["classifier", "regressor", "transformer", "cluster"]


@dataclass(frozen=True)
class CoverageCase:
    """One estimator of the coverage run.

    Attributes:
        name: the estimator's class name (unique in the run).
        group: one of :data:`GROUPS`.
        data: the data kind it is trained on (:data:`onnxbridge.coverage._datasets.DATA_KINDS`).
        build: makes the unfitted estimator.
        params: the non-default parameters, as written in the report.
    """

    name: str
    group: str
    data: str
    build: Callable[[], Any]
    params: str = ""


def _seeded(estimator: Any) -> Any:
    """Fix every ``random_state`` (nested ones too) to 0, and any ``n_jobs`` that asks for
    more than one job to 1 (``None``, the default, is one job already; setting it would only
    trigger scikit-learn's deprecation warnings)."""
    params = estimator.get_params(deep=True)
    fixed = {k: 0 for k, v in params.items() if k.endswith("random_state") and v is None}
    fixed.update({k: 1 for k, v in params.items() if k.endswith("n_jobs") and v not in (None, 1)})
    if fixed:
        estimator.set_params(**fixed)
    return estimator


def _lr() -> Any:
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(max_iter=1000)


def _rf_classifier() -> Any:
    from sklearn.ensemble import RandomForestClassifier

    return RandomForestClassifier(n_estimators=10)


def _rf_regressor() -> Any:
    from sklearn.ensemble import RandomForestRegressor

    return RandomForestRegressor(n_estimators=10)


def _ridge() -> Any:
    from sklearn.linear_model import Ridge

    return Ridge()


def _scaler() -> Any:
    from sklearn.preprocessing import StandardScaler

    return StandardScaler()


def _pca2() -> Any:
    from sklearn.decomposition import PCA

    return PCA(n_components=2)


# name -> (data kind, parameters as written in the report, keyword arguments factory)
_BUILDERS: dict[str, tuple[str, str, Callable[[], dict[str, Any]]]] = {
    # Meta-estimators: an inner estimator is required (or the default is a poor fit).
    "ClassifierChain": (
        "multilabel",
        "estimator=LogisticRegression()",
        lambda: {"estimator": _lr()},
    ),
    "MultiOutputClassifier": (
        "multilabel",
        "estimator=LogisticRegression()",
        lambda: {"estimator": _lr()},
    ),
    "MultiOutputRegressor": ("multi_target", "estimator=Ridge()", lambda: {"estimator": _ridge()}),
    "RegressorChain": ("multi_target", "estimator=Ridge()", lambda: {"estimator": _ridge()}),
    "OneVsOneClassifier": (
        "multiclass",
        "estimator=LogisticRegression()",
        lambda: {"estimator": _lr()},
    ),
    "OneVsRestClassifier": (
        "multiclass",
        "estimator=LogisticRegression()",
        lambda: {"estimator": _lr()},
    ),
    "OutputCodeClassifier": (
        "multiclass",
        "estimator=LogisticRegression()",
        lambda: {"estimator": _lr()},
    ),
    "SelfTrainingClassifier": (
        "semi_supervised",
        "estimator=LogisticRegression()",
        lambda: {"estimator": _lr()},
    ),
    "FixedThresholdClassifier": (
        "binary",
        "estimator=LogisticRegression()",
        lambda: {"estimator": _lr()},
    ),
    "TunedThresholdClassifierCV": (
        "binary",
        "estimator=LogisticRegression()",
        lambda: {"estimator": _lr()},
    ),
    "StackingClassifier": (
        "multiclass",
        "estimators=[LogisticRegression(), RandomForestClassifier(n_estimators=10)]",
        lambda: {"estimators": [("lr", _lr()), ("rf", _rf_classifier())]},
    ),
    "StackingRegressor": (
        "regression",
        "estimators=[Ridge(), RandomForestRegressor(n_estimators=10)]",
        lambda: {"estimators": [("ridge", _ridge()), ("rf", _rf_regressor())]},
    ),
    "VotingClassifier": (
        "multiclass",
        "estimators=[LogisticRegression(), RandomForestClassifier(n_estimators=10)], voting='soft'",
        lambda: {"estimators": [("lr", _lr()), ("rf", _rf_classifier())], "voting": "soft"},
    ),
    "VotingRegressor": (
        "regression",
        "estimators=[Ridge(), RandomForestRegressor(n_estimators=10)]",
        lambda: {"estimators": [("ridge", _ridge()), ("rf", _rf_regressor())]},
    ),
    "TransformedTargetRegressor": (
        "regression",
        "regressor=Ridge(), transformer=StandardScaler()",
        lambda: {"regressor": _ridge(), "transformer": _scaler()},
    ),
    "RFE": (
        "multiclass",
        "estimator=LogisticRegression(), n_features_to_select=3",
        lambda: {"estimator": _lr(), "n_features_to_select": 3},
    ),
    "RFECV": ("multiclass", "estimator=LogisticRegression()", lambda: {"estimator": _lr()}),
    "SelectFromModel": (
        "multiclass",
        "estimator=LogisticRegression()",
        lambda: {"estimator": _lr()},
    ),
    "SequentialFeatureSelector": (
        "multiclass",
        "estimator=LogisticRegression(), n_features_to_select=3",
        lambda: {"estimator": _lr(), "n_features_to_select": 3},
    ),
    "ColumnTransformer": (
        "multiclass",
        "transformers=[StandardScaler() on columns 0-2, PCA(n_components=2) on 3-5]",
        lambda: {"transformers": [("scale", _scaler(), [0, 1, 2]), ("pca", _pca2(), [3, 4, 5])]},
    ),
    "FeatureUnion": (
        "multiclass",
        "transformer_list=[StandardScaler(), PCA(n_components=2)]",
        lambda: {"transformer_list": [("scale", _scaler()), ("pca", _pca2())]},
    ),
    # Defaults that do not suit 6 features / 200 rows.
    "SelectKBest": ("multiclass", "k=3", lambda: {"k": 3}),
    # The default 2**20 columns make a dense 100-row comparison of 400 MB.
    "HashingVectorizer": ("text", "n_features=1024", lambda: {"n_features": 1024}),
    # The defaults (10 %, 1e-5 %) keep no feature out of 6.
    "SelectPercentile": ("multiclass", "percentile=50", lambda: {"percentile": 50}),
    "GenericUnivariateSelect": ("multiclass", "param=50", lambda: {"param": 50}),
    "GaussianRandomProjection": ("multiclass", "n_components=3", lambda: {"n_components": 3}),
    "SparseRandomProjection": ("multiclass", "n_components=3", lambda: {"n_components": 3}),
    "RadiusNeighborsClassifier": ("multiclass", "radius=5.0", lambda: {"radius": 5.0}),
    "RadiusNeighborsRegressor": ("regression", "radius=5.0", lambda: {"radius": 5.0}),
    "DictionaryLearning": ("multiclass", "n_components=4", lambda: {"n_components": 4}),
    "MiniBatchDictionaryLearning": ("multiclass", "n_components=4", lambda: {"n_components": 4}),
    "SparsePCA": ("multiclass", "n_components=4", lambda: {"n_components": 4}),
    "MiniBatchSparsePCA": ("multiclass", "n_components=4", lambda: {"n_components": 4}),
    "SparseCoder": (
        "multiclass",
        "dictionary=4 unit-norm atoms (seed 0)",
        lambda: {"dictionary": _atoms()},
    ),
    "LogisticRegression": ("multiclass", "max_iter=1000", lambda: {"max_iter": 1000}),
    "MLPClassifier": ("multiclass", "max_iter=1000", lambda: {"max_iter": 1000}),
    "MLPRegressor": ("regression", "max_iter=1000", lambda: {"max_iter": 1000}),
}

# name -> data kind, for estimators built with their defaults on non-default data.
_DATA: dict[str, str] = {
    # Non-negative input.
    "MultinomialNB": "counts",
    "ComplementNB": "counts",
    "CategoricalNB": "categories",
    "NMF": "positive",
    "MiniBatchNMF": "positive",
    "LatentDirichletAllocation": "counts",
    "AdditiveChi2Sampler": "positive",
    "SkewedChi2Sampler": "positive",
    "TfidfTransformer": "counts",
    "BernoulliRBM": "unit",
    # Targets.
    "GammaRegressor": "positive_target",
    "PoissonRegressor": "positive_target",
    "TweedieRegressor": "positive_target",
    "MultiTaskElasticNet": "multi_target",
    "MultiTaskElasticNetCV": "multi_target",
    "MultiTaskLasso": "multi_target",
    "MultiTaskLassoCV": "multi_target",
    "CCA": "multi_target",
    "PLSCanonical": "multi_target",
    "PLSSVD": "multi_target",
    "PLSRegression": "regression",
    "IsotonicRegression": "one_feature",
    "LabelPropagation": "semi_supervised",
    "LabelSpreading": "semi_supervised",
    # Other kinds of input.
    "OneHotEncoder": "strings",
    "OrdinalEncoder": "strings",
    "TargetEncoder": "strings",
    "HashingVectorizer": "text",
    "CountVectorizer": "text",
    "TfidfVectorizer": "text",
    "DictVectorizer": "dicts",
    "FeatureHasher": "dicts",
    "PatchExtractor": "images",
    "KernelCenterer": "kernel",
    "LabelEncoder": "labels",
    "LabelBinarizer": "int_labels",
    "MultiLabelBinarizer": "label_sets",
    "SimpleImputer": "missing",
    "KNNImputer": "missing",
    "MissingIndicator": "missing",
}


def _atoms() -> Any:
    import numpy as np

    atoms = np.random.RandomState(0).normal(size=(4, 6))
    return atoms / np.linalg.norm(atoms, axis=1, keepdims=True)


def _default_kind(cls: type) -> str:
    import warnings

    from sklearn.base import is_regressor

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # deprecated classes warn when built
            regressor = is_regressor(cls())
    except Exception:  # needs constructor arguments: decided by _BUILDERS
        regressor = False
    return "regression" if regressor else "multiclass"


# scikit-learn's experimental estimators join ``all_estimators()`` only once a
# ``from sklearn.experimental import enable_...`` has run in the process: the table must not
# depend on what else the process imported, so they are never part of it.
EXPERIMENTAL = frozenset({"IterativeImputer", "HalvingGridSearchCV", "HalvingRandomSearchCV"})


def core_estimator_names() -> list[str]:
    """The class names of the core group, sorted (each once)."""
    from sklearn.utils import all_estimators

    return sorted({name for name, _ in all_estimators(type_filter=CORE_TYPES)} - EXPERIMENTAL)


def _case(name: str, cls: type, group: str) -> CoverageCase:
    if name in _BUILDERS:
        kind, params, kwargs = _BUILDERS[name]

        def build() -> Any:
            return _seeded(cls(**kwargs()))

        return CoverageCase(name, group, kind, build, params)
    kind = _DATA.get(name) or _default_kind(cls)
    return CoverageCase(name, group, kind, lambda: _seeded(cls()), "")


def _outlier_cases() -> list[CoverageCase]:
    from sklearn.covariance import EllipticEnvelope
    from sklearn.ensemble import IsolationForest
    from sklearn.linear_model import SGDOneClassSVM
    from sklearn.neighbors import LocalOutlierFactor
    from sklearn.svm import OneClassSVM

    cases = [
        _case(cls.__name__, cls, "outlier")
        for cls in (EllipticEnvelope, IsolationForest, OneClassSVM, SGDOneClassSVM)
    ]
    cases.append(
        CoverageCase(
            "LocalOutlierFactor",
            "outlier",
            "multiclass",
            lambda: _seeded(LocalOutlierFactor(novelty=True)),
            "novelty=True",
        )
    )
    return sorted(cases, key=lambda c: c.name)


def _other_cases() -> list[CoverageCase]:
    from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer
    from sklearn.mixture import BayesianGaussianMixture, GaussianMixture

    def three_components(cls: type[Any]) -> Callable[[], Any]:
        return lambda: _seeded(cls(n_components=3))

    cases = [
        CoverageCase(cls.__name__, "other", "multiclass", three_components(cls), "n_components=3")
        for cls in (BayesianGaussianMixture, GaussianMixture)
    ]
    cases += [_case(cls.__name__, cls, "other") for cls in (CountVectorizer, TfidfVectorizer)]
    from sklearn.neighbors import NearestNeighbors

    cases.append(_case("NearestNeighbors", NearestNeighbors, "other"))
    return cases


def _booster_cases() -> list[CoverageCase]:
    cases: list[CoverageCase] = []
    if importlib.util.find_spec("catboost") is not None:

        def catboost(kind: str) -> Any:
            import catboost

            cls = catboost.CatBoostClassifier if kind == "c" else catboost.CatBoostRegressor
            return cls(
                iterations=100, random_seed=0, verbose=0, thread_count=1, allow_writing_files=False
            )

        params = "iterations=100, random_seed=0, verbose=0, thread_count=1"
        cases += [
            CoverageCase(
                "CatBoostClassifier", "booster", "multiclass", lambda: catboost("c"), params
            ),
            CoverageCase(
                "CatBoostRegressor", "booster", "regression", lambda: catboost("r"), params
            ),
        ]
    if importlib.util.find_spec("lightgbm") is not None:

        def lightgbm(kind: str) -> Any:
            import lightgbm

            cls = lightgbm.LGBMClassifier if kind == "c" else lightgbm.LGBMRegressor
            return cls(random_state=0, n_jobs=1, verbose=-1)

        params = "random_state=0, n_jobs=1, verbose=-1"
        cases += [
            CoverageCase("LGBMClassifier", "booster", "multiclass", lambda: lightgbm("c"), params),
            CoverageCase("LGBMRegressor", "booster", "regression", lambda: lightgbm("r"), params),
        ]
    if importlib.util.find_spec("xgboost") is not None:

        def xgboost(kind: str) -> Any:
            import xgboost

            cls = xgboost.XGBClassifier if kind == "c" else xgboost.XGBRegressor
            return cls(random_state=0, n_jobs=1)

        params = "random_state=0, n_jobs=1"
        cases += [
            CoverageCase("XGBClassifier", "booster", "multiclass", lambda: xgboost("c"), params),
            CoverageCase("XGBRegressor", "booster", "regression", lambda: xgboost("r"), params),
        ]
    return cases


def _categorical(name: str, data: str, params: str, build: Callable[[], Any]) -> CoverageCase:
    return CoverageCase(f"{name}[categorical]", "categorical", data, build, params)


def _categorical_cases() -> list[CoverageCase]:
    """The boosters on category columns, each with its own way of naming them."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    cases = [
        _categorical(
            "HistGradientBoostingClassifier",
            "category_dtype",
            "categorical_features='from_dtype', max_iter=30",
            lambda: _seeded(
                HistGradientBoostingClassifier(categorical_features="from_dtype", max_iter=30)
            ),
        )
    ]
    if importlib.util.find_spec("lightgbm") is not None:

        def lightgbm() -> Any:
            import lightgbm

            # Categories from the pandas dtype (LightGBM's default, categorical_feature='auto').
            return lightgbm.LGBMClassifier(n_estimators=30, random_state=0, n_jobs=1, verbose=-1)

        cases.append(
            _categorical(
                "LGBMClassifier",
                "category_dtype",
                "n_estimators=30, random_state=0, n_jobs=1, verbose=-1",
                lightgbm,
            )
        )
    if importlib.util.find_spec("xgboost") is not None:

        def xgboost() -> Any:
            import xgboost

            return xgboost.XGBClassifier(
                enable_categorical=True,
                tree_method="hist",
                n_estimators=30,
                random_state=0,
                n_jobs=1,
            )

        cases.append(
            _categorical(
                "XGBClassifier",
                "category_dtype_known",
                "enable_categorical=True, tree_method='hist', n_estimators=30, random_state=0, "
                "n_jobs=1",
                xgboost,
            )
        )
    if importlib.util.find_spec("catboost") is not None:

        def catboost() -> Any:
            import catboost

            return catboost.CatBoostClassifier(
                iterations=30,
                cat_features=["color", "city"],
                random_seed=0,
                verbose=0,
                thread_count=1,
                allow_writing_files=False,
            )

        cases.append(
            _categorical(
                "CatBoostClassifier",
                "category_strings",
                "iterations=30, cat_features=['color', 'city'], random_seed=0, verbose=0, "
                "thread_count=1",
                catboost,
            )
        )
    return cases


def all_cases() -> list[CoverageCase]:
    """Every case of the run: core (sorted by name), outlier, booster, categorical, other."""
    from sklearn.utils import all_estimators

    classes = dict(all_estimators(type_filter=CORE_TYPES))
    core = [_case(name, classes[name], "core") for name in core_estimator_names()]
    return core + _outlier_cases() + _booster_cases() + _categorical_cases() + _other_cases()
