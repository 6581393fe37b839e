"""Conversion: schema-driven inputs, ZipMap off, opsets, metadata, checks, errors."""

from __future__ import annotations

import json
import re

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.cluster import KMeans
from sklearn.datasets import load_iris
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression

from convert_support import Shifter, register_wrong_converter
from onnxbridge import Bundle, convert_bundle, convert_estimator
from onnxbridge.convert import read_metadata
from onnxbridge.convert._opsets import choose_opsets, onnxruntime_max_opset, skl2onnx_max_opset
from onnxbridge.errors import ConversionError, DataError, MissingConverterError, ModelNotFittedError


@pytest.fixture(scope="module")
def iris_frame():
    return load_iris(return_X_y=True, as_frame=True)


def _session(model: onnx.ModelProto) -> ort.InferenceSession:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def test_default_opsets_are_the_highest_shared() -> None:
    choice = choose_opsets()
    assert choice.default == min(skl2onnx_max_opset(), onnxruntime_max_opset(""))
    assert choice.ml == min(3, onnxruntime_max_opset("ai.onnx.ml"))
    assert onnxruntime_max_opset("") >= 21


@pytest.mark.parametrize(("opset", "ml"), [(99, None), (3, None), (None, 9)])
def test_impossible_opsets_are_refused(opset, ml) -> None:
    with pytest.raises(ConversionError, match=r"is not supported here.*(choose|leave)"):
        choose_opsets(opset, ml)


def test_classifier_gets_one_float_input_and_tensor_outputs(iris_frame) -> None:
    X, y = iris_frame
    model = RandomForestClassifier(n_estimators=5, random_state=0).fit(X, y)
    result = convert_estimator(model, X.head(3))
    graph = result.model.graph
    assert [i.name for i in graph.input] == ["input"]
    tensor = graph.input[0].type.tensor_type
    assert tensor.elem_type == onnx.TensorProto.FLOAT
    assert [d.dim_value for d in tensor.shape.dim][1] == 4
    assert [o.name for o in graph.output] == ["label", "probabilities"]
    assert graph.output[1].type.HasField("tensor_type")  # no ZipMap
    assert "ZipMap" not in {n.op_type for n in graph.node}
    assert result.opsets == choose_opsets()
    label, proba = _session(result.model).run(None, {"input": X.to_numpy(np.float32)})
    assert (label == model.predict(X)).all()
    np.testing.assert_allclose(proba, model.predict_proba(X), atol=1e-6)


def test_zipmap_on_request(iris_frame) -> None:
    X, y = iris_frame
    model = LogisticRegression(max_iter=500).fit(X, y)
    result = convert_estimator(model, X.head(3), zipmap=True)
    assert "ZipMap" in {n.op_type for n in result.model.graph.node}
    assert result.model.graph.output[1].type.HasField("sequence_type")


def test_metadata_makes_the_file_self_describing(iris_frame) -> None:
    X, y = iris_frame
    model = LogisticRegression(max_iter=500).fit(X, y)
    result = convert_estimator(model, X.head(3), target="species", description="LR")
    props = {p.key: p.value for p in result.model.metadata_props}
    assert json.loads(props["onnxbridge.classes"]) == [0, 1, 2]
    assert json.loads(props["onnxbridge.inputs"])[0]["columns"] == list(X.columns)
    assert props["onnxbridge.task"] == "classification"
    assert props["onnxbridge.target"] == "species"
    assert "skl2onnx" in json.loads(props["onnxbridge.versions"])
    meta = read_metadata(result.model)
    assert meta is not None and meta.features.names == list(X.columns)
    assert meta.outputs == {"label": "label", "probabilities": "probabilities"}
    # Opsets recorded are the ones the graph really imports, one per domain.
    imported = {o.domain: o.version for o in result.model.opset_import}
    assert meta.opsets == dict(sorted(imported.items()))


def test_array_sample_without_feature_names() -> None:
    X, y = load_iris(return_X_y=True)
    model = LogisticRegression(max_iter=500).fit(X, y)
    result = convert_estimator(model, X[:2])
    assert result.metadata.features.names == ["x0", "x1", "x2", "x3"]


