"""Building compiled engines that may beat ONNX Runtime (tl2cgen, lleaves), checking and choosing.

``tune --engines all`` builds what is installed for the model (:func:`build_candidates`), checks
each candidate against the ONNX model on probe rows (:func:`probe_rows`, :func:`check_candidate`),
times it as ``score --accelerator`` runs it (:class:`~onnxbridge.engines.AcceleratedPredictor`)
against the tuned ONNX Runtime sessions, from one row to the throughput size, and records it as
an optional accelerator **only when it is both equivalent and faster**
(:func:`choose_accelerator`), from the smallest measured size from which it stays faster
(:func:`min_rows_of`). ONNX stays the artifact and ONNX Runtime the default engine.

- ``tl2cgen`` (with ``treelite``): scikit-learn tree ensembles (random forests, extra trees,
  gradient boosting, histogram gradient boosting) and LightGBM models, compiled to a shared
  library with gcc;
- ``lleaves``: LightGBM models, compiled with LLVM.

Probe rows: the probe sets ``onnxbridge validate`` builds (holdout, range, split thresholds, edge
values, missing values when the model accepts them) — :func:`probe_rows`. Equivalence: identical
labels and probabilities (or values) within the tolerances ``validate`` uses.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from onnxbridge.engines._compiled import (
    ROW_DRIVER,
    CompiledEngine,
    CompiledTrees,
    LeavesTrees,
    compiled_output,
)
from onnxbridge.errors import AcceleratorError, first_line
from onnxbridge.runtime import Predictor
from onnxbridge.runtime._settings import available_cores
from onnxbridge.validate._compare import DEFAULT_ATOL, DEFAULT_RTOL

__all__ = [
    "ACCELERATOR_ENGINES",
    "AcceleratorCandidate",
    "AcceleratorCheck",
    "add_row_driver",
    "build_candidates",
    "check_candidate",
    "choose_accelerator",
    "float32_trees",
    "min_rows_of",
    "probe_rows",
]

ACCELERATOR_ENGINES = ("tl2cgen", "lleaves")
_RANDOM_PROBES = 1000

# scikit-learn tree ensembles treelite imports (treelite.sklearn.import_model).
_TL2CGEN_CLASSES = {
    "RandomForestClassifier",
    "RandomForestRegressor",
    "ExtraTreesClassifier",
    "ExtraTreesRegressor",
    "GradientBoostingClassifier",
    "GradientBoostingRegressor",
    "HistGradientBoostingClassifier",
    "HistGradientBoostingRegressor",
    # LightGBM models go through treelite's LightGBM frontend.
    "LGBMClassifier",
    "LGBMRegressor",
}
_LLEAVES_CLASSES = {"LGBMClassifier", "LGBMRegressor"}


@dataclass
class AcceleratorCandidate:
    """An engine built for one model.

    Attributes:
        engine: ``"tl2cgen"`` or ``"lleaves"`` (or a test's own name).
        predict: ``X [N, F] float32 -> [N, C]`` probabilities (classifiers) or ``[N]`` values.
        threads: threads it runs with.
        artifact: the compiled library it loads, if any.
        build_seconds: how long building it took.
        model_text: for lleaves, the LightGBM model text the library was compiled from (lleaves
            reads it beside the library when it loads).
        loaded: the engine loaded from its files as ``score --accelerator`` loads it (serving
            calls from one row), for the engines onnxbridge runs.
    """

    engine: str
    predict: Callable[[np.ndarray], np.ndarray]
    threads: int = 1
    artifact: Path | None = None
    build_seconds: float = 0.0
    model_text: Path | None = None
    loaded: CompiledEngine | None = None

    @property
    def name(self) -> str:
        """``engine-<threads>t``."""
        return f"{self.engine}-{self.threads}t"

    def as_accelerator(self, n_classes: int | None) -> CompiledEngine:
        """This candidate as the compiled engine of an
        :class:`~onnxbridge.engines.AcceleratedPredictor`, from one row: the loaded engine, or
        (another engine's) ``predict`` in float32."""
        if self.loaded is not None:
            return self.loaded
        return _CallEngine(self, n_classes)


class _CallEngine(CompiledEngine):
    """A candidate's ``predict`` as a compiled engine (engines without a loader of their own)."""

    min_rows = 1

    def __init__(self, candidate: AcceleratorCandidate, n_classes: int | None) -> None:
        self.name = candidate.engine
        self.threads = candidate.threads
        self.n_classes = n_classes
        self._predict = candidate.predict

    def outputs(self, X: np.ndarray) -> np.ndarray:
        return np.asarray(self._predict(X), dtype=np.float32)


@dataclass
class AcceleratorCheck:
    """A candidate's equivalence check and timing against ONNX Runtime.

    Attributes:
        name: the candidate's name.
        equivalent: labels identical and values within tolerance on every probe row.
        label_mismatches: probe rows whose label differs from the ONNX model's.
        max_abs_diff: largest |Δ| of probabilities / values against the ONNX model.
        probe_rows: how many rows were compared.
        speedups: batch size → ONNX Runtime median / candidate median (above 1: faster).
        chosen: whether it was recorded as the accelerator.
        reason: why it was or was not chosen.
        timings: batch size → the candidate's and ONNX Runtime's timings (JSON-ready).
    """

    name: str
    equivalent: bool
    label_mismatches: int
    max_abs_diff: float
    probe_rows: int
    speedups: dict[int, float] = field(default_factory=dict)
    chosen: bool = False
    reason: str = ""
    timings: dict[int, dict[str, Any]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "name": self.name,
            "verdict": "EQUIVALENT" if self.equivalent else "DIVERGENT",
            "label_mismatches": self.label_mismatches,
            # JSON has no infinity: a candidate that could not be compared has no difference.
            "max_abs_diff": self.max_abs_diff if np.isfinite(self.max_abs_diff) else None,
            "probe_rows": self.probe_rows,
            "speedups": {str(k): v for k, v in self.speedups.items()},
            "chosen": self.chosen,
            "reason": self.reason,
            "timings": {str(k): v for k, v in self.timings.items()},
        }


def probe_rows(
    rows: pd.DataFrame,
    *,
    schema: Any = None,
    estimator: Any = None,
    accepts_missing: bool = False,
    n_random: int = _RANDOM_PROBES,
    seed: int = 0,
) -> np.ndarray:
    """The rows a candidate is checked on: ``validate``'s probe sets, stacked.

    With a ``schema`` (the model's input columns), these are the probe sets ``onnxbridge
    validate`` builds (:func:`onnxbridge.validate._probes.build_probe_sets`): the rows, random
    rows within each feature's range, rows on every split threshold of ``estimator`` and one
    float32 step either side, edge values, and rows with NaN when the model accepts them.
    Without one, the rows plus ``n_random`` random rows within each column's range (seed 0).

    Returns:
        ``[M, F]`` float32.
    """
    if schema is not None:
        from onnxbridge.validate._probes import ProbeSpec, build_probe_sets

        spec = ProbeSpec(
            probes=("holdout", "range", "thresholds", "edge", "missing"),
            seed=seed,
            range_rows=n_random,
        )
        sets = build_probe_sets(
            rows, schema, estimator=estimator, accepts_missing=accepts_missing, spec=spec
        )
        frames = [p.frame for p in sets if p.skipped is None and len(p.frame)]
        stacked = pd.concat(frames, ignore_index=True)[schema.names]
        return stacked.to_numpy(dtype=np.float64, na_value=np.nan).astype(np.float32)
    values = rows.to_numpy(dtype=np.float64, na_value=np.nan)
    low = np.nanmin(values, axis=0)
    high = np.nanmax(values, axis=0)
    low = np.where(np.isfinite(low), low, 0.0)
    high = np.where(np.isfinite(high), high, 1.0)
    random = np.random.RandomState(seed).uniform(low, high, size=(n_random, values.shape[1]))
    return np.vstack([values, random]).astype(np.float32)


def _final_step(estimator: Any) -> Any:
    return estimator.steps[-1][1] if hasattr(estimator, "steps") else estimator


@contextlib.contextmanager
def _quiet() -> Any:
    """Silence the compilers' progress chatter, which their C++ code writes to fds 1 and 2."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 1)
            os.dup2(devnull.fileno(), 2)
            with (
                contextlib.redirect_stdout(io.StringIO()),
                contextlib.redirect_stderr(io.StringIO()),
            ):
                yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in saved:
            os.close(fd)


def build_candidates(
    estimator: Any,
    workdir: Path,
    *,
    n_classes: int | None,
    threads: list[int],
    precision: str = "float",
) -> tuple[list[AcceleratorCandidate], list[str]]:
    """Build every installed engine that handles ``estimator``, one candidate per thread count.

    ``precision`` is the ONNX model's: ``"float"`` compiles tl2cgen's trees in float32
    (:func:`float32_trees`: float32 rows in, float32 probabilities out, as ONNX Runtime runs the
    model), ``"double"`` in float64 as treelite imports them.

    Returns:
        The candidates, and one line per engine that was not built saying why.
    """
    final = _final_step(estimator)
    name = type(final).__name__
    candidates: list[AcceleratorCandidate] = []
    skipped: list[str] = []
    is_pipeline = final is not estimator
    for engine in ACCELERATOR_ENGINES:
        module = "tl2cgen" if engine == "tl2cgen" else "lleaves"
        handles = name in (_TL2CGEN_CLASSES if engine == "tl2cgen" else _LLEAVES_CLASSES)
        if importlib.util.find_spec(module) is None:
            skipped.append(f"{engine}: not installed (pip install {module})")
            continue
        if not handles:
            skipped.append(f"{engine}: does not handle {name}")
            continue
        if is_pipeline:
            skipped.append(f"{engine}: the model is a pipeline; {engine} compiles the trees only")
            continue
        start = time.perf_counter()
        try:
            if engine == "tl2cgen":
                built = _build_tl2cgen(final, workdir, n_classes, threads, precision == "double")
            else:
                built = _build_lleaves(final, workdir, n_classes, threads)
        except Exception as exc:  # compilers fail in many ways; the engine is then skipped
            skipped.append(f"{engine}: building failed ({first_line(exc)})")
            continue
        seconds = time.perf_counter() - start
        for candidate in built:
            candidate.build_seconds = seconds
        candidates.extend(built)
    return candidates, skipped


def _openmp_threads() -> int:
    """The OpenMP thread count this process allows now (cores when no OpenMP is loaded)."""
    from threadpoolctl import threadpool_info

    counts = [int(i["num_threads"]) for i in threadpool_info() if i.get("user_api") == "openmp"]
    return max(1, min(counts)) if counts else available_cores()


def _build_tl2cgen(
    estimator: Any, workdir: Path, n_classes: int | None, threads: list[int], double: bool
) -> list[AcceleratorCandidate]:
    import tl2cgen
    import treelite

    library = workdir / "tl2cgen.so"
    # tl2cgen refuses more threads than OpenMP allows the process, and other libraries lower
    # that limit for good (LightGBM's predict sets OpenMP's thread count and keeps it).
    allowed = _openmp_threads()
    threads = sorted({min(n, allowed) for n in threads})
    with _quiet():
        if hasattr(estimator, "booster_"):  # LightGBM
            model = treelite.frontend.from_lightgbm(estimator.booster_)
        else:
            model = treelite.sklearn.import_model(estimator)
        if not double:
            model = float32_trees(model)
        # Split the generated C into several files compiled side by side: one file for a
        # 100-tree forest took gcc -O3 over 7 minutes on a busy 2-core machine.
        cores = max(threads)
        with tempfile.TemporaryDirectory() as sources:
            tl2cgen.generate_c_code(model, sources, params={"parallel_comp": 4 * cores})
            add_row_driver(Path(sources))
            built = tl2cgen.create_shared(
                "gcc", sources, nthread=cores, verbose=False, options=["-fopenmp"]
            )
            shutil.move(built, library)
    dtype = np.dtype(np.float64 if double else np.float32)
    result = []
    for n in threads:
        with _quiet():
            engine = tl2cgen.Predictor(str(library), nthread=n, verbose=False)

        def predict(X: np.ndarray, engine: Any = engine) -> np.ndarray:
            # The library as it is: rows in its input type, its outputs in their own type.
            raw = engine.predict(tl2cgen.DMatrix(np.ascontiguousarray(X, dtype), dtype=dtype.name))
            return compiled_output(raw, len(X), n_classes, raw.dtype)

        result.append(
            AcceleratorCandidate(
                engine="tl2cgen",
                predict=predict,
                threads=n,
                artifact=library,
                loaded=CompiledTrees(library, n, n_classes, min_rows=1),
            )
        )
    return result


# onnxbridge's row driver, compiled into the tl2cgen library beside the generated code
# (:class:`~onnxbridge.engines._compiled.CompiledTrees` calls it): the rows of a dense float32 /
# float64 matrix through the generated ``predict``, each row's outputs zeroed first
# (``predict`` adds every tree's share), and — given a label buffer — each row's class index, the
# first largest output compared in float32 (``first_argmax``'s rule, NaN included; a binary
# model's one output against its complement, as ``compiled_output`` makes it). A missing
# value (NaN) is left as tl2cgen's "missing" entry, as its own runtime does. A call of ``parts``
# parts runs them on as many OpenMP threads (the library is linked with -fopenmp: libgomp).
_ROW_DRIVER_C = """
#include "header.h"

typedef %(result)s onnxbridge_result;
#define ONNXBRIDGE_OUTPUTS (N_TARGET * MAX_N_CLASS)

int64_t %(name)s_outputs(void) { return ONNXBRIDGE_OUTPUTS; }
int64_t %(name)s_result_bytes(void) { return (int64_t)sizeof(onnxbridge_result); }

static int64_t onnxbridge_label(const onnxbridge_result* out) {
  float best = (float)out[0];
  if (ONNXBRIDGE_OUTPUTS == 1) {
    /* A binary model's positive-class probability against its complement, in float32. */
    return best > 1.0f - best;
  }
  int64_t index = 0;
  for (int64_t k = 1; k < ONNXBRIDGE_OUTPUTS; ++k) {
    float value = (float)out[k];
    if (value > best) index = k;
    best = (isnan(best) || isnan(value)) ? NAN : (value > best ? value : best);
  }
  return index;
}

#define ONNXBRIDGE_ROWS(SUFFIX, T)                                                  \\
  static int onnxbridge_part_##SUFFIX(const T* rows, int64_t first, int64_t end,    \\
                                      onnxbridge_result* out, int64_t* labels) {    \\
    const int64_t width = get_num_feature();                                      \\
    union Entry* entry = (union Entry*)malloc(sizeof(union Entry) * (width + 1)); \\
    if (entry == NULL) return 1;                                                  \\
    for (int64_t j = 0; j < width; ++j) entry[j].missing = -1;                    \\
    for (int64_t i = first; i < end; ++i) {                                       \\
      const T* row = rows + i * width;                                            \\
      onnxbridge_result* result = out + i * ONNXBRIDGE_OUTPUTS;                   \\
      for (int64_t j = 0; j < width; ++j) {                                       \\
        if (!isnan(row[j])) entry[j].fvalue = row[j];                             \\
      }                                                                           \\
      for (int64_t k = 0; k < ONNXBRIDGE_OUTPUTS; ++k) result[k] = 0;             \\
      predict(entry, 0, result);                                                  \\
      for (int64_t j = 0; j < width; ++j) entry[j].missing = -1;                  \\
      if (labels != NULL) labels[i] = onnxbridge_label(result);                   \\
    }                                                                             \\
    free(entry);                                                                  \\
    return 0;                                                                     \\
  }                                                                               \\
  int %(name)s_##SUFFIX(const T* rows, int64_t n, onnxbridge_result* out,           \\
                        int64_t* labels, int parts) {                             \\
    int failed = 0;                                                               \\
    _Pragma("omp parallel for num_threads(parts) schedule(static) reduction(|:failed)") \\
    for (int part = 0; part < parts; ++part) {                                    \\
      failed |= onnxbridge_part_##SUFFIX(rows, n * part / parts,                  \\
                                         n * (part + 1) / parts, out, labels);    \\
    }                                                                             \\
    return failed;                                                                \\
  }

