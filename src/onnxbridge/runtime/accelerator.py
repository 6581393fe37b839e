"""The accelerator ``onnxbridge tune --engines all`` recorded, used for large batches on request.

``tune`` builds compiled copies of a bundle's trees (tl2cgen), checks them with the probes of
``validate`` against the ONNX model and records one only when it is equivalent and faster, with
the compiled library in ``BUNDLE/accelerators/`` (its sha256 in ``card.json``). Nothing uses it
by default: ONNX stays the artifact and ONNX Runtime the engine. ``Predictor(...,
accelerator=True)`` (and ``onnxbridge score --accelerator``) runs calls of at least the recorded
``min_rows`` rows on it instead — **a compiled library is native code**, so it is loaded only
when asked for, only from a bundle, and only when its hash matches the card.

Only accelerators with a library are loadable here (tl2cgen); an lleaves record (compiled at
load time, from the LightGBM model text) is refused with a message.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import numpy as np

from onnxbridge.errors import AcceleratorError, BundleError, first_line

__all__ = ["CompiledTrees", "compiled_output", "load_accelerator"]


class CompiledTrees:
    """A loaded tl2cgen library: ``[N, F]`` float32 rows → probabilities ``[N, C]`` or values.

    Args:
        library: the compiled ``.so``.
        threads: the threads it was recorded with.
        n_classes: classes of a classifier, or None for a regressor.
        min_rows: the smallest call it serves (smaller ones stay on ONNX Runtime).
    """

    def __init__(self, library: Path, threads: int, n_classes: int | None, min_rows: int) -> None:
        import tl2cgen

        self._tl2cgen = tl2cgen
        self.library = library
        self.threads = threads
        self.n_classes = n_classes
        self.min_rows = min_rows
        self._engine = tl2cgen.Predictor(str(library), nthread=threads, verbose=False)

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Probabilities ``[N, C]`` (float32) for a classifier, values ``[N]`` for a regressor.

        ``X`` comes in the model's input type: float64 rows (a model converted in double) are
        compared with the trees' thresholds in double, anything else in float32.
        """
        dtype = np.float64 if X.dtype == np.float64 else np.float32
        rows = np.ascontiguousarray(X, dtype=dtype)
        raw = self._engine.predict(self._tl2cgen.DMatrix(rows, dtype=np.dtype(dtype).name))
        return compiled_output(raw, len(X), self.n_classes, np.float32)


def compiled_output(
    raw: Any, n_rows: int, n_classes: int | None, dtype: Any = np.float64
) -> np.ndarray:
    """Compiled engines' outputs → ``[N, C]`` probabilities or ``[N]`` values of ``dtype``."""
    out = np.asarray(raw, dtype=dtype).reshape(n_rows, -1)
    if n_classes is None:
        return out.reshape(n_rows) if out.shape[1] == 1 else out
    if out.shape[1] == 1 and n_classes == 2:
        # Binary models give the positive class's probability only.
        return np.hstack([1.0 - out, out])
    return out


def load_accelerator(
    model_path: Path | None, record: dict[str, Any] | None, n_classes: int | None
) -> CompiledTrees:
    """The recorded accelerator of the bundle holding ``model_path``, loaded and checked.

    Raises:
        AcceleratorError: no bundle, nothing recorded, an engine that cannot be loaded here,
            tl2cgen not installed, or a library that is missing or changed since ``tune``.
    """
    hint = "run `onnxbridge tune BUNDLE --engines all` on a bundle with model.skops first"
    if model_path is None:
        raise AcceleratorError(
            "an accelerator is loaded from a bundle's folder; pass the bundle's model.onnx path, "
            "not the model's bytes"
        )
    if not record:
        raise AcceleratorError(
            f"{str(model_path)!r} has no accelerator recorded (tune records one only when it is "
            f"equivalent and faster); {hint}, or leave --accelerator out"
        )
    engine = record.get("engine")
    library = record.get("library")
    if engine != "tl2cgen" or not library:
        raise AcceleratorError(
            f"the recorded accelerator ({engine}) has no compiled library to load; only tl2cgen "
            "libraries are loaded (leave --accelerator out)"
        )
    if importlib.util.find_spec("tl2cgen") is None:
        raise AcceleratorError(
            "the recorded accelerator needs tl2cgen: pip install 'onnxbridge[accel]' "
            "(or leave --accelerator out)"
        )
    from onnxbridge.bundle import Bundle

    folder = model_path.parent
    try:
        bundle = Bundle.open(folder)
        if str(library) not in bundle.card.get("files", {}):
            raise BundleError(f"card.json records no hash for {library}")
        bundle.check_file(str(library))
    except BundleError as exc:
        raise AcceleratorError(
            f"the accelerator library cannot be trusted: {first_line(exc)}; re-run {hint}"
        ) from exc
    path = (folder / str(library)).resolve()
    if folder.resolve() not in path.parents:
        raise AcceleratorError(f"the accelerator library {library!r} is outside the bundle")
    try:
        return CompiledTrees(
            path,
            threads=int(record.get("threads") or 1),
            n_classes=n_classes,
            min_rows=int(record.get("min_rows") or 1),
        )
    except Exception as exc:  # tl2cgen raises its own errors for a library it cannot load
        raise AcceleratorError(
            f"tl2cgen could not load {str(path)!r} ({first_line(exc)}); re-run {hint}"
        ) from exc
