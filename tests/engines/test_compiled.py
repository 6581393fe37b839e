"""Compiled engines, used on request: AcceleratedPredictor.load(predictor, trust_native=True),
score --accelerator --trust-native. Outputs are compared with ONNX Runtime's."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from cli_support import assert_one_line_error, run
from engines_support import record_engine
from onnxbridge import Bundle, Predictor, score
from onnxbridge.engines import AcceleratedPredictor, CompiledTrees, Engine, LeavesTrees
from onnxbridge.engines import _compiled as compiled_module
from onnxbridge.engines._build import build_candidates
from onnxbridge.engines._compiled import first_argmax
from onnxbridge.errors import AcceleratorError, DataError, SchemaMismatchError

MIN_ROWS = 100


def _record_tl2cgen(bundle: Bundle, tmp_path: Path) -> Path:
    """Build tl2cgen for the bundle's forest and record it the way tune does; the kept library."""
    estimator = bundle.load_estimator()
    tmp_path.mkdir(parents=True, exist_ok=True)
    candidates, skipped = build_candidates(estimator, tmp_path, n_classes=3, threads=[1])
    assert [c.name for c in candidates] == ["tl2cgen-1t"], skipped
    record = {"engine": "tl2cgen", "threads": 1, "min_rows": MIN_ROWS}
    kept = record_engine(bundle, record, candidates[0].artifact)
    return bundle.path / kept["library"]


def _rows(bundle: Bundle, n: int) -> pd.DataFrame:
    X, _ = bundle.load_holdout()
    return X.iloc[np.arange(n) % len(X)].reset_index(drop=True)


def _mapped(path: Path) -> bool:
    """Whether this process has ``path`` loaded (its pages mapped)."""
    return str(path.resolve()) in Path("/proc/self/maps").read_text()


def test_large_calls_run_on_the_compiled_engine_with_the_same_results(
    iris_bundle: Bundle, tmp_path: Path
) -> None:
    _record_tl2cgen(iris_bundle, tmp_path)
    plain = Predictor(iris_bundle.onnx_path)
    fast = AcceleratedPredictor.load(Predictor(iris_bundle.onnx_path), trust_native=True)
    assert isinstance(fast.compiled, Engine) and isinstance(fast.default, Engine)
    assert fast.compiled.min_rows == MIN_ROWS
    assert fast.engine_for(MIN_ROWS).name == "tl2cgen"
    assert fast.engine_for(MIN_ROWS - 1).name == "onnxruntime"
    rows = _rows(iris_bundle, 3000)
    got, expected = fast.predict(rows), plain.predict(rows)
    assert got.labels is not None and expected.labels is not None
    np.testing.assert_array_equal(got.labels, expected.labels)
    assert got.labels.dtype == expected.labels.dtype
    np.testing.assert_allclose(got.probabilities, expected.probabilities, atol=1e-5)
    assert got.classes == expected.classes
    pd.testing.assert_index_equal(got.to_frame().columns, expected.to_frame().columns)
    # Arrays, in float64 or float32, give the result of the frame.
    for array in (rows.to_numpy(), rows.to_numpy(np.float32)):
        from_array = fast.predict(array)
        np.testing.assert_array_equal(from_array.labels, got.labels)
        np.testing.assert_array_equal(from_array.probabilities, got.probabilities)
    # The forest takes missing values: a NaN row goes through, as on ONNX Runtime.
    holed = rows.to_numpy(copy=True)
    holed[7, 1] = np.nan
    assert plain.metadata.missing_values == "accepted"
    assert fast.predict(holed).labels[7] == plain.predict(holed).labels[7]
    # Below min_rows the call stays on ONNX Runtime: bit for bit the plain result.
    small = _rows(iris_bundle, MIN_ROWS - 1)
    np.testing.assert_array_equal(
        fast.predict(small).probabilities, plain.predict(small).probabilities
    )


