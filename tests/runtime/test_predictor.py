"""Predictor: a real ONNX Runtime session fed from DataFrames, arrays and records."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from skl2onnx import convert_sklearn
from skl2onnx.common.data_types import FloatTensorType
from sklearn.datasets import load_iris
from sklearn.linear_model import LinearRegression

from onnxbridge import Bundle, Predictor, convert_bundle, convert_estimator, train_bundle
from onnxbridge.errors import OnnxModelError, SchemaMismatchError


@pytest.fixture
def predictor(iris_bundle: Bundle) -> Predictor:
    return Predictor(iris_bundle.onnx_path)


def test_dataframe_matches_sklearn(iris_bundle: Bundle, predictor: Predictor) -> None:
    X, _ = iris_bundle.load_holdout()
    model = iris_bundle.load_estimator()
    result = predictor.predict(X)
    assert (result.labels == model.predict(X)).all()
    np.testing.assert_allclose(result.probabilities, model.predict_proba(X), atol=1e-6)
    frame = result.to_frame()
    assert list(frame.columns) == ["label", "proba_0", "proba_1", "proba_2"]
    assert len(frame) == len(X)


def test_columns_are_matched_by_name_not_position(
    iris_bundle: Bundle, predictor: Predictor
) -> None:
    X, _ = iris_bundle.load_holdout()
    shuffled = X[X.columns[::-1]]
    assert (predictor.predict(shuffled).labels == predictor.predict(X).labels).all()


def test_float64_array_and_records_are_cast(iris_bundle: Bundle, predictor: Predictor) -> None:
    X, _ = iris_bundle.load_holdout()
    from_array = predictor.predict(X.to_numpy(np.float64))
    from_records = predictor.predict(X.to_dict(orient="records"))
    from_int = predictor.predict(X.round().astype(int))
    assert (from_array.labels == from_records.labels).all()
    assert len(from_int) == len(X)
    assert predictor.prepare(X)["input"].dtype == np.float32
    one_row = predictor.predict(X.to_numpy()[0])
    assert len(one_row) == 1


def test_target_column_is_ignored_but_other_extras_are_named(
    iris_bundle: Bundle, predictor: Predictor
) -> None:
    frame = pd.read_parquet(iris_bundle.holdout_path)  # features + the target column
    assert len(predictor.predict(frame)) == len(frame)
    frame["row_id"] = range(len(frame))
    with pytest.raises(SchemaMismatchError, match=r"unexpected columns: 'row_id'.*ignore_extra="):
        predictor.predict(frame)
    assert len(predictor.predict(frame, ignore_extra=True)) == len(frame)


def test_missing_columns_are_named(iris_bundle: Bundle, predictor: Predictor) -> None:
    X, _ = iris_bundle.load_holdout()
    with pytest.raises(SchemaMismatchError, match=r"missing columns: 'petal width \(cm\)'"):
        predictor.predict(X.drop(columns=["petal width (cm)"]))


def test_wrong_width_and_non_numeric(predictor: Predictor) -> None:
    with pytest.raises(SchemaMismatchError, match=r"data has 3 columns but the model expects 4"):
        predictor.predict(np.zeros((2, 3)))
    bad = pd.DataFrame({c: ["a", "b"] for c in predictor.feature_names})
    with pytest.raises(SchemaMismatchError, match=r"are not numeric"):
        predictor.predict(bad)
    with pytest.raises(SchemaMismatchError, match=r"no rows"):
        predictor.predict(np.zeros((0, 4)))


def test_regression_values(tmp_path: Path) -> None:
    bundle, result = train_bundle("diabetes", "LinearRegression()", tmp_path / "d")
    convert_bundle(bundle)
    X, _ = bundle.load_holdout()
    out = Predictor(bundle.onnx_path).predict(X)
    assert out.labels is None and out.values.shape == (len(X),)
    np.testing.assert_allclose(out.values, result.estimator.predict(X), rtol=1e-5, atol=1e-5)
    assert list(out.to_frame().columns) == ["prediction"]


def test_zipmap_model_gives_a_matrix() -> None:
    X, y = load_iris(return_X_y=True, as_frame=True)
    from sklearn.linear_model import LogisticRegression

    model = LogisticRegression(max_iter=500).fit(X, y)
    conv = convert_estimator(model, X.head(2), zipmap=True)
    out = Predictor(conv.model.SerializeToString()).predict(X)
    assert out.probabilities.shape == (150, 3)
    np.testing.assert_allclose(out.probabilities, model.predict_proba(X), atol=1e-5)


def test_foreign_model_without_metadata() -> None:
    X, y = load_iris(return_X_y=True)
    model = LinearRegression().fit(X, y)
    onx = convert_sklearn(model, initial_types=[("X", FloatTensorType([None, 4]))], target_opset=15)
    p = Predictor(onx.SerializeToString())
    assert p.metadata is None and p.input_dtype == np.float32
    out = p.predict(X)
    np.testing.assert_allclose(out.values, model.predict(X), atol=1e-4)
    with pytest.raises(SchemaMismatchError, match=r"takes 4 columns but the data has 2"):
        p.predict(pd.DataFrame(X[:, :2]))


def _identity_model(shape: list[int | None]) -> bytes:
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])],
        "identity",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model.SerializeToString()


def test_an_array_for_an_input_of_unknown_width_is_answered() -> None:
    # No metadata and no fixed width: the array goes through the general coercion.
    p = Predictor(_identity_model([None, None]))
    rows = np.arange(6, dtype=np.float64).reshape(3, 2)
    np.testing.assert_array_equal(p.predict(rows).values, rows.astype(np.float32))


@pytest.mark.parametrize(
    "rows",
    [
        np.array([["5.1", "1e300"]]),
        np.array([[5.1, 1e300]], dtype=object),
        np.array([[5.1, "inf"]], dtype=object),
    ],
    ids=["text", "objects", "text-inf"],
)
def test_numbers_held_as_objects_or_text_meet_the_value_rule(rows: np.ndarray) -> None:
    p = Predictor(_identity_model([None, 2]))
    with pytest.raises(
        SchemaMismatchError, match=r"bad value in row 1, column .*: (1e\+300|inf) is"
    ):
        p.predict(rows)
    np.testing.assert_allclose(p.predict(np.array([["5.5", "1"]])).values, [[5.5, 1.0]])


@pytest.mark.parametrize(
    ("content", "pattern"),
    [
        (b"", r"is not a loadable ONNX model"),
        (b"sepal,petal\n1,2\n", r"is not a loadable ONNX model"),
    ],
)
def test_bad_files(tmp_path: Path, content: bytes, pattern: str) -> None:
    path = tmp_path / "model.onnx"
    path.write_bytes(content)
    with pytest.raises(OnnxModelError, match=pattern):
        Predictor(path)


def test_truncated_and_missing_files(iris_bundle: Bundle, tmp_path: Path) -> None:
    data = iris_bundle.onnx_path.read_bytes()
    path = tmp_path / "cut.onnx"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(OnnxModelError, match=r"cut.onnx' is not a loadable ONNX model"):
        Predictor(path)
    with pytest.raises(OnnxModelError, match=r"does not exist"):
        Predictor(tmp_path / "missing.onnx")


@pytest.mark.parametrize(
    ("labels", "expected_type"), [([False, True], np.bool_), ([0.0, 1.0], np.floating)]
)
def test_bool_and_float_classes_come_back_as_trained(
    tmp_path: Path, labels: list, expected_type: type
) -> None:
    rng = np.random.RandomState(0)
    X = rng.normal(size=(200, 2))
    frame = pd.DataFrame(X, columns=["a", "b"])
    frame["y"] = np.where(X[:, 0] > 0, labels[1], labels[0])
    path = tmp_path / "d.csv"
    frame.to_csv(path, index=False)
    bundle, result = train_bundle(str(path), "LogisticRegression()", tmp_path / "b", target="y")
    convert_bundle(bundle)
    X_test, _ = bundle.load_holdout()
    out = Predictor(bundle.onnx_path).predict(X_test)
    assert np.issubdtype(out.labels.dtype, expected_type)
    assert (out.labels == result.estimator.predict(X_test)).all()
    assert list(out.to_frame().columns) == ["label", f"proba_{labels[0]}", f"proba_{labels[1]}"]


def test_single_row_mapping(iris_bundle: Bundle, predictor: Predictor) -> None:
    X, _ = iris_bundle.load_holdout()
    row = X.iloc[0].to_dict()
    out = predictor.predict(row)
    assert len(out) == 1 and out.labels[0] == predictor.predict(X.head(1)).labels[0]


def test_missing_values_refused_when_the_source_refuses_them(tmp_path: Path) -> None:
    bundle, _ = train_bundle("iris", "LogisticRegression(max_iter=500)", tmp_path / "lr")
    convert_bundle(bundle)
    p = Predictor(bundle.onnx_path)
    assert p.metadata.missing_values == "refused"
    X, _ = bundle.load_holdout()
    X = X.copy()
    X.iloc[[1, 4], 2] = np.nan
    with pytest.raises(
        SchemaMismatchError,
        match=r"NaN\) in 2 rows, columns: 'petal length \(cm\)'"
        r" \(2\).*allow_missing=True",
    ):
        p.predict(X)
    out = p.predict(X, allow_missing=True)
    assert np.isnan(out.probabilities[1]).all() and not np.isnan(out.probabilities[0]).any()


def test_missing_values_pass_when_the_source_accepts_them(predictor: Predictor) -> None:
    assert predictor.metadata.missing_values == "accepted"  # sklearn forests route NaN
    row = np.array([[5.1, np.nan, 1.4, 0.2]])
    assert len(predictor.predict(row)) == 1


def test_large_calls_are_checked_for_missing_values(tmp_path: Path) -> None:
    from sklearn.datasets import load_iris
    from sklearn.linear_model import LogisticRegression

    from onnxbridge import convert_estimator

    X, y = load_iris(return_X_y=True)
    model = LogisticRegression(max_iter=500).fit(X, y)
    predictor = Predictor(convert_estimator(model, X[:20]).save(tmp_path / "lr.onnx"))
    assert predictor.metadata is not None and predictor.metadata.missing_values == "refused"
    # Large enough for the min-reduction check, past the bound path's 256 rows.
    rows = np.tile(X, (120, 1)).astype(np.float32)
    clean = predictor.predict(rows)
    expected = predictor.session_for(len(rows)).run(None, {"input": rows})
    np.testing.assert_array_equal(clean.labels, expected[0])
    np.testing.assert_array_equal(clean.probabilities, expected[1])
    rows[-1, 3] = np.nan
    with pytest.raises(
        SchemaMismatchError, match=r"missing values \(NaN\) in 1 row, columns: 'x3' \(1\)"
    ):
        predictor.predict(rows)
    assert len(predictor.predict(rows, allow_missing=True)) == len(rows)


def test_large_arrays_of_any_layout_and_float_type_give_the_same_results(tmp_path: Path) -> None:
    """Large float arrays skip prepare(): C-ordered float32 rows go in as they are, others are
    made so first — every layout and float width must give the same predictions and the same
    missing-values check."""
    from sklearn.linear_model import LogisticRegression

    X, y = load_iris(return_X_y=True)
    model = LogisticRegression(max_iter=500).fit(X, y)
    predictor = Predictor(convert_estimator(model, X[:20]).save(tmp_path / "lr.onnx"))
    rows = np.tile(X, (40, 1)).astype(np.float32)  # 6 000 rows: past the bound path
    expected = predictor.session_for(len(rows)).run(None, {"input": rows})
    wide = np.zeros((2 * len(rows), rows.shape[1]), dtype=np.float32)
    wide[::2] = rows
    for layout in (
        rows,
        np.asfortranarray(rows),
        rows.astype(np.float64),
        wide[::2],  # a strided view
        rows.astype(">f4"),  # big-endian float32
    ):
        got = predictor.predict(layout)
        np.testing.assert_array_equal(got.labels, expected[0])
        np.testing.assert_array_equal(got.probabilities, expected[1])
        bad = np.array(layout, order="K")
        bad[len(bad) // 2, 1] = np.nan
        with pytest.raises(SchemaMismatchError, match=r"missing values \(NaN\) in 1 row"):
            predictor.predict(bad)


# Values the input's element type cannot take: refused on every entry path, by row and column.
BAD_FLOATS = [
    (1e300, r"1e\+300 is out of range for float32, which takes finite numbers"),
    (np.inf, r"inf is not a finite number the model can score: float32 takes finite numbers"),
    (-np.inf, r"-inf is not a finite number the model can score"),
]


@pytest.mark.parametrize(("value", "message"), BAD_FLOATS)
@pytest.mark.parametrize("rows", [1, 40, 3000])  # the bound path, the plain path, large calls
def test_values_a_float32_input_cannot_take_are_refused(
    iris_bundle: Bundle, predictor: Predictor, value: float, message: str, rows: int
) -> None:
    X, _ = iris_bundle.load_holdout()
    frame = X.iloc[np.arange(rows) % len(X)].reset_index(drop=True).astype(np.float64)
    frame.iloc[rows - 1, 2] = value
    column = X.columns[2]
    where = re.escape(f"bad value in row {rows}, column '{column}': ")
    data = [frame, frame.to_numpy(), frame.to_dict(orient="records")]
    if np.isinf(value):
        data.append(frame.to_numpy(np.float32))  # ±inf given in the input's own type
    for given in data:
        with pytest.raises(SchemaMismatchError, match=where + message):
            predictor.predict(given)
    predictor.predict(frame.iloc[: rows - 1] if rows > 1 else X.iloc[:1])  # still serves


def test_nan_keeps_its_meaning_next_to_the_value_rule(predictor: Predictor) -> None:
    row = np.array([[5.1, np.nan, 1.4, 0.2]])  # the forest takes missing values
    assert len(predictor.predict(row)) == 1
    assert len(predictor.predict(np.repeat(row, 3000, axis=0))) == 3000
    row[0, 0] = np.inf
    with pytest.raises(SchemaMismatchError, match=r"row 1, column 'sepal length \(cm\)': inf"):
        predictor.predict(row)


def test_float64_rows_at_float32s_edge_are_answered(predictor: Predictor) -> None:
    edge = float(np.finfo(np.float32).max)
    rows = np.array([[edge, -edge, 1e30, -1e-38]])
    assert len(predictor.predict(rows)) == 1
    assert len(predictor.predict(np.repeat(rows, 300, axis=0))) == 300


def _integer_input_model(dtype: int) -> bytes:
    """A hand-built model with one [N, 2] input of ONNX type ``dtype``, echoed as float."""
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Cast", ["x"], ["value"], to=TensorProto.FLOAT)],
        "cast",
        [helper.make_tensor_value_info("x", dtype, ["N", 2])],
        [helper.make_tensor_value_info("value", TensorProto.FLOAT, ["N", 2])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model.SerializeToString()


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([[1.0, 1.5]], r"row 1, column '1': 1.5 is not an integer: int64 takes integers"),
        ([[1.0, 2.0], [2.0**63, 0.0]], r"row 2, column '0': 9.22\d*e\+18 is out of range"),
        ([[np.nan, 1.0]], r"row 1, column '0': nan is a missing value \(NaN\), which an integer"),
        ([[np.inf, 1.0]], r"row 1, column '0': inf is not an integer"),
    ],
)
def test_values_an_integer_input_cannot_take_are_refused(rows: list, message: str) -> None:
    from onnx import TensorProto

    predictor = Predictor(_integer_input_model(TensorProto.INT64))
    for given in (np.array(rows), pd.DataFrame(rows)):
        with pytest.raises(SchemaMismatchError, match=message):
            predictor.predict(given)
    np.testing.assert_array_equal(
        predictor.predict(np.array([[-(2.0**63), 3.0]])).values, [[-(2.0**63), 3.0]]
    )


def test_values_a_bool_input_cannot_take_are_refused() -> None:
    from onnx import TensorProto

    predictor = Predictor(_integer_input_model(TensorProto.BOOL))
    with pytest.raises(SchemaMismatchError, match=r"row 1, column '1': 2 is not a boolean"):
        predictor.predict(np.array([[1, 2]]))
    raw = np.frombuffer(bytes([1, 255]), dtype=np.bool_).reshape(1, 2)  # bytes, not booleans
    with pytest.raises(SchemaMismatchError, match=r"row 1, column '1': 255 is not a boolean"):
        predictor.predict(raw)
    np.testing.assert_array_equal(predictor.predict(np.array([[0, 1]])).values, [[0.0, 1.0]])


@pytest.mark.parametrize("spec", ["binary", "multiclass", "regressor"])
def test_large_linear_calls_refuse_values_wherever_nan_is_checked(
    tmp_path: Path, spec: str
) -> None:
    """Large calls of linear models check NaN on an output (or the session's NaN flag) rather
    than the input; values the input cannot take are refused there too, each in turn."""
    from sklearn.datasets import make_classification, make_regression
    from sklearn.linear_model import LinearRegression, LogisticRegression

    if spec == "regressor":
        X, y = make_regression(n_samples=400, n_features=28, random_state=0)
        model = LinearRegression().fit(X, y)
    else:
        X, y = make_classification(
            n_samples=400, n_features=28, n_informative=15, random_state=0,
            n_classes=2 if spec == "binary" else 3,
        )  # fmt: skip
        model = LogisticRegression(max_iter=1000).fit(X, y)
    predictor = Predictor(convert_estimator(model, X[:20]).save(tmp_path / "m.onnx"))
    rows = np.tile(X, (13, 1))  # 5 200 rows: past the output check's 2 048 and the dot products'
    assert len(predictor.predict(rows)) == len(rows)
    for value, message in [
        (np.inf, "inf is not a finite number"),
        (-np.inf, "-inf is not a finite number"),
        (1e300, r"1e\+300 is out of range for float32"),
        (-1e300, r"-1e\+300 is out of range for float32"),
    ]:
        bad = rows.copy()
        bad[4321, 7] = value
        for given in (bad, bad.astype(np.float32)) if np.isinf(value) else (bad,):
            with pytest.raises(SchemaMismatchError, match=rf"row 4322, column 'x7': {message}"):
                predictor.predict(given)
    bad = rows.copy()
    bad[10, 3] = np.nan
    with pytest.raises(SchemaMismatchError, match=r"missing values \(NaN\) in 1 row"):
        predictor.predict(bad)
    bad[11, 4] = np.inf
    with pytest.raises(SchemaMismatchError, match=r"row 12, column 'x4': inf is not a finite"):
        predictor.predict(bad, allow_missing=True)


def test_a_boolean_column_with_missing_values_is_read_as_one_zero_and_nan(
    tmp_path: Path,
) -> None:
    # pandas reads a file's boolean column that has a gap as objects (True, False, NaN); the
    # model takes it as a boolean column is taken: 1.0 / 0.0, and the gap as a missing value.
    rng = np.random.RandomState(0)
    table = pd.DataFrame({"size": rng.rand(300) * 100, "garden": rng.rand(300) > 0.5})
    table["churn"] = (table["size"] > 50) ^ table["garden"]
    table.to_csv(tmp_path / "train.csv", index=False)
    bundle, _ = train_bundle(
        str(tmp_path / "train.csv"),
        "HistGradientBoostingClassifier(max_iter=20, random_state=0)",
        tmp_path / "b",
        target="churn",
    )
    convert_bundle(bundle.path)
    new = table.drop(columns="churn").head(20)
    new["garden"] = new["garden"].astype(object)
    new.loc[3, "garden"] = None
    new.to_csv(tmp_path / "new.csv", index=False)
    read = pd.read_csv(tmp_path / "new.csv")
    assert read["garden"].dtype == object
    got = Predictor(bundle.onnx_path).predict(read)
    numbers = read.assign(garden=read["garden"].map({True: 1.0, False: 0.0}))
    np.testing.assert_array_equal(
        got.probabilities, Predictor(bundle.onnx_path).predict(numbers).probabilities
    )
    expected = bundle.load_estimator().predict_proba(numbers)
    np.testing.assert_allclose(got.probabilities, expected, atol=1e-5)