ONNXBRIDGE_ROWS(float32, float)
ONNXBRIDGE_ROWS(float64, double)
"""


def add_row_driver(sources: Path) -> None:
    """Add onnxbridge's row driver to the C code ``tl2cgen.generate_c_code`` wrote in
    ``sources`` (a source file, listed in its ``recipe.json``), typed as the generated
    ``predict``'s output."""
    header = (sources / "header.h").read_text()
    found = re.search(r"void predict\(union Entry\* \w+, int \w+, (float|double)\* \w+\);", header)
    if found is None:
        raise AcceleratorError("tl2cgen generated a predict() of an unknown signature")
    name = f"{ROW_DRIVER}_driver"
    text = _ROW_DRIVER_C % {"result": found.group(1), "name": ROW_DRIVER}
    (sources / f"{name}.c").write_text(text)
    recipe_path = sources / "recipe.json"
    recipe = json.loads(recipe_path.read_text())
    recipe["sources"].append({"name": name, "length": text.count("\n")})
    recipe_path.write_text(json.dumps(recipe))


# treelite's enumerations (its model spec, serialization v4), as the field accessors give them.
_TASK_TYPES = {0: "kBinaryClf", 1: "kRegressor", 2: "kMultiClf", 3: "kLearningToRank"}
_OPERATORS = {1: "==", 2: "<", 3: "<=", 4: ">", 5: ">="}
_LEAF, _NUMERICAL, _CATEGORICAL = 0, 1, 2


