"""Damaged trees: .skops files whose tree arrays would make scikit-learn read outside them.

``sklearn.tree._tree.Tree`` and histogram gradient boosting's ``TreePredictor`` are on the trusted
list (every tree model holds them), and scikit-learn walks their arrays in compiled code without
bounds checks: a child index out of range, a cycle or a feature beyond the rows reads outside
memory or never ends. Each file here is a real fitted model with one value of one tree changed
(through the tree's own ``__setstate__``, or its node array), saved with skops. Every command that
loads it must refuse it before running the model: exit 2, one ``error:`` line naming the tree, the
node and the value, nothing touched. Legitimate tree models of every kind still load.
"""

from __future__ import annotations

import json
import subprocess
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import skops.io as sio

from gadget_support import bundle_with, cli, snapshot
from onnxbridge import Bundle, UnsafeModelFileError, load_estimator, save_estimator

AREA = "gadgets"


def _set_node(tree: Any, field: str, node: int, value: int) -> None:
    """Change one field of one node through the tree's own state, as a crafted file would."""
    state = tree.__getstate__()
    nodes = state["nodes"].copy()
    nodes[field][node] = value
    state["nodes"] = nodes
    tree.__setstate__(state)


def _first_internal_after_root(tree: Any) -> int:
    return int(np.flatnonzero(tree.children_left != -1)[1])


def _first_leaf(tree: Any) -> int:
    return int(np.flatnonzero(tree.children_left == -1)[0])


# What each damage does to tree 3 of the forest, and the text the refusal must hold.
DAMAGES = {
    "child beyond the array": (
        lambda t: _set_node(t, "left_child", 0, 10**6),
        lambda t: f"node 0: left child 1000000 out of range 1..{t.node_count - 1}",
    ),
    "cycle back to the root": (
        lambda t: _set_node(t, "right_child", _first_internal_after_root(t), 0),
        lambda t: f"node {_first_internal_after_root(t)}: right child 0 out of range",
    ),
    "feature beyond the columns": (
        lambda t: _set_node(t, "feature", 0, 4),
        lambda t: "node 0: feature 4 out of range 0..3",
    ),
    "negative feature": (
        lambda t: _set_node(t, "feature", 0, -(10**6)),
        lambda t: "node 0: feature -1000000 out of range 0..3",
    ),
    "half a leaf": (
        lambda t: _set_node(t, "left_child", _first_leaf(t), 1),
        lambda t: f"node {_first_leaf(t)}: children 1 and -1, one a leaf marker",
    ),
}


def _damaged_forest(bundle: Bundle, damage: str) -> tuple[Any, str]:
    """The bundle's forest with tree 3 damaged, and the text its refusal must hold."""
    model = bundle.load_estimator()
    tree = model.estimators_[3].tree_
    expected = DAMAGES[damage][1](tree)
    DAMAGES[damage][0](tree)
    return model, f"model.estimators_[3].tree_: {expected}"


COMMANDS = {
    "convert-bundle": ["convert", "{bundle}"],
    "validate-bundle": ["validate", "{bundle}"],
    "convert-file": ["convert", "{file}", "--sample", "{sample}", "--out", "{out}"],
    "validate-reference": ["validate", "{onnx}", "--reference", "{file}", "--data", "{data}"],
}