def test_explicit_opset_15_as_in_the_reference_workflow(iris_frame) -> None:
    X, y = iris_frame
    model = RandomForestClassifier(n_estimators=3, random_state=0).fit(X, y)
    result = convert_estimator(model, X.head(2), opset=15)
    assert {o.domain: o.version for o in result.model.opset_import}[""] == 15


def test_not_fitted_model(iris_frame) -> None:
    X, _ = iris_frame
    with pytest.raises(ModelNotFittedError, match=r"RandomForestClassifier is not fitted"):
        convert_estimator(RandomForestClassifier(), X.head(2))


class _NoConverterClassifier(ClassifierMixin, BaseEstimator):
    """A classifier no converter knows (NearestCentroid, used before, now has one)."""

    def fit(self, X, y):
        self.classes_ = np.unique(y)
        self.n_features_in_ = np.shape(X)[1]
        return self

    def predict(self, X):
        return np.full(len(X), self.classes_[0])


def test_no_converter_names_the_estimator(iris_frame) -> None:
    X, y = iris_frame
    model = _NoConverterClassifier().fit(X, y)
    with pytest.raises(
        MissingConverterError, match=r"no ONNX converter for _NoConverterClassifier;.*supported"
    ):
        convert_estimator(model, X.head(2))


def test_clusterer_converts_with_label_and_distance_roles(iris_frame) -> None:
    X, _ = iris_frame
    model = KMeans(n_clusters=3, n_init=1, random_state=0).fit(X)
    result = convert_estimator(model, X.head(2))
    assert result.metadata.task == "cluster"
    assert result.metadata.outputs == {"label": "label", "scores": "scores"}
    # float32 distances differ from scikit-learn's beyond validate's 1e-5 near the centres:
    # precision auto converts in double.
    assert result.precision == "double"
    assert result.check.ok
    label, scores = _session(result.model).run(None, {"input": X.to_numpy(np.float64)})
    assert (label == model.predict(X)).all()
    np.testing.assert_allclose(scores, model.transform(X), rtol=1e-5, atol=1e-5)


def test_transformer_converts_with_transformed_role(iris_frame) -> None:
    from sklearn.decomposition import PCA

    from onnxbridge import Predictor

    X, _ = iris_frame
    model = PCA(n_components=2).fit(X)
    result = convert_estimator(model, X.head(2))
    assert result.metadata.task == "transform"
    assert result.metadata.outputs == {"transformed": "variable"}
    assert result.metadata.missing_values == "refused"
    predicted = Predictor(result.model.SerializeToString()).predict(X)
    assert predicted.transformed.shape == (150, 2)
    np.testing.assert_allclose(predicted.transformed, model.transform(X), atol=1e-4)
    assert list(predicted.to_frame().columns) == ["out_0", "out_1"]


def test_estimator_without_predict_or_transform_is_refused() -> None:
    from sklearn.cluster import AgglomerativeClustering

    X = np.random.RandomState(0).rand(20, 3)
    model = AgglomerativeClustering(n_clusters=2).fit(X)
    with pytest.raises(ConversionError, match=r"AgglomerativeClustering has neither predict nor"):
        convert_estimator(model, X[:2])


def test_sample_with_wrong_columns(iris_frame) -> None:
    X, y = iris_frame
    model = LogisticRegression(max_iter=500).fit(X, y)
    wrong = X.rename(columns={X.columns[0]: "other"})
    with pytest.raises(DataError, match=r"missing 'sepal length \(cm\)'; unexpected 'other'"):
        convert_estimator(model, wrong.head(2))


def test_convert_bundle_writes_model_and_updates_card(iris_bundle: Bundle) -> None:
    iris_bundle.onnx_path.unlink()
    result = convert_bundle(iris_bundle, opset=17)
    assert iris_bundle.onnx_path.is_file() and result.path == iris_bundle.onnx_path
    card = Bundle.open(iris_bundle.path).card
    assert card["conversion"]["target_opsets"][""] == 17
    assert card["conversion"]["zipmap"] is False
    assert "model.onnx" in card["files"]
    onnx.checker.check_model(onnx.load(str(iris_bundle.onnx_path)))


def test_failed_conversion_leaves_existing_model(iris_bundle: Bundle) -> None:
    before = iris_bundle.onnx_path.read_bytes()
    card_before = iris_bundle.card_path.read_text()
    with pytest.raises(ConversionError):
        convert_bundle(iris_bundle, opset=99)
    assert iris_bundle.onnx_path.read_bytes() == before
    assert iris_bundle.card_path.read_text() == card_before