def float32_trees(model: Any) -> Any:
    """A treelite model's trees with float32 thresholds and leaves: the same decisions on float32
    rows, compiled code that takes float32 rows and gives float32 outputs.

    treelite imports scikit-learn's and LightGBM's trees in float64; tl2cgen then widens every
    row to float64 and gives float64 probabilities that the caller narrows again (on the
    reference forest, 10 000 - 100 000 rows, the float32 library with the whole ``Predictor``
    path took the time of the float64 library alone). Each threshold is rounded towards the
    side that keeps every float32 value on the branch it took against the float64 threshold
    (``x <= t`` becomes ``x <= the largest float32 not above t``, ``x < t`` becomes ``x < the
    smallest float32 not below t``), so only leaf sums round differently — within the tolerance
    the candidate is then checked against.
    """
    from treelite.model_builder import Metadata, ModelBuilder, PostProcessorFunc, TreeAnnotation

    header = model.get_header_accessor()

    def field(name: str) -> Any:
        return header.get_field(name)

    def _pair(values: list[int]) -> tuple[int, int]:
        first, second = values  # tl2cgen's leaf vector shape is [targets, classes]
        return first, second

    def ints(name: str) -> list[int]:
        return [int(v) for v in field(name)]

    task = int(field("task_type")[0])
    if task not in _TASK_TYPES:
        raise ValueError(f"treelite task type {task} is not one tl2cgen compiles here")
    attributes = field("attributes")
    builder = ModelBuilder(
        threshold_type="float32",
        leaf_output_type="float32",
        metadata=Metadata(
            num_feature=int(field("num_feature")[0]),
            task_type=_TASK_TYPES[task],
            average_tree_output=bool(field("average_tree_output")[0]),
            num_target=int(field("num_target")[0]),
            num_class=ints("num_class"),
            leaf_vector_shape=_pair(ints("leaf_vector_shape")),
        ),
        tree_annotation=TreeAnnotation(
            num_tree=int(field("num_tree")[0]),
            target_id=ints("target_id"),
            class_id=ints("class_id"),
        ),
        postprocessor=PostProcessorFunc(
            field("postprocessor"),
            sigmoid_alpha=float(field("sigmoid_alpha")[0]),
            ratio_c=float(field("ratio_c")[0]),
        ),
        base_scores=[float(v) for v in field("base_scores")],
        attributes=json.loads(attributes) if attributes else None,
    )
    for index in range(int(field("num_tree")[0])):
        _copy_tree(model.get_tree_accessor(index), builder)
    return builder.commit()