def test_score_uses_the_compiled_engine_only_when_asked(
    iris_bundle: Bundle, tmp_path: Path
) -> None:
    library = _record_tl2cgen(iris_bundle, tmp_path / "build")
    rows = _rows(iris_bundle, 2000)
    rows.to_parquet(tmp_path / "rows.parquet")
    score(iris_bundle.path, tmp_path / "rows.parquet", tmp_path / "b.parquet")
    assert not _mapped(library)  # scoring without --accelerator never opens it
    score(
        iris_bundle.path,
        tmp_path / "rows.parquet",
        tmp_path / "a.parquet",
        accelerator=True,
        trust_native=True,
    )
    assert _mapped(library)
    a, b = pd.read_parquet(tmp_path / "a.parquet"), pd.read_parquet(tmp_path / "b.parquet")
    assert list(a.columns) == list(b.columns)
    assert (a["label"] == b["label"]).all()
    np.testing.assert_allclose(a.filter(like="proba").to_numpy(), b.filter(like="proba"), atol=1e-5)
    with pytest.raises(DataError, match="accelerator=True runs with engine='local' only"):
        score(
            iris_bundle.path,
            tmp_path / "rows.parquet",
            tmp_path / "c",
            engine="dask",
            accelerator=True,
            trust_native=True,
        )