def test_sample_columns_in_another_order_keep_training_order(iris_frame) -> None:
    from onnxbridge import Predictor

    X, y = iris_frame
    model = LogisticRegression(max_iter=500).fit(X, y)
    result = convert_estimator(model, X[X.columns[::-1]].head(5))
    assert result.metadata.features.names == list(X.columns)
    out = Predictor(result.model.SerializeToString()).predict(X)
    np.testing.assert_allclose(out.probabilities, model.predict_proba(X), atol=1e-5)


@pytest.mark.parametrize(
    "spec", ["LinearSVC()", "StandardScaler() | LinearSVC()", "RidgeClassifier()", "SVC()"]
)
def test_classifiers_without_predict_proba_give_scores(iris_frame, spec: str) -> None:
    from onnxbridge import Predictor
    from onnxbridge.train import parse_model_spec

    X, y = iris_frame
    model = parse_model_spec(spec).fit(X, y)
    result = convert_estimator(model, X.head(5), zipmap=True)
    assert set(result.metadata.outputs) == {"label", "scores"}
    out = Predictor(result.model.SerializeToString()).predict(X)
    assert out.probabilities is None and out.scores.shape == (150, 3)
    np.testing.assert_allclose(out.scores, model.decision_function(X), rtol=1e-4, atol=1e-4)
    assert list(out.to_frame().columns) == ["label", "score_0", "score_1", "score_2"]


def test_zipmap_is_reported_as_applied_only_when_it_was(iris_frame) -> None:
    from sklearn.linear_model import LinearRegression

    X, y = iris_frame
    result = convert_estimator(LinearRegression().fit(X, y), X.head(2), zipmap=True)
    assert result.zipmap is False


def test_reconverting_drops_the_stale_verdict(iris_bundle: Bundle) -> None:
    from onnxbridge import validate_bundle

    validate_bundle(iris_bundle)
    assert "validation" in Bundle.open(iris_bundle.path).card
    convert_bundle(iris_bundle, opset=15)
    assert "validation" not in Bundle.open(iris_bundle.path).card


def test_reconverting_removes_the_stale_report(iris_bundle: Bundle) -> None:
    from onnxbridge import validate_bundle

    validate_bundle(iris_bundle)
    reports = [iris_bundle.reports_dir / name for name in ("validation.json", "validation.html")]
    assert all(report.is_file() for report in reports)
    convert_bundle(iris_bundle)
    assert not any(report.exists() for report in reports)


def test_one_text_column_model_takes_the_frame() -> None:
    import pandas as pd
    from sklearn.compose import make_column_transformer
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.pipeline import make_pipeline

    from onnxbridge import Predictor

    frame = pd.DataFrame({"text": ["good movie", "bad film", "great fun", "awful plot"] * 5})
    y = [1, 0, 1, 0] * 5
    model = make_pipeline(
        make_column_transformer((TfidfVectorizer(), "text")), LogisticRegression()
    )
    model.fit(frame, y)
    result = convert_estimator(model, frame.head(5))
    assert result.metadata.inputs == [{"name": "text", "dtype": "string", "columns": ["text"]}]
    predicted = Predictor(result.model.SerializeToString()).predict(frame)
    assert (predicted.labels == model.predict(frame)).all()
    np.testing.assert_allclose(predicted.probabilities, model.predict_proba(frame), atol=1e-6)


def test_feature_selector_converts_as_a_transform() -> None:
    from sklearn.feature_selection import RFE

    from onnxbridge import Predictor

    X = np.random.RandomState(0).rand(60, 6)
    model = RFE(LogisticRegression(), n_features_to_select=3).fit(X, X[:, 0] > 0.5)
    result = convert_estimator(model, X[:5])
    assert result.metadata.task == "transform"
    transformed = Predictor(result.model.SerializeToString()).predict(X).transformed
    np.testing.assert_allclose(transformed, model.transform(X), atol=1e-6)