def _copy_tree(tree: Any, builder: Any) -> None:
    get = tree.get_field
    kinds, left, right, feature = get("node_type"), get("cleft"), get("cright"), get("split_index")
    default_left, operators = get("default_left").astype(bool), get("cmp")
    values, vectors = get("leaf_value"), get("leaf_vector")
    vector_begin, vector_end = get("leaf_vector_begin"), get("leaf_vector_end")
    categories = get("category_list")
    category_begin, category_end = get("category_list_begin"), get("category_list_end")
    right_side = get("category_list_right_child").astype(bool)
    thresholds = _float32_thresholds(get("threshold"), operators)
    builder.start_tree()
    for node in range(int(get("num_nodes")[0])):
        builder.start_node(node)
        kind = int(kinds[node])
        if kind == _LEAF:
            begin, end = int(vector_begin[node]), int(vector_end[node])
            builder.leaf(vectors[begin:end].tolist() if end > begin else float(values[node]))
        elif kind == _NUMERICAL:
            builder.numerical_test(
                int(feature[node]),
                float(thresholds[node]),
                default_left=bool(default_left[node]),
                opname=_OPERATORS[int(operators[node])],
                left_child_key=int(left[node]),
                right_child_key=int(right[node]),
            )
        elif kind == _CATEGORICAL:
            begin, end = int(category_begin[node]), int(category_end[node])
            builder.categorical_test(
                int(feature[node]),
                category_list=categories[begin:end].tolist(),
                default_left=bool(default_left[node]),
                category_list_right_child=bool(right_side[node]),
                left_child_key=int(left[node]),
                right_child_key=int(right[node]),
            )
        else:
            raise ValueError(f"treelite node type {kind} is not one tl2cgen compiles here")
        builder.end_node()
    builder.end_tree()


