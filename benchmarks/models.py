"""The benchmark models: the estimators every benchmark names, fitted on the benchmark data.

The benchmark data is ``make_classification(n_samples=20000, n_features=28, n_informative=15,
n_classes=2, random_state=0)``; the models are fitted on its first 10 000 rows.
"""

from __future__ import annotations

from typing import Any


def benchmark_estimator(name: str) -> Any:
    """A fresh (unfitted) benchmark model by its short name: rf10, rf100, hgb, gb, lgbm, lr or
    scaled-lr."""
    from sklearn.ensemble import (
        GradientBoostingClassifier,
        HistGradientBoostingClassifier,
        RandomForestClassifier,
    )
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    if name == "lgbm":
        from lightgbm import LGBMClassifier

        return LGBMClassifier(n_estimators=100, random_state=0, verbose=-1)
    return {
        "rf10": lambda: RandomForestClassifier(n_estimators=10, random_state=0),
        "rf100": lambda: RandomForestClassifier(n_estimators=100, random_state=0),
        "hgb": lambda: HistGradientBoostingClassifier(max_iter=100, random_state=0),
        "gb": lambda: GradientBoostingClassifier(n_estimators=100, random_state=0),
        "lr": lambda: LogisticRegression(max_iter=1000, random_state=0),
        "scaled-lr": lambda: make_pipeline(
            StandardScaler(), LogisticRegression(max_iter=1000, random_state=0)
        ),
    }[name]()