def test_native_multi_output_classifier_and_ragged_samples_are_refused_clearly() -> None:
    from sklearn.tree import DecisionTreeClassifier

    X = np.random.RandomState(0).rand(60, 4)
    y = np.c_[X[:, 0] > 0.5, X[:, 1] > 0.5].astype(int)
    # A classifier fitted on a 2-D target itself (not through a multi-output wrapper).
    model = DecisionTreeClassifier(random_state=0).fit(X, y)
    with pytest.raises(
        ConversionError,
        match=r"DecisionTreeClassifier predicts several targets at once.*MultiOutputClassifier "
        r"or ClassifierChain.*one classifier per target",
    ):
        convert_estimator(model, X[:5])
    with pytest.raises(DataError, match="sample data is not a table"):
        convert_estimator(LogisticRegression().fit(X, y[:, 0]), [[1.0, 2.0], [1.0]])


@pytest.mark.parametrize(
    ("make", "rows", "why"),
    [
        ("DictVectorizer", [{"a": 1.0, "b": "x"}, {"a": 2.0}], "no ONNX operator takes a sequence"),
        ("FeatureHasher", [{"a": 1.0}, {"b": 2.0}], "no ONNX operator takes a sequence of dicts"),
        ("MultiLabelBinarizer", [("a",), ("a", "b")], "a graph input is a rectangular tensor"),
        ("PatchExtractor", np.random.RandomState(0).rand(2, 8, 8), "no output row per input row"),
    ],
)
def test_inputs_that_are_not_tables_are_refused_with_the_reason(make, rows, why) -> None:
    from sklearn import feature_extraction, preprocessing

    module = preprocessing if make == "MultiLabelBinarizer" else feature_extraction
    if make == "PatchExtractor":
        module = feature_extraction.image
    estimator = getattr(module, make)()
    estimator.fit(rows)
    with pytest.raises(ConversionError, match=rf"^{make} .*{why}.*convert the model that follows"):
        convert_estimator(estimator, rows)


# --------------------------------------------------------------- inputs named after columns
def _numeric_table(n: int = 300, seed: int = 0):
    import pandas as pd

    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(
        {
            "reports": rng.integers(0, 5, n),
            "age": rng.normal(40, 10, n),
            "income": rng.lognormal(10, 1, n),
            "owner": rng.random(n) < 0.5,
        }
    )
    frame.loc[rng.random(n) < 0.05, "age"] = np.nan
    y = np.where(frame.reports + (frame.age.fillna(40) > 45) + rng.random(n) > 2, "yes", "no")
    return frame, y


def test_columns_selected_by_name_get_one_input_each_on_a_numeric_table() -> None:
    from sklearn.compose import ColumnTransformer
    from sklearn.impute import SimpleImputer
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from onnxbridge import Predictor

    X, y = _numeric_table()
    prep = ColumnTransformer(
        [
            ("num", make_pipeline(SimpleImputer(), StandardScaler()), ["age", "income"]),
            ("rest", "passthrough", ["reports", "owner"]),
        ]
    )
    model = make_pipeline(prep, LogisticRegression(max_iter=500)).fit(X, y)
    result = convert_estimator(model, X.head(50))
    graph = result.model.graph
    assert [i.name for i in graph.input] == ["reports", "age", "income", "owner"]
    for given in graph.input:
        assert [d.dim_value for d in given.type.tensor_type.shape.dim][1] == 1
    assert [i["columns"] for i in result.metadata.inputs] == [[c] for c in X.columns]
    predicted = Predictor(result.model.SerializeToString()).predict(X, allow_missing=True)
    assert (predicted.labels == model.predict(X)).all()
    np.testing.assert_allclose(predicted.probabilities, model.predict_proba(X), atol=1e-5)
    # Missing values are probed where the model takes them (the imputed columns) only.
    assert result.check.ok and result.check.probe_rows["missing"] == 2
    assert result.check.skipped == [
        "missing: scikit-learn refuses missing values in 'reports', 'owner'"
    ]


def test_make_column_selector_counts_as_by_name() -> None:
    from sklearn.compose import ColumnTransformer, make_column_selector
    from sklearn.preprocessing import StandardScaler

    X, y = _numeric_table()
    X = X.drop(columns="owner").fillna(0.0)
    prep = ColumnTransformer([("s", StandardScaler(), make_column_selector(pattern="a|i"))])
    model = make_pipeline_lr(prep).fit(X, y)
    result = convert_estimator(model, X.head(20))
    assert [i.name for i in result.model.graph.input] == list(X.columns)