def _float32_thresholds(thresholds: np.ndarray, operators: np.ndarray) -> np.ndarray:
    """float64 thresholds → float32 ones that split float32 values the same way."""
    wide = np.asarray(thresholds, dtype=np.float64)
    narrow = wide.astype(np.float32)
    # x <= t and x > t: a float32 above t would take x = that float32 to the other side.
    down = np.isin(operators, (3, 4)) & (narrow.astype(np.float64) > wide)
    # x < t and x >= t: likewise a float32 below t.
    up = np.isin(operators, (2, 5)) & (narrow.astype(np.float64) < wide)
    narrow[down] = np.nextafter(narrow[down], np.float32(-np.inf))
    narrow[up] = np.nextafter(narrow[up], np.float32(np.inf))
    return narrow


def _build_lleaves(
    estimator: Any, workdir: Path, n_classes: int | None, threads: list[int]
) -> list[AcceleratorCandidate]:
    import lleaves

    text = workdir / "lightgbm.txt"
    estimator.booster_.save_model(str(text))
    library = workdir / "lleaves.o"
    with _quiet():
        lleaves.Model(model_file=str(text)).compile(cache=str(library))
    result = []
    for n in threads:
        # Timed and checked as `score --accelerator` will run it: loaded from the files.
        loaded = LeavesTrees(library, text, n, n_classes, min_rows=1)
        result.append(
            AcceleratorCandidate(
                engine="lleaves",
                predict=loaded.outputs,
                threads=n,
                artifact=library,
                model_text=text,
                loaded=loaded,
            )
        )
    return result