def _refused(result: subprocess.CompletedProcess[str], expected: str) -> None:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "holds a damaged tree (" in lines[0], lines[0]
    assert expected in lines[0], lines[0]
    assert lines[0].endswith("re-save the model from its source"), lines[0]
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("command", ["convert-bundle", "validate-bundle"])
@pytest.mark.parametrize("damage", DAMAGES)
def test_bundle_commands_refuse_a_damaged_tree(
    damage: str, command: str, iris_bundle: Bundle, tmp_path: Path, figures
) -> None:
    model, expected = _damaged_forest(iris_bundle, damage)
    model_file = tmp_path / "damaged.skops"
    sio.dump(model, model_file)
    bundle = bundle_with(iris_bundle, model_file, tmp_path / "damaged-bundle")
    before = snapshot(tmp_path)

    result = cli(*[arg.format(bundle=bundle) for arg in COMMANDS[command]])
    figures(AREA, "commands run", 1)
    _refused(result, expected)
    figures(AREA, "damaged trees refused", 1)
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("command", ["convert-file", "validate-reference"])
def test_model_file_commands_refuse_a_damaged_tree(
    command: str, iris_bundle: Bundle, tmp_path: Path, figures
) -> None:
    model, expected = _damaged_forest(iris_bundle, "cycle back to the root")
    X, y = iris_bundle.load_holdout()
    paths = {
        "file": tmp_path / "damaged.skops",
        "sample": tmp_path / "sample.csv",
        "data": tmp_path / "data.csv",
        "out": tmp_path / "out.onnx",
        "onnx": iris_bundle.onnx_path,
    }
    sio.dump(model, paths["file"])
    X.to_csv(paths["sample"], index=False)
    X.assign(target=y).to_csv(paths["data"], index=False)
    before = snapshot(tmp_path)

    result = cli(*[arg.format(**paths) for arg in COMMANDS[command]])
    figures(AREA, "commands run", 1)
    _refused(result, expected)
    figures(AREA, "damaged trees refused", 1)
    assert snapshot(tmp_path) == before


def _categories_frame() -> tuple[pd.DataFrame, pd.Series]:
    rng = np.random.RandomState(0)
    X = pd.DataFrame(rng.rand(400, 3), columns=list("abc"))
    X["kind"] = pd.Categorical(rng.choice(list("wxyz"), 400))
    y = (X["kind"].isin(["x", "z"]) ^ (X["a"] > 0.7)).astype(int)
    return X, y


def _hgb_with_category_splits() -> Any:
    from sklearn.ensemble import HistGradientBoostingClassifier

    X, y = _categories_frame()
    model = HistGradientBoostingClassifier(max_iter=5, categorical_features="from_dtype")
    return model.fit(X, y)


def _predictor_nodes(model: Any) -> np.ndarray:
    # The first iteration's predictor: its node array is what a crafted file would change.
    return model._predictors[0][0].nodes


def _internal(nodes: np.ndarray, categorical: bool) -> int:
    return int(
        np.flatnonzero((nodes["is_leaf"] == 0) & (nodes["is_categorical"] == categorical))[0]
    )


HGB_DAMAGES = {
    "child beyond the array": lambda nodes: ("left", 0, 10**6, "node 0: left child 1000000"),
    "cycle back to the root": lambda nodes: (
        "right",
        _internal(nodes, False),
        0,
        "right child 0 out of range",
    ),
    "feature beyond the columns": lambda nodes: ("feature_idx", 0, 4, "node 0: feature 4"),
    "bitset beyond the array": lambda nodes: (
        "bitset_idx",
        _internal(nodes, True),
        999,
        "category bitset 999 out of range",
    ),
    "category split on a number column": lambda nodes: (
        "is_categorical",
        _internal(nodes, False),
        1,
        "a category split on feature",
    ),
}


@pytest.mark.parametrize("damage", HGB_DAMAGES)
def test_a_damaged_hist_gradient_boosting_predictor_is_refused(
    damage: str, tmp_path: Path, figures
) -> None:
    model = _hgb_with_category_splits()
    nodes = _predictor_nodes(model)
    assert (nodes["is_categorical"] == 1).any()  # the model really splits on the category
    field, node, value, expected = HGB_DAMAGES[damage](nodes)
    nodes[field][node] = value
    path = tmp_path / "hgb.skops"
    sio.dump(model, path)
    with pytest.raises(UnsafeModelFileError, match="holds a damaged tree") as caught:
        load_estimator(path)
    assert "model._predictors[0][0]: " in str(caught.value)
    assert expected in str(caught.value)
    figures(AREA, "damaged trees refused", 1)


