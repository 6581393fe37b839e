"""The bundle folder: card.json, atomic writes, safe model loading."""

from __future__ import annotations

import json
from pathlib import Path

import joblib
import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from onnxbridge import Bundle, train_bundle
from onnxbridge.bundle import file_sha256, load_estimator, save_estimator
from onnxbridge.errors import BundleError, DataError, ModelSpecError, UnsafeModelFileError


def test_train_bundle_writes_card_model_and_holdout(tmp_path: Path) -> None:
    out = tmp_path / "iris-rf"
    bundle, result = train_bundle(
        "iris", "RandomForestClassifier(n_estimators=10, random_state=42)", out
    )
    assert sorted(p.name for p in out.iterdir()) == ["card.json", "holdout.parquet", "model.skops"]
    card = json.loads((out / "card.json").read_text())
    assert card["task"] == "classification"
    assert card["classes"] == [0, 1, 2]
    assert card["target_names"] == ["setosa", "versicolor", "virginica"]
    assert card["target"] == {"name": "target", "dtype": "int64"}
    assert card["features"][0] == {"name": "sepal length (cm)", "dtype": "float64"}
    assert card["split"] == {
        "test_size": 0.3,
        "seed": 42,
        "stratify": False,
        "train_rows": 105,
        "test_rows": 45,
    }
    assert card["metrics"] == {"accuracy": 1.0}
    assert card["data"]["kind"] == "builtin" and len(card["data"]["sha256"]) == 64
    assert {"python", "scikit-learn", "skl2onnx", "onnxruntime", "numpy"} <= set(card["versions"])
    assert card["files"]["model.skops"] == file_sha256(out / "model.skops")
    X, y = bundle.load_holdout()
    assert X.shape == (45, 4) and len(y) == 45
    assert (bundle.load_estimator().predict(X) == result.estimator.predict(X)).all()


def test_existing_bundle_is_kept_without_overwrite(iris_bundle: Bundle) -> None:
    before = {p.name: p.read_bytes() for p in iris_bundle.path.iterdir() if p.is_file()}
    with pytest.raises(BundleError, match=r"already holds a bundle.*overwrite=True"):
        train_bundle("wine", "LogisticRegression()", iris_bundle.path)
    after = {p.name: p.read_bytes() for p in iris_bundle.path.iterdir() if p.is_file()}
    assert after == before


def test_failed_training_leaves_bundle_untouched(iris_bundle: Bundle) -> None:
    before = {p.name: p.read_bytes() for p in iris_bundle.path.iterdir() if p.is_file()}
    with pytest.raises(ModelSpecError):
        train_bundle("iris", "NoSuchModel()", iris_bundle.path, overwrite=True)
    after = {p.name: p.read_bytes() for p in iris_bundle.path.iterdir() if p.is_file()}
    assert after == before
    assert not [p for p in iris_bundle.path.parent.iterdir() if p.name.startswith(".")]


def test_overwrite_replaces_bundle(iris_bundle: Bundle) -> None:
    bundle, _ = train_bundle(
        "wine", "LogisticRegression(max_iter=5000)", iris_bundle.path, overwrite=True
    )
    assert bundle.card["data"]["name"] == "wine"
    assert not (bundle.path / "model.onnx").exists()


def test_overwrite_never_replaces_a_folder_that_is_not_a_bundle(tmp_path: Path) -> None:
    precious = tmp_path / "work"
    precious.mkdir()
    (precious / "thesis.txt").write_text("years of work")
    with pytest.raises(BundleError, match=r"is not empty and is not a bundle"):
        train_bundle("iris", "LogisticRegression()", precious, overwrite=True)
    assert (precious / "thesis.txt").read_text() == "years of work"
    assert sorted(p.name for p in precious.iterdir()) == ["thesis.txt"]


def test_open_missing_and_non_bundle(tmp_path: Path) -> None:
    with pytest.raises(BundleError, match=r"does not exist or is not a folder"):
        Bundle.open(tmp_path / "nope")
    with pytest.raises(BundleError, match=r"has no card.json"):
        Bundle.open(tmp_path)


def test_damaged_card(iris_bundle: Bundle) -> None:
    iris_bundle.card_path.write_text("{not json")
    with pytest.raises(BundleError, match=r"card.json' is damaged: it is not valid JSON"):
        Bundle.open(iris_bundle.path)