def make_pipeline_lr(prep):
    from sklearn.pipeline import make_pipeline

    return make_pipeline(prep, LogisticRegression(max_iter=500))


def test_integer_column_indices_keep_the_single_input(iris_frame) -> None:
    from sklearn.compose import ColumnTransformer
    from sklearn.preprocessing import StandardScaler

    X, y = iris_frame
    model = make_pipeline_lr(ColumnTransformer([("s", StandardScaler(), [0, 1, 2, 3])]))
    result = convert_estimator(model.fit(X.to_numpy(), y), X.to_numpy()[:10])
    assert [i.name for i in result.model.graph.input] == ["input"]


# ------------------------------------------------------------------- the check before writing
class _Shifter(Shifter):
    """Adds 1 to every value; its registered converter adds 2: a wrong converter."""


@pytest.fixture(scope="module")
def wrong_converter():
    return register_wrong_converter(_Shifter)


def _shifted_model(iris_frame):
    from sklearn.pipeline import Pipeline

    X, y = iris_frame
    return Pipeline([("shift", _Shifter()), ("model", LogisticRegression(max_iter=500))]).fit(X, y)


def test_a_diverging_conversion_is_refused_naming_the_step(wrong_converter, iris_frame) -> None:
    X, _ = iris_frame
    model = _shifted_model(iris_frame)
    with pytest.raises(ConversionError) as caught:
        convert_estimator(model, X.head(40))
    message = str(caught.value)
    assert "\n" not in message
    assert "convert refused" in message
    assert "probabilities on" in message
    assert "the first diverging step is step 1 'shift' (_Shifter)" in message
    assert "allow_divergent=True" in message


def test_allow_divergent_returns_the_model_marked_unchecked(wrong_converter, iris_frame) -> None:
    X, _ = iris_frame
    model = _shifted_model(iris_frame)
    with pytest.warns(UserWarning, match="NOT CHECKED"):
        result = convert_estimator(model, X.head(40), allow_divergent=True)
    check = result.check
    assert not check.ok
    assert check.sample_rows == 40 and check.rows == 40 + sum(check.probe_rows.values())
    assert check.differing_rows > 0 and "probabilities" in check.outputs
    assert check.diverging_step["step_name"] == "shift"
    assert check.diverging_step["first_diverging_step"] == 1
    assert any("NOT CHECKED" in n for n in result.notes)


def test_check_reports_rows_and_skipped_probes(iris_frame) -> None:
    X, y = iris_frame
    model = LogisticRegression(max_iter=500).fit(X, y)
    result = convert_estimator(model, X.head(30))
    check = result.check
    assert check.ok and check.differing_rows == 0
    assert check.sample_rows == 30
    assert check.probe_rows == {"extremes": 8}  # min and max of each of the 4 columns
    assert any("missing" in s and "refuses" in s for s in check.skipped)
    assert check.summary() == "0 of 38 rows differ from scikit-learn (30 sample + 8 probe)"


def _divergent_bundle(tmp_path, iris_frame):
    import pandas as pd

    from onnxbridge import Bundle, train_bundle

    good, _ = train_bundle("iris", "LogisticRegression(max_iter=500)", tmp_path / "good")
    holdout = pd.read_parquet(good.holdout_path)
    card = {k: v for k, v in good.card.items() if k != "files"}
    bundle = Bundle.create(
        tmp_path / "bad", card=card, estimator=_shifted_model(iris_frame), holdout=holdout
    )
    return bundle, (f"{_Shifter.__module__}.{_Shifter.__qualname__}",)


def test_refused_bundle_convert_changes_nothing_and_allowed_one_is_recorded(
    wrong_converter, iris_frame, tmp_path
) -> None:
    bundle, trusted = _divergent_bundle(tmp_path, iris_frame)
    with pytest.warns(UserWarning, match="NOT CHECKED"):
        convert_bundle(bundle.path, trusted=trusted, allow_divergent=True)
    card = json.loads(bundle.card_path.read_text())
    assert card["conversion"]["checked"] is False
    assert card["conversion"]["check"]["differing_rows"] > 0
    assert "probabilities" in card["conversion"]["check"]["differing_outputs"]
    assert card["conversion"]["check"]["diverging_step"]["step_name"] == "shift"
    assert card["conversion"]["outputs"] == {"label": "label", "probabilities": "probabilities"}
    before = {p: p.read_bytes() for p in (bundle.onnx_path, bundle.card_path)}
    with pytest.raises(ConversionError, match=r"convert refused.*step 1 'shift'"):
        convert_bundle(bundle.path, trusted=trusted)
    assert {p: p.read_bytes() for p in before} == before