def test_an_ensemble_member_fitted_on_more_columns_is_refused(tmp_path: Path, figures) -> None:
    # A forest passes its rows to its trees unchecked: a member whose tree splits on column 7
    # of a 4-column forest would read past each row.
    from sklearn.datasets import load_iris
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.tree import DecisionTreeClassifier

    X, y = load_iris(return_X_y=True)
    forest = RandomForestClassifier(n_estimators=3, random_state=0).fit(X, y)
    wide = np.hstack([X, X])
    forest.estimators_[1] = DecisionTreeClassifier(random_state=0).fit(wide, y)
    path = tmp_path / "forest.skops"
    sio.dump(forest, path)
    with pytest.raises(
        UnsafeModelFileError,
        match=r"model\.estimators_\[1\]: fitted on 8 columns where the ensemble gives it 4",
    ):
        load_estimator(path)
    figures(AREA, "damaged trees refused", 1)


@pytest.mark.parametrize("chain", ["RegressorChain", "ClassifierChain"])
def test_chained_trees_fitted_on_more_columns_pass_the_check(
    chain: str, tmp_path: Path, figures
) -> None:
    # A chain fits member i on the rows plus the i targets before it, and each member checks
    # its own rows: wider members are how a chain works, not a damaged tree.
    from sklearn import multioutput, tree

    rng = np.random.RandomState(0)
    X = rng.rand(200, 4)
    if chain == "RegressorChain":
        model = multioutput.RegressorChain(tree.DecisionTreeRegressor(random_state=0))
        Y = np.column_stack([X[:, 0] + X[:, 1], X[:, 2] * 2, X[:, 3] - X[:, 0]])
    else:
        model = multioutput.ClassifierChain(tree.DecisionTreeClassifier(random_state=0))
        Y = np.column_stack([X[:, 0] > 0.5, X[:, 1] > 0.3, X[:, 2] > 0.7]).astype(int)
    model.fit(X, Y)
    path = tmp_path / "chain.skops"
    save_estimator(model, path)
    loaded = load_estimator(path)
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    figures(AREA, "legitimate tree models loaded", 1)


def _legit_tree_models() -> list[tuple[str, Any, str]]:
    from sklearn import ensemble, tree

    return [
        ("DecisionTreeClassifier", tree.DecisionTreeClassifier(random_state=0), "binary"),
        (
            "DecisionTreeRegressor-best-first",
            tree.DecisionTreeRegressor(max_leaf_nodes=12, random_state=0),
            "regression",
        ),
        ("ExtraTreeClassifier", tree.ExtraTreeClassifier(random_state=0), "binary"),
        ("RandomForestClassifier", ensemble.RandomForestClassifier(10, random_state=0), "binary"),
        ("ExtraTreesRegressor", ensemble.ExtraTreesRegressor(10, random_state=0), "regression"),
        (
            "GradientBoostingClassifier-3-classes",
            ensemble.GradientBoostingClassifier(n_estimators=10, random_state=0),
            "multiclass",
        ),
        (
            "GradientBoostingRegressor-best-first",
            ensemble.GradientBoostingRegressor(n_estimators=10, max_leaf_nodes=6, random_state=0),
            "regression",
        ),
        (
            "IsolationForest-half-the-columns",
            ensemble.IsolationForest(n_estimators=10, max_features=0.5, random_state=0),
            "binary",
        ),
        (
            "BaggingClassifier-half-the-columns",
            ensemble.BaggingClassifier(n_estimators=5, max_features=0.5, random_state=0),
            "binary",
        ),
        ("AdaBoostClassifier", ensemble.AdaBoostClassifier(n_estimators=5), "binary"),
        (
            "RandomTreesEmbedding",
            ensemble.RandomTreesEmbedding(n_estimators=5, random_state=0),
            "binary",
        ),
        (
            "HistGradientBoostingRegressor",
            ensemble.HistGradientBoostingRegressor(max_iter=5),
            "regression",
        ),
        ("HistGradientBoostingClassifier-categories", None, "categories"),
    ]


