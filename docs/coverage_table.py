"""Regenerate the tables of docs/coverage.md.

Runs each estimator spec through the public API exactly as the CLI does —
``train_bundle`` → ``convert_bundle`` → ``validate_bundle`` with the default tolerances — and prints
Markdown tables. Bundles go to a temporary folder that is deleted afterwards.

    .venv/bin/python docs/coverage_table.py > /tmp/coverage.md

Not part of the package and not a test: it records what converts with the pinned stack.
"""

from __future__ import annotations

import datetime
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from onnxbridge import convert_bundle, train_bundle, validate_bundle
from onnxbridge.bundle import library_versions

CLASSIFIERS = [
    "LogisticRegression(max_iter=1000)",
    "RandomForestClassifier(random_state=0)",
    "ExtraTreesClassifier(random_state=0)",
    "GradientBoostingClassifier(random_state=0)",
    "HistGradientBoostingClassifier(random_state=0)",
    "DecisionTreeClassifier(random_state=0)",
    "KNeighborsClassifier()",
    "SVC()",
    "SVC(probability=True, random_state=0)",
    "LinearSVC(random_state=0)",
    "MLPClassifier(max_iter=2000, random_state=0)",
    "GaussianNB()",
    "BernoulliNB()",
    "MultinomialNB()",
    "RidgeClassifier()",
    "SGDClassifier(random_state=0)",
    "SGDClassifier(loss='log_loss', random_state=0)",
    "Perceptron(random_state=0)",
    "AdaBoostClassifier(random_state=0)",
    "BaggingClassifier(random_state=0)",
    "LinearDiscriminantAnalysis()",
    "DummyClassifier()",
    "NearestCentroid()",
    "VotingClassifier(estimators=[('lr', LogisticRegression(max_iter=1000)), "
    "('rf', RandomForestClassifier(random_state=0))], voting='soft')",
    "StandardScaler() | LogisticRegression()",
    "MinMaxScaler() | KNeighborsClassifier()",
    "StandardScaler() | PCA(n_components=2) | LogisticRegression()",
    "StandardScaler() | SVC(probability=True, random_state=0)",
]

REGRESSORS = [
    "LinearRegression()",
    "Ridge()",
    "Lasso()",
    "ElasticNet()",
    "BayesianRidge()",
    "HuberRegressor(max_iter=1000)",
    "SGDRegressor(random_state=0)",
    "RandomForestRegressor(random_state=0)",
    "ExtraTreesRegressor(random_state=0)",
    "GradientBoostingRegressor(random_state=0)",
    "HistGradientBoostingRegressor(random_state=0)",
    "DecisionTreeRegressor(random_state=0)",
    "KNeighborsRegressor()",
    "SVR()",
    "LinearSVR(random_state=0)",
    "MLPRegressor(max_iter=2000, random_state=0)",
    "AdaBoostRegressor(random_state=0)",
    "BaggingRegressor(random_state=0)",
    "DummyRegressor()",
    "KernelRidge()",
    "IsotonicRegression()",
    "StandardScaler() | Ridge()",
    "StandardScaler() | PCA(n_components=5) | LinearRegression()",
    "StandardScaler() | MLPRegressor(max_iter=2000, random_state=0)",
]

# IsotonicRegression fits one feature only: it runs on a generated one-column CSV.
ONE_FEATURE = ["IsotonicRegression()", "LinearRegression()"]


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    if type(exc).__name__ == "MissingConverterError":
        text = text.split(";")[0]  # the rest lists supported estimators
    short = text if len(text) <= 120 else text[:120] + "…"
    return f"{type(exc).__name__}: {short}"


def _fmt(value: float | None) -> str:
    if value is None:
        return "–"
    return "0" if value == 0 else f"{value:.2g}"


def one_feature_csv(root: Path) -> str:
    """A 200-row CSV with one feature ``x`` and a target ``y`` = sqrt(x) + noise (seed 0)."""
    rng = np.random.RandomState(0)
    x = rng.rand(200) * 10
    path = root / "one_feature.csv"
    pd.DataFrame({"x": x, "y": np.sqrt(x) + rng.randn(200) * 0.1}).to_csv(path, index=False)
    return str(path)


def run(spec: str, data: str, root: Path) -> tuple[str, str, str, str]:
    """(converts?, verdict, max |Δ|, note) for one spec on one dataset."""
    out = root / f"{Path(data).stem}-{abs(hash(spec))}"
    target = "y" if data.endswith(".csv") else None
    try:
        bundle, _ = train_bundle(data, spec, out, target=target)
    except Exception as exc:
        return "–", "–", "–", "train: " + _one_line(exc)
    try:
        convert_bundle(bundle)
    except Exception as exc:
        return "no", "–", "–", _one_line(exc)
    try:
        report = validate_bundle(bundle)
    except Exception as exc:
        return "yes", "–", "–", "validate: " + _one_line(exc)
    numeric = [c for c in report.outputs if c.kind == "numeric"]
    labels = [c for c in report.outputs if c.kind == "labels"]
    max_diff = max((c.max_abs_diff or 0.0 for c in numeric), default=None)
    notes = []
    for c in labels:
        if c.n_mismatched:
            notes.append(f"{c.n_mismatched}/{c.n_rows} labels differ")
    if labels and not numeric:
        notes.append("labels only (no predict_proba)")
    for c in numeric:
        if c.n_mismatched:
            notes.append(f"{c.name}: {c.n_mismatched}/{c.n_rows} rows out of tolerance")
    return "yes", report.verdict, _fmt(max_diff), "; ".join(notes)


def table(title: str, specs: list[str], datasets: list[str], root: Path) -> None:
    print(f"### {title}\n")
    print("| estimator | data | converts? | verdict | max \\|Δ\\| | notes |")
    print("|---|---|---|---|---|---|")
    for spec in specs:
        for data in datasets:
            converts, verdict, max_diff, note = run(spec, data, root)
            name = Path(data).name
            cell = spec.replace("|", "\\|")  # a pipe would end the table cell
            note = note.replace("|", "\\|")
            print(f"| `{cell}` | {name} | {converts} | {verdict} | {max_diff} | {note} |")
            sys.stdout.flush()
    print()


def main() -> None:
    warnings.simplefilter("ignore")  # convergence and deprecation noise; failures are recorded
    versions = library_versions()
    listed = ", ".join(f"{k} {v}" for k, v in versions.items())
    print(f"Generated {datetime.date.today().isoformat()} with {listed}.\n")
    with tempfile.TemporaryDirectory(prefix="onnxbridge-coverage-") as tmp:
        root = Path(tmp)
        table("Classifiers", CLASSIFIERS, ["iris", "wine"], root)
        table("Regressors", REGRESSORS, ["diabetes"], root)
        table("One feature", ONE_FEATURE, [one_feature_csv(root)], root)


if __name__ == "__main__":
    main()