def test_cli_refuses_a_divergent_model_and_allows_it_on_request(
    wrong_converter, iris_frame, tmp_path, capsys
) -> None:
    from cli_support import assert_one_line_error, run

    bundle, trusted = _divergent_bundle(tmp_path, iris_frame)
    code, out, err = run(capsys, "convert", bundle.path, "--trust", trusted[0])
    assert_one_line_error(code, err, r"convert refused: .*rows differ.*step 1 'shift'")
    assert not bundle.onnx_path.exists()
    with pytest.warns(UserWarning, match="NOT CHECKED"):
        code, out, err = run(
            capsys, "convert", bundle.path, "--trust", trusted[0], "--allow-divergent"
        )
    assert code == 0, err
    assert "NOT checked (--allow-divergent):" in out
    assert bundle.onnx_path.exists()


def test_cli_prints_what_was_checked(tmp_path, capsys) -> None:
    from cli_support import run
    from onnxbridge import train_bundle

    train_bundle("iris", "RandomForestClassifier(n_estimators=10, random_state=42)", tmp_path / "b")
    code, out, err = run(capsys, "convert", tmp_path / "b", "--json")
    assert code == 0, err
    printed = json.loads(out)
    assert printed["checked"] is True and printed["check"]["differing_rows"] == 0
    card = json.loads((tmp_path / "b" / "card.json").read_text())
    assert card["conversion"]["checked"] is True
    assert card["conversion"]["check"]["rows"] == printed["check"]["rows"]
    assert card["conversion"]["outputs"] == {"label": "label", "probabilities": "probabilities"}
    code, out, err = run(capsys, "convert", tmp_path / "b")
    assert code == 0, err
    assert re.search(
        r"checked: 0 of \d+ rows differ from scikit-learn \(45 sample \+ \d+ probe\)", out
    )


def test_the_diverging_transformer_inside_a_column_transformer_is_named(
    wrong_converter, iris_frame
) -> None:
    from sklearn.compose import ColumnTransformer
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import StandardScaler

    X, y = iris_frame
    prep = ColumnTransformer(
        [
            ("scale", StandardScaler(), ["sepal length (cm)", "sepal width (cm)"]),
            ("shift", _Shifter(), ["petal length (cm)", "petal width (cm)"]),
        ]
    )
    model = Pipeline([("prep", prep), ("model", LogisticRegression(max_iter=500))]).fit(X, y)
    with pytest.raises(ConversionError) as caught:
        convert_estimator(model, X.head(40))
    assert (
        "the first diverging step is step 1 'prep' (ColumnTransformer), in its transformer "
        "'shift' (_Shifter)"
    ) in str(caught.value)


@pytest.mark.parametrize("unknown", ["ignore", "error"])
def test_unseen_categories_are_probed_where_the_model_takes_them(unknown: str) -> None:
    from sklearn.compose import ColumnTransformer
    from sklearn.impute import SimpleImputer
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder

    X, y = _numeric_table()
    X = X.assign(city=np.random.default_rng(1).choice(["Paris", "Lyon", "Bern"], len(X)))
    text = make_pipeline(
        SimpleImputer(strategy="constant", fill_value="missing"),
        OneHotEncoder(handle_unknown=unknown, sparse_output=False),
    )
    prep = ColumnTransformer(
        [("num", SimpleImputer(), ["age", "income", "reports"]), ("text", text, ["city"])]
    )
    result = convert_estimator(make_pipeline_lr(prep).fit(X, y), X.head(30))
    assert result.check.ok
    if unknown == "ignore":
        assert result.check.probe_rows["unseen"] == 1
    else:
        assert "unseen" not in result.check.probe_rows
        assert "unseen: scikit-learn refuses unseen categories in 'city'" in result.check.skipped