@pytest.mark.parametrize(
    ("model", "kind"), [pytest.param(m, k, id=name) for name, m, k in _legit_tree_models()]
)
def test_legitimate_tree_models_pass_the_check(
    model: Any, kind: str, tmp_path: Path, figures
) -> None:
    rng = np.random.RandomState(0)
    X = pd.DataFrame(rng.rand(300, 6), columns=[f"x{i}" for i in range(6)])
    targets = {
        "binary": (X["x0"] > 0.5).astype(int),
        "multiclass": (X["x0"] * 3).astype(int),
        "regression": X["x1"] * 2 + X["x2"],
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if kind == "categories":
            model = _hgb_with_category_splits()
            X, _ = _categories_frame()
        elif kind == "binary" and type(model).__name__ in (
            "IsolationForest",
            "RandomTreesEmbedding",
        ):
            model.fit(X)
        else:
            model.fit(X, targets[kind])
    path = tmp_path / "model.skops"
    save_estimator(model, path)
    loaded = load_estimator(path)  # the check runs inside the loader
    method = "predict" if hasattr(model, "predict") else "transform"
    expected, got = getattr(model, method)(X), getattr(loaded, method)(X)
    expected = expected.toarray() if hasattr(expected, "toarray") else expected
    got = got.toarray() if hasattr(got, "toarray") else got
    np.testing.assert_array_equal(got, expected)
    figures(AREA, "legitimate tree models loaded", 1)


def _edit_tree_schema(source: Path, target: Path, edit: Any) -> None:
    """Copy a one-tree skops file, applying ``edit`` to the tree's entry of schema.json: what a
    crafted file can say that the tree's own ``__setstate__`` would never produce."""
    import zipfile

    with zipfile.ZipFile(source) as zin, zipfile.ZipFile(target, "w") as zout:
        for name in zin.namelist():
            data = zin.read(name)
            if name == "schema.json":
                schema = json.loads(data)
                edit(schema["content"]["content"]["tree_"])
                data = json.dumps(schema).encode()
            zout.writestr(name, data)


def _set_value(entry: dict[str, Any], value: str) -> None:
    # skops shares one object per __id__ (small ints are one object in the saving process):
    # a fresh id makes this value its own.
    entry["content"] = value
    entry["__id__"] = 1


def _set_node_count(tree: dict[str, Any]) -> None:
    # Above the array length scikit-learn cuts it back on loading; below, children point past it.
    _set_value(tree["content"]["content"]["node_count"], "2")


def _set_n_features(tree: dict[str, Any]) -> None:
    _set_value(tree["__reduce__"]["args"]["content"][0], "40")


SCHEMA_EDITS = {
    "node_count below the array length": (
        _set_node_count,
        "node 0: right child 2 out of range 1..1",
    ),
    "tree wider than its estimator": (_set_n_features, "40 features where its estimator has 4"),
}


@pytest.mark.parametrize("edit", SCHEMA_EDITS)
def test_a_crafted_tree_schema_is_refused(edit: str, tmp_path: Path, figures) -> None:
    from sklearn.datasets import load_iris
    from sklearn.tree import DecisionTreeClassifier

    X, y = load_iris(return_X_y=True)
    model = DecisionTreeClassifier(max_depth=2, random_state=0).fit(X, y)
    assert model.tree_.node_count == 5
    plain, crafted = tmp_path / "plain.skops", tmp_path / "crafted.skops"
    sio.dump(model, plain)
    change, expected = SCHEMA_EDITS[edit]
    _edit_tree_schema(plain, crafted, change)
    with pytest.raises(UnsafeModelFileError, match="holds a damaged tree") as caught:
        load_estimator(crafted)
    assert f"(model.tree_: {expected});" in str(caught.value)
    figures(AREA, "damaged trees refused", 1)


def test_an_isolation_forest_with_missing_column_lists_is_refused(tmp_path: Path, figures) -> None:
    from sklearn.ensemble import IsolationForest

    X = np.random.RandomState(0).rand(200, 6)
    model = IsolationForest(n_estimators=4, max_features=0.5, random_state=0).fit(X)
    model.estimators_features_ = model.estimators_features_[:2]
    path = tmp_path / "iforest.skops"
    sio.dump(model, path)
    with pytest.raises(
        UnsafeModelFileError,
        match=r"model\.estimators_features_: not one column list per member of estimators_ \(4\)",
    ):
        load_estimator(path)
    figures(AREA, "damaged trees refused", 1)