def check_candidate(
    candidate: AcceleratorCandidate,
    predictor: Predictor,
    probes: np.ndarray,
    *,
    atol: float = DEFAULT_ATOL,
    rtol: float = DEFAULT_RTOL,
) -> AcceleratorCheck:
    """Compare a candidate with the ONNX model on ``probes``: labels equal, values within
    ``atol + rtol·|onnx|``."""
    reference = predictor.predict(probes, allow_missing=True)
    try:
        got = np.asarray(candidate.predict(probes), dtype=np.float64)
    except Exception as exc:  # a candidate that cannot run is not equivalent
        return AcceleratorCheck(
            name=candidate.name,
            equivalent=False,
            label_mismatches=len(probes),
            max_abs_diff=float("inf"),
            probe_rows=len(probes),
            reason=f"failed to run: {first_line(exc)}",
        )
    if reference.probabilities is not None:
        expected = np.asarray(reference.probabilities, dtype=np.float64)
        classes = (
            reference.classes if reference.classes is not None else list(range(len(expected[0])))
        )
        if got.shape != expected.shape:
            return _shape_mismatch(candidate, got, expected, len(probes))
        labels = np.asarray(classes, dtype=object)[np.argmax(got, axis=1)]
        mismatches = int(np.sum(labels != np.asarray(reference.labels, dtype=object)))
    else:
        if reference.values is None:
            # Decision scores only (no probabilities): nothing to compare compiled trees with.
            return AcceleratorCheck(
                name=candidate.name,
                equivalent=False,
                label_mismatches=0,
                max_abs_diff=float("inf"),
                probe_rows=len(probes),
                reason="the model gives scores, not probabilities or values",
            )
        expected = np.asarray(reference.values, dtype=np.float64)
        if got.shape != expected.shape:
            got = got.reshape(expected.shape) if got.size == expected.size else got
        if got.shape != expected.shape:
            return _shape_mismatch(candidate, got, expected, len(probes))
        mismatches = 0
    diff = np.abs(got - expected)
    max_abs = float(np.max(diff)) if diff.size else 0.0
    within = bool(np.all(diff <= atol + rtol * np.abs(expected)))
    equivalent = within and mismatches == 0
    return AcceleratorCheck(
        name=candidate.name,
        equivalent=equivalent,
        label_mismatches=mismatches,
        max_abs_diff=max_abs,
        probe_rows=len(probes),
        reason=""
        if equivalent
        else (
            f"{mismatches} labels differ, max |Δ| {max_abs:.3g} (tolerance {atol:g} + "
            f"{rtol:g}·|onnx|)"
        ),
    )


