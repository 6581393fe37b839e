"""Pipelines that select columns by name, on real-shaped tables: convert proves or refuses.

Tables (seeded): numbers only, numbers and booleans, mixed (text with gaps, numbers with gaps),
each with duplicated rows. Pipelines: ColumnTransformers that pick columns by name (impute and
scale, OneHotEncoder ignoring unknown categories, OrdinalEncoder with an encoded value for
unknown ones), ``preprocess="auto"``, over the usual model families. For every case, convert
either refuses with the diverging pipeline step named, or the written model validates
EQUIVALENT on every probe set.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from cli_support import run
from onnxbridge import (
    ConversionError,
    convert_bundle,
    convert_estimator,
    train_bundle,
    validate_bundle,
    validate_model,
)

CITIES = ["Paris", "Lyon", "Zürich", "Köln", "Nice"]
STEP_NAMED = re.compile(
    r"the first diverging step is step \d+ '[^']+' \(\w+\)"
    r"|every prefix converts faithfully; the final step '[^']+' \(\w+\)"
    r"|so the divergence is in steps \d+\.\.\d+"
)


def table(kind: str, n: int = 360, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    """Features and a yes/no target; ``kind``: numeric, bool or mixed. A quarter of the rows
    are repeated (some with the other label)."""
    rng = np.random.RandomState(seed)
    frame = pd.DataFrame(
        {
            "reports": rng.randint(0, 5, n),
            "age": rng.normal(40, 10, n).round(1),
            "income": rng.lognormal(10, 1, n).round(2),
        }
    )
    frame.loc[rng.rand(n) < 0.08, "age"] = np.nan
    if kind in ("bool", "mixed"):
        frame["owner"] = rng.rand(n) < 0.5
    if kind == "mixed":
        frame["city"] = rng.choice(CITIES, n).astype(object)
        frame.loc[rng.rand(n) < 0.1, "city"] = np.nan
    score = frame["reports"] + (frame["age"].fillna(40) > 45) + rng.rand(n)
    if kind == "mixed":
        score = score + frame["city"].isin(["Paris", "Köln"]) * 0.8
    y = np.where(score > 2.2, "yes", "no")
    repeats = rng.choice(n, n // 4)
    frame = pd.concat([frame, frame.iloc[repeats]], ignore_index=True)
    flip = rng.rand(len(repeats)) < 0.3
    y = np.concatenate([y, np.where(flip, np.where(y[repeats] == "yes", "no", "yes"), y[repeats])])
    return frame, y


def _numeric_part(columns: list[str], scale: bool = True) -> tuple[str, Any, list[str]]:
    from sklearn.impute import SimpleImputer
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    steps = [SimpleImputer(strategy="median")] + ([StandardScaler()] if scale else [])
    return ("numbers", make_pipeline(*steps), columns)


def impute_scale(model: Any, kind: str) -> Any:
    """Impute + scale the numbers by name; booleans pass through by name."""
    from sklearn.compose import ColumnTransformer
    from sklearn.pipeline import Pipeline

    parts = [_numeric_part(["reports", "age", "income"])]
    if kind == "bool":
        parts.append(("flags", "passthrough", ["owner"]))
    return Pipeline([("prep", ColumnTransformer(parts)), ("model", model)])


def one_hot(model: Any) -> Any:
    """OneHotEncoder(handle_unknown="ignore") straight on text with missing values."""
    from sklearn.compose import ColumnTransformer
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import OneHotEncoder

    prep = ColumnTransformer(
        [
            _numeric_part(["reports", "age", "income"]),
            ("text", OneHotEncoder(handle_unknown="ignore", sparse_output=False), ["city"]),
            ("flags", "passthrough", ["owner"]),
        ]
    )
    return Pipeline([("prep", prep), ("model", model)])


def ordinal(model: Any) -> Any:
    """OrdinalEncoder with an encoded value for unknown categories, after imputing text."""
    from sklearn.compose import ColumnTransformer
    from sklearn.impute import SimpleImputer
    from sklearn.pipeline import Pipeline, make_pipeline
    from sklearn.preprocessing import OrdinalEncoder

    encode = make_pipeline(
        SimpleImputer(strategy="constant", fill_value="missing"),
        OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=-1),
    )
    prep = ColumnTransformer(
        [
            _numeric_part(["reports", "age", "income"], scale=False),
            ("text", encode, ["city"]),
            ("flags", "passthrough", ["owner"]),
        ]
    )
    return Pipeline([("prep", prep), ("model", model)])


def _models() -> dict[str, Callable[[], Any]]:
    from sklearn.ensemble import (
        HistGradientBoostingClassifier,
        HistGradientBoostingRegressor,
        RandomForestClassifier,
    )
    from sklearn.linear_model import LogisticRegression, Ridge
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.svm import SVC

    return {
        "logistic": lambda: LogisticRegression(max_iter=500),
        "forest": lambda: RandomForestClassifier(n_estimators=15, max_depth=6, random_state=0),
        "hgb": lambda: HistGradientBoostingClassifier(max_iter=15, random_state=0),
        "svc": lambda: SVC(probability=True, random_state=0),
        "knn": lambda: KNeighborsClassifier(n_neighbors=5),
        "ridge": lambda: Ridge(alpha=1.0),
        "hgb-regressor": lambda: HistGradientBoostingRegressor(max_iter=15, random_state=0),
    }


# (case id, table kind, pipeline builder, model)
CASES = [
    ("numeric-impute-scale-logistic", "numeric", "impute_scale", "logistic"),
    ("numeric-impute-scale-forest", "numeric", "impute_scale", "forest"),
    ("bool-impute-scale-svc", "bool", "impute_scale", "svc"),
    ("bool-impute-scale-knn", "bool", "impute_scale", "knn"),
    ("numeric-impute-scale-ridge", "numeric", "impute_scale", "ridge"),
    ("mixed-one-hot-logistic", "mixed", "one_hot", "logistic"),
    ("mixed-one-hot-forest", "mixed", "one_hot", "forest"),
    ("mixed-ordinal-hgb", "mixed", "ordinal", "hgb"),
    ("mixed-ordinal-hgb-regressor", "mixed", "ordinal", "hgb-regressor"),
    # Trained on rows whose text is never missing; the held-out rows have missing text.
    ("complete-one-hot-logistic", "mixed-complete", "one_hot", "logistic"),
    ("complete-one-hot-forest", "mixed-complete", "one_hot", "forest"),
    ("complete-ordinal-hgb", "mixed-complete", "ordinal", "hgb"),
]


def _build(kind: str, builder: str, model: str) -> Any:
    estimator = _models()[model]()
    if builder == "impute_scale":
        return impute_scale(estimator, kind)
    return {"one_hot": one_hot, "ordinal": ordinal}[builder](estimator)


def _target(y: np.ndarray, X: pd.DataFrame, model: str) -> np.ndarray:
    if model in ("ridge", "hgb-regressor"):
        return X["income"].to_numpy() / 1000 + (y == "yes") * 5.0
    return y


# Probe sets a table can leave out, and why; any other skipped set fails the test.
NOT_APPLICABLE = ("no string columns", "no numeric columns", "not a tree model")


def _three_runtimes_every_set(report: Any) -> None:
    """EQUIVALENT on scikit-learn, ONNX Runtime and onnx.reference, every pair on every probe
    set that applies to the table, no runtime dropped."""
    assert report.verdict == "EQUIVALENT", [d.summary for d in report.diagnoses]
    assert report.warnings == [], report.warnings
    assert all(info["available"] for info in report.runtimes.values()), report.runtimes
    assert set(report.runtimes) == {"sklearn", "onnxruntime", "reference"}
    for probe in report.probe_sets:
        if probe.skipped is not None:
            assert probe.skipped.startswith(NOT_APPLICABLE), (probe.name, probe.skipped)
            continue
        pairs = {p.name for p in probe.pairs}
        assert {"sklearn~onnxruntime", "sklearn~reference", "onnxruntime~reference"} <= pairs, (
            probe.name,
            pairs,
        )


def _refused_with_step(error: ConversionError) -> None:
    message = str(error)
    assert "\n" not in message
    assert message.startswith("convert refused: the ONNX graph differs from scikit-learn"), message
    assert re.search(r"\d+ of \d+ rows differ from scikit-learn", message), message
    assert STEP_NAMED.search(message), message


# SVC's probability=True is deprecated in scikit-learn 1.9; models made with it still convert.
SVC_DEPRECATION = "ignore:The `probability` parameter was deprecated:FutureWarning"


@pytest.mark.filterwarnings(SVC_DEPRECATION)
@pytest.mark.parametrize(
    ("kind", "builder", "model"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_pipeline_converts_faithfully_or_is_refused_with_the_step(
    kind: str, builder: str, model: str, tmp_path: Path
) -> None:
    X, y = table("mixed" if kind == "mixed-complete" else kind)
    y = _target(y, X, model)
    train, test = X.iloc[::2], X.iloc[1::2].reset_index(drop=True)
    y_train = y[::2]
    if kind == "mixed-complete":
        keep = train["city"].notna().to_numpy()
        train, y_train = train[keep], y_train[keep]
        assert test["city"].isna().any()
    train = train.reset_index(drop=True)
    estimator = _build(kind, builder, model).fit(train, y_train)
    # Every pipeline here is one onnxbridge converts faithfully: no refusal is acceptable.
    result = convert_estimator(estimator, train.head(100))
    # Columns picked by name: one input per column, named after it, whatever the dtypes.
    assert [i.name for i in result.model.graph.input] == list(X.columns)
    assert result.check.ok and result.check.differing_rows == 0
    assert result.check.sample_rows == 100 and sum(result.check.probe_rows.values()) > 0
    path = result.save(tmp_path / "model.onnx")
    report = validate_model(path, estimator, test)
    _three_runtimes_every_set(report)
    names = {p.name for p in report.probe_sets if p.skipped is None}
    if model in ("forest", "hgb", "hgb-regressor"):
        # Trees behind the ColumnTransformer are probed at their split thresholds.
        assert "thresholds" in names
    if kind.startswith("mixed"):
        # Missing text reaches the encoders as scikit-learn's NaN does.
        assert {"missing", "categories", "strings"} <= names


@pytest.mark.parametrize("final", ["bagging-svc", "one-vs-rest-svc"])
def test_a_diverging_converter_is_refused_naming_its_step(final: str) -> None:
    """skl2onnx's converters for these ensembles of SVMs answer otherwise than scikit-learn
    (labels and probabilities / scores): convert refuses, naming the final step."""
    from sklearn.ensemble import BaggingClassifier
    from sklearn.multiclass import OneVsRestClassifier
    from sklearn.svm import SVC

    X, y = table("numeric")
    model = {
        "bagging-svc": lambda: BaggingClassifier(SVC(), n_estimators=3, random_state=0),
        "one-vs-rest-svc": lambda: OneVsRestClassifier(SVC()),
    }[final]()
    estimator = impute_scale(model, "numeric").fit(X, y)
    with pytest.raises(ConversionError) as caught:
        convert_estimator(estimator, X.head(100))
    _refused_with_step(caught.value)
    assert "the final step 'model'" in str(caught.value)


@pytest.mark.filterwarnings(SVC_DEPRECATION)
@pytest.mark.parametrize(
    ("kind", "model"),
    [
        ("numeric", "RandomForestClassifier(n_estimators=15, random_state=0)"),
        ("bool", "LogisticRegression(max_iter=500)"),
        ("mixed", "SVC(probability=True, random_state=0)"),
    ],
    ids=["numeric-forest", "bool-logistic", "mixed-svc"],
)
def test_preprocess_auto_bundle(kind: str, model: str, tmp_path: Path) -> None:
    X, y = table(kind, n=300)
    data = tmp_path / "table.csv"
    X.assign(card=y).to_csv(data, index=False)
    bundle, _ = train_bundle(str(data), model, tmp_path / "b", target="card", preprocess="auto")
    result = convert_bundle(bundle.path)
    assert [i["name"] for i in result.metadata.inputs] == list(X.columns)
    card = json.loads(bundle.card_path.read_text())
    assert card["conversion"]["checked"] is True
    assert card["conversion"]["check"]["differing_rows"] == 0
    report = validate_bundle(bundle.path, html=False)
    _three_runtimes_every_set(report)


def test_numeric_table_with_preprocess_auto_through_the_cli(tmp_path: Path, capsys) -> None:
    """The whole path on a numbers-only table whose model picks columns by name."""
    X, y = table("bool", n=300)
    data = tmp_path / "num.csv"
    X.assign(card=y).to_csv(data, index=False)
    out = tmp_path / "rf"
    model = "RandomForestClassifier(n_estimators=15, random_state=0)"
    code, _, err = run(
        capsys,
        "train",
        "--data",
        data,
        "--target",
        "card",
        "--model",
        model,
        "--preprocess",
        "auto",
        "--out",
        out,
    )
    assert code == 0, err
    code, printed, err = run(capsys, "convert", out)
    assert code == 0, err
    assert "inputs: reports: float" in printed and "owner: float" in printed
    assert re.search(
        r"checked: 0 of \d+ rows differ from scikit-learn \(100 sample \+ \d+ probe\)", printed
    ), printed
    rows = tmp_path / "rows.csv"
    X.head(20).to_csv(rows, index=False)
    code, printed, err = run(capsys, "predict", out, "--data", rows, "--allow-missing")
    assert code == 0, err
    predicted = pd.read_csv(pd.io.common.StringIO(printed))
    from onnxbridge import load_estimator

    estimator = load_estimator(out / "model.skops")
    expected = estimator.predict(X.head(20))
    assert list(predicted["label"]) == list(expected)
    code, printed, err = run(capsys, "validate", out)
    assert code == 0, err
    assert "verdict: EQUIVALENT" in printed
    code, _, err = run(
        capsys, "score", out, rows, "-o", tmp_path / "scored.parquet", "--allow-missing"
    )
    assert code == 0, err
    scored = pd.read_parquet(tmp_path / "scored.parquet")
    assert list(scored["label"]) == list(expected)


def test_serve_answers_records_for_a_model_with_one_input_per_column(tmp_path: Path) -> None:
    """A real server on 127.0.0.1 takes records of the numbers-only table, NaN included."""
    import threading

    import httpx
    import uvicorn

    from onnxbridge import load_estimator
    from onnxbridge.serve import create_app
    from onnxbridge.serve._settings import ServeSettings
    from wait_support import wait_until

    X, y = table("bool", n=300)
    data = tmp_path / "num.csv"
    X.assign(card=y).to_csv(data, index=False)
    model = "LogisticRegression(max_iter=500)"
    bundle, _ = train_bundle(str(data), model, tmp_path / "num", target="card", preprocess="auto")
    convert_bundle(bundle.path)
    config = uvicorn.Config(
        create_app(ServeSettings(model_path=bundle.path)), host="127.0.0.1", port=0, lifespan="on"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        wait_until(lambda: server.started or not thread.is_alive(), timeout=60)
        assert server.started, "server did not start"
        port = server.servers[0].sockets[0].getsockname()[1]
        rows = pd.concat([X.head(8), X[X["age"].isna()].head(2)], ignore_index=True)
        assert rows["age"].isna().any()  # a missing number among them: the model imputes it
        records = [
            {k: (None if pd.isna(v) else v) for k, v in r.items()}
            for r in rows.astype(object).to_dict(orient="records")
        ]
        answer = httpx.post(
            f"http://127.0.0.1:{port}/v2/models/num/predict",
            json=records,
            timeout=60,
        )
        assert answer.status_code == 200, answer.text
        labels = [p["label"] for p in answer.json()["predictions"]]
        estimator = load_estimator(bundle.model_path)
        assert labels == list(estimator.predict(rows))
    finally:
        server.should_exit = True
        thread.join(timeout=30)