def _edit_card(bundle: Bundle, edit) -> None:
    card = json.loads(bundle.card_path.read_text())
    edit(card)
    bundle.card_path.write_text(json.dumps(card))


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda c: c["target"].pop("name"), r"'target\.name' should be a text, got None"),
        (lambda c: c.__setitem__("target", "y"), r"'target' should be an object, got 'y'"),
        (lambda c: c.__setitem__("files", []), r"'files' should be an object, got \[\]"),
        (lambda c: c.__setitem__("model", 7), r"'model' should be an object, got 7"),
        (lambda c: c.__setitem__("task", "clustering"), r"'task' is 'clustering'; it must be"),
        (lambda c: c["features"].__setitem__(0, {}), r"features\[0\] should be an object"),
        (lambda c: c.pop("task"), r"it lacks the field task"),
        (lambda c: c.__setitem__("categories", []), r"'categories' should be an object, got"),
        (
            lambda c: c.__setitem__("categories", {"city": "Paris"}),
            r"'categories\.city' should be a list \(the column's training values\), got 'Paris'",
        ),
        (
            lambda c: c.__setitem__("golden", {"versions": 7}),
            r"'golden\.versions' should be an object, got 7; .*re-run `onnxbridge convert`",
        ),
    ],
)
def test_edited_card_is_a_bundle_error_naming_the_field(
    iris_bundle: Bundle, edit, message: str
) -> None:
    _edit_card(iris_bundle, edit)
    with pytest.raises(
        BundleError, match=r"card\.json' is damaged: (the field )?" + message
    ) as info:
        Bundle.open(iris_bundle.path)
    assert "restore it from a copy of the bundle" in str(info.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (b'{"features": [', r"it is not valid JSON"),
        (b"[1, 2]", r"it holds a list, not a JSON object"),
        (b"\xff\xfe{}", r"it is not UTF-8 text"),
    ],
)
def test_truncated_or_foreign_card(iris_bundle: Bundle, text: bytes, message: str) -> None:
    iris_bundle.card_path.write_bytes(text)
    with pytest.raises(BundleError, match=r"card\.json' is damaged: " + message):
        Bundle.open(iris_bundle.path)


def test_card_naming_columns_the_holdout_lacks(iris_bundle: Bundle) -> None:
    _edit_card(iris_bundle, lambda c: c["target"].__setitem__("name", "species"))
    with pytest.raises(BundleError, match=r"holdout\.parquet .* has no column 'species'"):
        Bundle.open(iris_bundle.path).load_holdout()


def test_tampered_model_is_detected(iris_bundle: Bundle) -> None:
    with iris_bundle.model_path.open("ab") as fh:
        fh.write(b"x")
    with pytest.raises(BundleError, match=r"model.skops .* changed since it was recorded"):
        iris_bundle.load_estimator()


def test_pickle_needs_explicit_permission(tmp_path: Path) -> None:
    model = LogisticRegression().fit([[0.0], [1.0]], [0, 1])
    path = tmp_path / "model.joblib"
    joblib.dump(model, path)
    with pytest.raises(UnsafeModelFileError, match=r"pickle file.*allow_pickle=True"):
        load_estimator(path)
    with pytest.warns(UserWarning, match=r"runs any code in the file"):
        loaded = load_estimator(path, allow_pickle=True)
    assert loaded.predict([[1.0]])[0] == 1


def test_skops_round_trip_and_bad_files(tmp_path: Path) -> None:
    model = LogisticRegression().fit([[0.0], [1.0]], [0, 1])
    save_estimator(model, tmp_path / "m.skops")
    assert load_estimator(tmp_path / "m.skops").predict([[0.0]])[0] == 0
    (tmp_path / "bad.skops").write_text("garbage")
    with pytest.raises(BundleError, match=r"cannot read .* as a skops file"):
        load_estimator(tmp_path / "bad.skops")
    with pytest.raises(DataError, match=r"does not exist"):
        load_estimator(tmp_path / "missing.skops")
    (tmp_path / "m.txt").write_text("x")
    with pytest.raises(DataError, match=r"unknown extension '.txt'"):
        load_estimator(tmp_path / "m.txt")


def test_functions_in_skops_files_need_explicit_trust(tmp_path: Path) -> None:
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import FunctionTransformer

    model = make_pipeline(FunctionTransformer(func=abs), LogisticRegression())
    model.fit(np.array([[0.0], [1.0], [-1.0]]), [0, 1, 1])
    path = tmp_path / "fn.skops"
    save_estimator(model, path)
    with pytest.raises(
        UnsafeModelFileError,
        match=r"holds types or functions onnxbridge does not trust: "
        r"builtins.abs;.*trusted=NAME",
    ):
        load_estimator(path)
    loaded = load_estimator(path, trusted=("builtins.abs",))
    assert loaded.predict(np.array([[-1.0]]))[0] == 1


def test_files_get_ordinary_permissions(tmp_path: Path) -> None:
    import os
    import stat

    mask = os.umask(0o022)
    try:
        bundle, _ = train_bundle("iris", "LogisticRegression(max_iter=500)", tmp_path / "b")
    finally:
        os.umask(mask)
    assert stat.S_IMODE(bundle.path.stat().st_mode) == 0o755
    for name in ("card.json", "model.skops", "holdout.parquet"):
        assert stat.S_IMODE((bundle.path / name).stat().st_mode) == 0o644, name


def test_open_a_file_instead_of_a_bundle(iris_bundle: Bundle) -> None:
    with pytest.raises(BundleError, match=r"is a file, not a bundle folder"):
        Bundle.open(iris_bundle.onnx_path)