def _shape_mismatch(
    candidate: AcceleratorCandidate, got: np.ndarray, expected: np.ndarray, n: int
) -> AcceleratorCheck:
    return AcceleratorCheck(
        name=candidate.name,
        equivalent=False,
        label_mismatches=n,
        max_abs_diff=float("inf"),
        probe_rows=n,
        reason=f"output shape {got.shape} differs from the ONNX model's {expected.shape}",
    )


def choose_accelerator(
    checks: list[AcceleratorCheck], *, margin: float = 0.05
) -> AcceleratorCheck | None:
    """The candidate to record, or None: equivalent, and faster than ONNX Runtime by more than
    ``margin`` at the largest measured batch size; among those, the fastest there.

    Marks every check's ``chosen`` and ``reason``.
    """
    eligible: list[tuple[float, AcceleratorCheck]] = []
    for check in checks:
        check.chosen = False
        if not check.equivalent:
            check.reason = check.reason or "not equivalent to the ONNX model"
            check.reason = f"not chosen: {check.reason}"
            continue
        if not check.speedups:
            check.reason = "not chosen: not timed"
            continue
        largest = max(check.speedups)
        speedup = check.speedups[largest]
        if speedup <= 1.0 + margin:
            check.reason = (
                f"not chosen: equivalent but not faster ({speedup:.2f}× ONNX Runtime at "
                f"{largest} rows; needs > {1 + margin:.2f}×)"
            )
            continue
        check.reason = f"equivalent and {speedup:.2f}× ONNX Runtime at {largest} rows"
        eligible.append((speedup, check))
    if not eligible:
        return None
    best = max(eligible, key=lambda item: item[0])[1]
    best.chosen = True
    for _, check in eligible:
        if check is not best:
            check.reason = f"not chosen: {best.name} is faster ({check.reason})"
    return best


def min_rows_of(check: AcceleratorCheck, *, margin: float = 0.05) -> int:
    """The smallest measured batch size from which the accelerator stays faster."""
    sizes = sorted(check.speedups)
    start = sizes[-1]
    for size in reversed(sizes):
        if check.speedups[size] > 1.0 + margin:
            start = size
        else:
            break
    return start