def test_no_recorded_engine_is_a_clear_error(
    iris_bundle: Bundle, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(AcceleratorError, match="has no accelerator recorded"):
        AcceleratedPredictor.load(Predictor(iris_bundle.onnx_path))
    with pytest.raises(AcceleratorError, match="loaded from a bundle's folder"):
        AcceleratedPredictor.load(Predictor(iris_bundle.onnx_path.read_bytes()))
    _rows(iris_bundle, 10).to_parquet(tmp_path / "rows.parquet")
    # With or without --trust-native, the real mistake is reported: there is nothing to trust.
    for trust in (["--trust-native"], []):
        code, _, err = run(
            capsys,
            "score",
            iris_bundle.path,
            tmp_path / "rows.parquet",
            "--output",
            tmp_path / "out.parquet",
            "--accelerator",
            *trust,
        )
        assert_one_line_error(
            code, err, "has no accelerator recorded.*tune BUNDLE --engines all.*leave out"
        )
        assert not (tmp_path / "out.parquet").exists()


def test_a_library_is_opened_only_when_trusted_and_unchanged(
    iris_bundle: Bundle, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from onnxbridge.errors import UnsafeModelFileError

    library = _record_tl2cgen(iris_bundle, tmp_path / "build")
    _rows(iris_bundle, 10).to_parquet(tmp_path / "rows.parquet")
    with pytest.raises(
        UnsafeModelFileError, match=r"native code.*pass trust_native=True.*load no compiled engine"
    ):
        AcceleratedPredictor.load(Predictor(iris_bundle.onnx_path))
    code, _, err = run(
        capsys,
        "score",
        iris_bundle.path,
        tmp_path / "rows.parquet",
        "--output",
        tmp_path / "out.parquet",
        "--accelerator",
    )
    assert_one_line_error(code, err, r"native code.*pass --trust-native.*leave out --accelerator")
    assert not _mapped(library) and not (tmp_path / "out.parquet").exists()
    # Trusted, but changed since it was recorded: still never opened.
    library.write_bytes(library.read_bytes() + b"\0")
    with pytest.raises(AcceleratorError, match="cannot be trusted"):
        AcceleratedPredictor.load(Predictor(iris_bundle.onnx_path), trust_native=True)
    assert not _mapped(library)


def test_a_loaded_engine_is_used_as_given(iris_bundle: Bundle, tmp_path: Path) -> None:
    estimator = iris_bundle.load_estimator()
    candidates, skipped = build_candidates(estimator, tmp_path, n_classes=3, threads=[1])
    assert candidates, skipped
    library = candidates[0].artifact
    # No tuning recorded in the bundle: the caller's own, loaded library serves the large calls.
    given = CompiledTrees(library, 1, 3, MIN_ROWS)
    fast = AcceleratedPredictor(Predictor(iris_bundle.onnx_path), given)
    assert fast.engine_for(MIN_ROWS).name == "tl2cgen"
    rows = _rows(iris_bundle, 500)
    expected = Predictor(iris_bundle.onnx_path).predict(rows)
    got = fast.predict(rows)
    np.testing.assert_array_equal(got.labels, expected.labels)
    assert got.classes == expected.classes
    # The engine itself gives class indices until it is given the model's classes.
    X = rows.to_numpy(np.float32)
    np.testing.assert_array_equal(given.predict(X).labels, np.argmax(got.probabilities, axis=1))
    np.testing.assert_array_equal(fast.compiled.predict(X).labels, expected.labels)
    wrong = CompiledTrees(library, 1, None, MIN_ROWS)
    with pytest.raises(AcceleratorError, match=r"the accelerator gives no classes, the model 3"):
        AcceleratedPredictor(Predictor(iris_bundle.onnx_path), wrong)


def test_runtime_and_serve_never_import_the_engines() -> None:
    import ast
    import subprocess
    import sys

    import onnxbridge

    # Not at import time (the compilers' modules neither) ...
    code = (
        "import sys, onnxbridge, onnxbridge.runtime, onnxbridge.serve._app, onnxbridge._score; "
        "print(sorted(m for m in sys.modules if m.startswith('onnxbridge.engines') "
        "or m in ('tl2cgen', 'lleaves', 'treelite')))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]", result.stdout
    # ... nor later: no module of theirs names the engines, not even inside a function.
    package = Path(onnxbridge.__file__).parent
    for path in [*(package / "runtime").rglob("*.py"), *(package / "serve").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            assert not any(n.startswith("onnxbridge.engines") for n in names), path


@pytest.mark.parametrize("n_classes", [1, 2, 3, 7, 16, 17, 40])
def test_first_argmax_is_numpys_argmax_ties_included(n_classes: int) -> None:
    rng = np.random.RandomState(n_classes)
    # Few distinct values: many rows have equal maxima, where the first column must win.
    matrix = rng.randint(0, 3, size=(500, n_classes)).astype(np.float32) / 2
    got = first_argmax(matrix)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, np.argmax(matrix, axis=1))
    # The accelerators hand over their probabilities column by column (Fortran order).
    np.testing.assert_array_equal(first_argmax(np.asfortranarray(matrix)), got)
    # Distinct values too: the last column to raise the running maximum wins.
    spread = rng.rand(500, n_classes).astype(np.float32)
    np.testing.assert_array_equal(first_argmax(spread), np.argmax(spread, axis=1))
    before = matrix.copy()
    first_argmax(matrix)
    np.testing.assert_array_equal(matrix, before)  # the input is left as it was


def _iris_accelerated(
    tmp_path: Path, estimator: Any, precision: str
) -> tuple[AcceleratedPredictor, Path, np.ndarray]:
    """``estimator`` fitted on Iris and converted in ``precision``: its Predictor with the
    tl2cgen library as compiled engine from 10 rows, the model's path and the Iris rows."""
    from sklearn.datasets import load_iris

    from onnxbridge import convert_estimator

    X, y = load_iris(return_X_y=True)
    estimator.fit(X, y)
    path = convert_estimator(estimator, X[:20], precision=precision).save(tmp_path / "m.onnx")
    candidates, skipped = build_candidates(
        estimator, tmp_path, n_classes=3, threads=[1], precision=precision
    )
    assert candidates, skipped
    given = CompiledTrees(candidates[0].artifact, 1, 3, min_rows=10)
    return AcceleratedPredictor(Predictor(path), given), path, X


def test_a_model_converted_in_double_feeds_the_library_float64_rows(tmp_path: Path) -> None:
    from sklearn.ensemble import RandomForestClassifier

    forest = RandomForestClassifier(n_estimators=5, random_state=0)
    fast, _, X = _iris_accelerated(tmp_path, forest, "double")
    assert fast.predictor.inputs[0].type == "tensor(double)"
    assert isinstance(fast.compiled, CompiledTrees)
    assert fast.compiled.threshold_type == "float64"
    rows = np.tile(X, (2, 1))
    got = fast.predict(rows)
    np.testing.assert_array_equal(got.labels, forest.predict(rows))
    np.testing.assert_allclose(got.probabilities, forest.predict_proba(rows), atol=1e-6)


def test_the_compiled_engine_keeps_the_missing_values_rule(tmp_path: Path) -> None:
    from sklearn.ensemble import GradientBoostingClassifier

    boosted = GradientBoostingClassifier(n_estimators=5, random_state=0)
    fast, path, X = _iris_accelerated(tmp_path, boosted, "float")
    plain = Predictor(path)
    assert plain.metadata.missing_values == "refused"  # GradientBoosting refuses NaN
    rows = np.tile(X, (2, 1))
    # float64 rows are narrowed to the model's float32 first, as on ONNX Runtime.
    np.testing.assert_array_equal(fast.predict(rows).labels, plain.predict(rows).labels)
    rows[11, 2] = np.nan
    with pytest.raises(SchemaMismatchError, match=r"missing values \(NaN\) in 1 row"):
        fast.predict(rows)
    assert fast.predict(rows, allow_missing=True).labels.shape == (len(rows),)


def test_the_compiled_engine_keeps_the_value_rule(tmp_path: Path) -> None:
    from sklearn.ensemble import RandomForestClassifier

    forest = RandomForestClassifier(n_estimators=5, random_state=0)
    fast, _, X = _iris_accelerated(tmp_path, forest, "float")
    rows = np.tile(X, (2, 1))
    rows[11, 2] = 1e300  # float64, beyond the float32 the model takes
    with pytest.raises(SchemaMismatchError, match=r"row 12, column 'x2': 1e\+300 is out of range"):
        fast.predict(rows)
    rows[11, 2] = -np.inf
    with pytest.raises(SchemaMismatchError, match=r"row 12, column 'x2': -inf is not a finite"):
        fast.predict(rows.astype(np.float32))


def test_a_float_model_gets_float32_trees_with_float32_outputs(tmp_path: Path) -> None:
    import tl2cgen
    from sklearn.ensemble import RandomForestClassifier

    forest = RandomForestClassifier(n_estimators=5, random_state=0)
    fast, _, X = _iris_accelerated(tmp_path, forest, "float")
    compiled = fast.compiled
    assert isinstance(compiled, CompiledTrees) and compiled.threshold_type == "float32"
    rows = np.tile(X, (2, 1)).astype(np.float32)
    # The library itself, through tl2cgen's public call, computes in float32.
    library = tl2cgen.Predictor(str(compiled.library), nthread=1, verbose=False)
    assert library.predict(tl2cgen.DMatrix(rows, dtype="float32")).dtype == np.float32
    assert compiled.outputs(rows).dtype == np.float32
    got = fast.predict(rows)
    np.testing.assert_array_equal(got.labels, forest.predict(rows))
    np.testing.assert_allclose(got.probabilities, forest.predict_proba(rows), atol=1e-6)


@pytest.mark.parametrize(
    ("data", "spec", "n_classes"),
    [
        ("breast_cancer", "LGBMClassifier(n_estimators=20, random_state=0)", 2),
        ("diabetes", "LGBMRegressor(n_estimators=20, random_state=0)", None),
        ("iris", "LGBMClassifier(n_estimators=20, random_state=0)", 3),
    ],
)
def test_a_recorded_lleaves_engine_loads_from_its_two_checked_files(
    tmp_path: Path, data: str, spec: str, n_classes: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from onnxbridge import convert_bundle, train_bundle
    from onnxbridge.engines._compiled import LEAVES_PARALLEL_ROWS
    from onnxbridge.runtime._settings import available_cores

    bundle, _ = train_bundle(data, spec, tmp_path / "lgbm")
    convert_bundle(bundle)
    (tmp_path / "build").mkdir()
    candidates, skipped = build_candidates(
        bundle.load_estimator(), tmp_path / "build", n_classes=n_classes, threads=[2]
    )
    leaves = next(c for c in candidates if c.engine == "lleaves")
    assert leaves.model_text is not None and leaves.model_text.is_file(), skipped
    record = {"engine": "lleaves", "threads": 2, "min_rows": MIN_ROWS}
    record = record_engine(bundle, record, leaves.artifact, leaves.model_text)
    text_path = bundle.path / record["model_text"]

    fast = AcceleratedPredictor.load(Predictor(bundle.onnx_path), trust_native=True)
    plain = Predictor(bundle.onnx_path)
    compiled = fast.compiled
    assert isinstance(compiled, LeavesTrees) and compiled.min_rows == MIN_ROWS
    assert compiled.parts == min(2, available_cores())

    def outputs(result: Any) -> np.ndarray:
        return result.values if n_classes is None else result.probabilities

    # One call below the parallel threshold (one thread), one above it (in parts).
    for n in (MIN_ROWS, LEAVES_PARALLEL_ROWS + 5):
        rows = _rows(bundle, n)
        got, expected = fast.predict(rows), plain.predict(rows)
        if n_classes is None:  # regression: values [N], within float32 of ONNX Runtime's
            assert got.values.shape == (n,) and got.values.dtype == np.float32
            np.testing.assert_allclose(got.values, expected.values, rtol=1e-5, atol=1e-4)
            continue
        np.testing.assert_array_equal(got.labels, expected.labels)
        np.testing.assert_allclose(got.probabilities, expected.probabilities, atol=1e-5)
        assert got.probabilities.dtype == np.float32
        assert got.probabilities.shape == (n, n_classes)
    # Calls from several threads at once share the engine; each gets its own rows' results.
    batches = [_rows(bundle, LEAVES_PARALLEL_ROWS + 5 + 37 * i) for i in range(6)]
    with ThreadPoolExecutor(max_workers=3) as callers:
        results = list(callers.map(fast.predict, batches))
    for rows, got in zip(batches, results, strict=True):
        want = outputs(plain.predict(rows))
        np.testing.assert_allclose(outputs(got), want, rtol=1e-5, atol=1e-4)
    # lleaves counts rows in int32: a call beyond that is refused, not run into a crash (the
    # limit lowered here; 2**31 rows do not fit in a test).
    limit = LEAVES_PARALLEL_ROWS + 1  # calls below LEAVES_PARALLEL_ROWS are small anyway
    monkeypatch.setattr(compiled_module, "LEAVES_MAX_ROWS", limit)
    with pytest.raises(AcceleratorError, match="score the rows in batches"):
        fast.predict(_rows(bundle, limit))
    monkeypatch.undo()
    # Recorded with 2 threads, loaded where the process has one core: large calls run whole on
    # the calling thread, with the same results.
    monkeypatch.setattr(compiled_module, "available_cores", lambda: 1)
    one_core = LeavesTrees(compiled.library, text_path, 2, n_classes, MIN_ROWS)
    monkeypatch.undo()
    assert one_core.parts == 1
    rows = _rows(bundle, LEAVES_PARALLEL_ROWS + 5).to_numpy(np.float64)
    np.testing.assert_array_equal(one_core.outputs(rows), compiled.outputs(rows))

    # From one row (what tune records when the compiled code wins there): small calls from any
    # thread give ONNX Runtime's results, each in an array of its own.
    from_one = AcceleratedPredictor(
        Predictor(bundle.onnx_path), LeavesTrees(compiled.library, text_path, 2, n_classes, 1)
    )
    assert from_one.engine_for(1).name == "lleaves"
    sizes = [1, 3, 1, 40, 2, LEAVES_PARALLEL_ROWS - 1, 1]
    batches = [_rows(bundle, n).iloc[::-1].to_numpy(np.float32) for n in sizes]
    expected = [plain.predict(b) for b in batches]
    first = [from_one.predict(b) for b in batches]  # one thread
    with ThreadPoolExecutor(max_workers=3) as callers:
        threaded = list(callers.map(from_one.predict, batches * 3))
    for got, want in zip(first + threaded, expected * 4, strict=True):
        np.testing.assert_allclose(outputs(got), outputs(want), rtol=1e-5, atol=1e-4)
        if n_classes is not None:
            np.testing.assert_array_equal(got.labels, want.labels)
    assert not any(
        np.shares_memory(outputs(a), outputs(b)) for a in first for b in first if a is not b
    )
    # A single row is bit for bit the row of a larger call.
    engine = from_one.compiled
    for row in _rows(bundle, 25).to_numpy(np.float64):
        one = row[None, :]
        out, index = engine.outputs_indexed(one)
        array = engine.outputs(np.vstack([one, one]))[:1]
        np.testing.assert_array_equal(out, array)
        assert out.dtype == array.dtype and out.shape == array.shape
        if n_classes is None:
            assert index is None
        else:
            assert index.dtype == np.int64
            np.testing.assert_array_equal(index, first_argmax(array))
    # Rows of another width never reach the compiled code, which would read past them.
    width = batches[0].shape[1]
    with pytest.raises(AcceleratorError, match=f"rows of {width} features; got an array of shape"):
        engine.outputs(np.zeros((1, width - 1)))

    # The model text is checked like the library: a changed one is never read.
    text_path.write_text(text_path.read_text().replace("num_leaves", "num_leaves ", 1))
    with pytest.raises(AcceleratorError, match="cannot be trusted"):
        AcceleratedPredictor.load(Predictor(bundle.onnx_path), trust_native=True)


def _split_probes(model: Any, n_features: int, seed: int) -> tuple[np.ndarray, int]:
    """Rows whose value of a split's feature is the float32 nearest its threshold and the
    float32 either side of it (the other features random), and how many thresholds a plain
    cast to float32 would have moved to the other side of a value."""
    rng = np.random.RandomState(seed)
    header = model.get_header_accessor()
    rows, moved = [], 0
    for index in range(int(header.get_field("num_tree")[0])):
        tree = model.get_tree_accessor(index)
        kinds, features = tree.get_field("node_type"), tree.get_field("split_index")
        thresholds = tree.get_field("threshold")
        for kind, feature, threshold in zip(kinds, features, thresholds, strict=True):
            if kind != 1:
                continue
            nearest = np.float32(threshold)
            moved += int(float(nearest) > threshold)
            for value in (
                np.nextafter(nearest, np.float32(-np.inf)),
                nearest,
                np.nextafter(nearest, np.float32(np.inf)),
            ):
                row = rng.normal(size=n_features).astype(np.float32)
                row[feature] = value
                rows.append(row)
    return np.array(rows, dtype=np.float32), moved


@pytest.mark.parametrize("kind", ["forest", "boosting", "categorical"])
def test_float32_trees_split_float32_rows_as_the_float64_trees_do(kind: str) -> None:
    import treelite
    from sklearn.datasets import make_classification
    from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestClassifier
    from treelite import gtil

    from onnxbridge.engines._build import float32_trees

    X, y = make_classification(
        n_samples=3000, n_features=6, n_informative=4, n_classes=3, random_state=0
    )
    X = X.astype(np.float32)
    if kind == "categorical":
        X[:, 0] = np.abs(np.round(X[:, 0] * 3)) % 6
        X[::17, 1] = np.nan
    estimator = {
        "forest": RandomForestClassifier(n_estimators=8, random_state=0),
        "boosting": HistGradientBoostingClassifier(max_iter=20, random_state=0),
        "categorical": HistGradientBoostingClassifier(
            max_iter=20, categorical_features=[0], random_state=0
        ),
    }[kind].fit(X, y)
    wide = treelite.sklearn.import_model(estimator)
    narrow = float32_trees(wide)
    assert narrow.input_type == "float32" and narrow.output_type == "float32"
    probes, moved = _split_probes(wide, X.shape[1], seed=1)
    if kind == "categorical":
        probes[:, 0] = np.arange(len(probes)) % 6  # every category
        probes[::11, 1] = np.nan
        header = wide.get_header_accessor()
        kinds = [
            wide.get_tree_accessor(i).get_field("node_type")
            for i in range(int(header.get_field("num_tree")[0]))
        ]
        assert any((k == 2).any() for k in kinds)  # categorical splits were copied too
    # Without directed rounding some of these rows would change branch: the probes test it.
    assert moved > 0
    expected = gtil.predict(wide, probes.astype(np.float64)).reshape(len(probes), -1)
    got = gtil.predict(narrow, probes).reshape(len(probes), -1)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(np.argmax(got, axis=1), np.argmax(expected, axis=1))
    np.testing.assert_allclose(got, expected, atol=1e-6)
    np.testing.assert_array_equal(
        np.argmax(expected, axis=1), estimator.predict(probes.astype(np.float64))
    )


@pytest.mark.parametrize("precision", ["float", "double"])
@pytest.mark.parametrize("classes", [3, 2])
def test_the_row_driver_gives_tl2cgens_own_results_and_labels(
    tmp_path: Path, precision: str, classes: int
) -> None:
    """CompiledTrees runs the rows through the driver tune compiles into the library: the same
    outputs as tl2cgen's public predict on the library (NaN rows included, in parts on two
    threads, twice in a row: each row's outputs start at zero), labels equal to the first
    largest probability, and a wrong width refused."""
    import tl2cgen
    from sklearn.datasets import load_iris
    from sklearn.ensemble import GradientBoostingClassifier

    from onnxbridge.engines._compiled import DRIVER_PARALLEL_ROWS, compiled_output

    X, y = load_iris(return_X_y=True)
    if classes == 2:
        y = (y == 2).astype(int)
    model = GradientBoostingClassifier(n_estimators=8, max_depth=3, random_state=0).fit(X, y)
    candidates, skipped = build_candidates(
        model, tmp_path, n_classes=classes, threads=[1], precision=precision
    )
    assert candidates, skipped
    library = candidates[0].artifact
    engine = CompiledTrees(library, 2, classes, min_rows=1)
    assert engine.row_driver  # the library has the driver and it passed its check
    dtype = np.float64 if precision == "double" else np.float32
    rows = np.tile(X, (40, 1)) + np.linspace(-1, 1, 150 * 40)[:, None]
    rows[::7, 2] = np.nan
    rows = np.ascontiguousarray(rows, dtype=dtype)
    assert len(rows) >= DRIVER_PARALLEL_ROWS  # cut into two parts
    public = tl2cgen.Predictor(str(library), nthread=1, verbose=False).predict(
        tl2cgen.DMatrix(rows, dtype=np.dtype(dtype).name)
    )
    expected = compiled_output(public, len(rows), classes, np.float32, columns=True)
    for _ in range(2):
        probabilities, labels = engine.outputs_indexed(rows)
        assert probabilities.dtype == np.float32
        np.testing.assert_array_equal(probabilities, expected)
        np.testing.assert_array_equal(labels, np.argmax(expected, axis=1))
        np.testing.assert_array_equal(engine.predict(rows).labels, labels)
    assert len(set(labels.tolist())) == classes  # every class is predicted somewhere
    with pytest.raises(AcceleratorError, match="takes rows of 4 features"):
        engine.outputs(rows[:, :3])


def test_a_library_without_the_row_driver_runs_through_tl2cgen(tmp_path: Path) -> None:
    """A library built before the driver existed (tl2cgen's own export) loads and gives the
    same results through tl2cgen's public call."""
    import tl2cgen
    import treelite
    from sklearn.datasets import load_iris
    from sklearn.ensemble import RandomForestClassifier

    X, y = load_iris(return_X_y=True)
    forest = RandomForestClassifier(n_estimators=5, random_state=0).fit(X, y)
    plain = tmp_path / "plain.so"
    tl2cgen.export_lib(
        treelite.sklearn.import_model(forest), toolchain="gcc", libpath=str(plain), verbose=False
    )
    candidates, skipped = build_candidates(
        forest, tmp_path, n_classes=3, threads=[1], precision="double"
    )
    assert candidates, skipped
    old = CompiledTrees(plain, 1, 3, min_rows=1)
    new = CompiledTrees(candidates[0].artifact, 1, 3, min_rows=1)
    assert not old.row_driver and new.row_driver
    rows = np.tile(X, (4, 1))
    old_out, old_labels = old.outputs_indexed(rows)
    new_out, new_labels = new.outputs_indexed(rows)
    np.testing.assert_array_equal(old_out, new_out)
    np.testing.assert_array_equal(old_labels, new_labels)
    np.testing.assert_array_equal(new_labels, forest.predict(rows))


def test_a_model_without_probabilities_or_values_takes_no_compiled_engine(tmp_path: Path) -> None:
    from sklearn.datasets import load_iris
    from sklearn.svm import LinearSVC

    from onnxbridge import convert_estimator
    from onnxbridge.engines import CompiledEngine

    X, y = load_iris(return_X_y=True)
    svc = LinearSVC(random_state=0).fit(X, y)
    path = convert_estimator(svc, X[:20]).save(tmp_path / "svc.onnx")
    with pytest.raises(
        AcceleratorError,
        match=r"serves classifiers \(label \+ probabilities\) and regressors; "
        r"this model's outputs are label, scores",
    ):
        AcceleratedPredictor(Predictor(path), CompiledEngine())
