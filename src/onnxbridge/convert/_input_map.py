"""Where each column a model's final step sees comes from, and how to get back to the input.

A tree at the end of a Pipeline splits on *transformed* columns: a ColumnTransformer's output,
a scaler's output. To place a row on a split threshold the threshold has to be carried back to
the model's input columns. :func:`column_sources` walks the fitted steps in front of the final
one and says, for every column the final step sees, which input column feeds it and how:

* ``numeric``: an elementwise chain of ``x - c``, ``x / c``, ``x * c``, ``x + c``, ``max(x, c)``
  and ``min(x, c)`` on one input column (passthrough and remainder columns, imputers on complete
  rows and FunctionTransformer without a function are the empty chain; StandardScaler,
  MinMaxScaler, MaxAbsScaler and RobustScaler add the operations their options switch on, in the
  order scikit-learn computes them; MinMaxScaler with ``clip=True`` adds the clip). It is inverted
  exactly, then nudged in float64 so that the chain lands as close as float64 allows on the
  wanted value; a value the chain never gives (outside a clip) has no inverse (NaN);
* ``onehot``: OneHotEncoder's column of one category (1 when the input is that category);
* ``ordinal``: OrdinalEncoder's codes (the position of the input in its categories);
* ``indicator``: an imputer's missing-value indicator (1 when the input is missing);
* ``opaque``: anything else (PCA mixing columns, polynomial features, binning, target
  encoding, ...): the column cannot be carried back, and ``step`` names why.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["ColumnSource", "column_sources"]

_IDENTITY_ON_COMPLETE_ROWS = ("SimpleImputer", "KNNImputer", "IterativeImputer")
_INVERSE = {
    "sub": "add",
    "add": "sub",
    "div": "mul",
    "mul": "div",
    "max": "atleast",
    "min": "atmost",
}


def _apply(op: str, x: float, c: float) -> float:
    if op == "sub":
        return x - c
    if op == "add":
        return x + c
    if op == "div":
        return x / c
    if op == "max":  # NaN stays NaN, as np.clip keeps it
        return float(np.maximum(x, c))
    if op == "min":
        return float(np.minimum(x, c))
    if op == "atleast":  # inverse of max(x, c): values below c are never produced
        return x if x >= c else float("nan")
    if op == "atmost":
        return x if x <= c else float("nan")
    return x * c


@dataclass(frozen=True)
class ColumnSource:
    """How one column the final step sees is made from the model's input.

    Attributes:
        kind: ``"numeric"``, ``"onehot"``, ``"ordinal"``, ``"indicator"`` or ``"opaque"``.
        column: position of the input column that feeds it (-1 for ``opaque``).
        ops: ``numeric``: ``(operation, constant)`` pairs applied in order (``sub``, ``div``,
            ``mul``, ``add``, ``max``, ``min``); empty when the column is the input value itself.
        category: ``onehot``: the category whose column this is.
        categories: ``onehot`` / ``ordinal``: the input column's categories in code order.
        step: ``opaque``: the class name of the step that cannot be inverted.
    """

    kind: str
    column: int = -1
    ops: tuple[tuple[str, float], ...] = ()
    category: Any = None
    categories: tuple[Any, ...] = ()
    step: str = ""

    @property
    def raw(self) -> bool:
        """Whether the column is the input value itself."""
        return self.kind == "numeric" and not self.ops

    def forward(self, value: Any) -> float:
        """The transformed value for input ``value`` (float64, as scikit-learn computes it)."""
        if self.kind == "numeric":
            x = float(value)
            for op, c in self.ops:
                x = _apply(op, x, c)
            return x
        if self.kind == "onehot":
            return float(_same(value, self.category))
        if self.kind == "ordinal":
            for code, known in enumerate(self.categories):
                if _same(value, known):
                    return float(code)
            return float("nan")
        if self.kind == "indicator":
            return float(_missing(value))
        return float("nan")

    def inverse(self, z: float) -> float:
        """An input value whose ``forward`` is as close to ``z`` as float64 allows.

        NaN when no input value gives ``z`` (a clipped column asked for a value outside its
        clip).
        """
        x = float(z)
        for op, c in reversed(self.ops):
            x = _apply(_INVERSE[op], x, c)
        if not self.ops or not np.isfinite(x):
            return x
        # The exact inverse may be a few float64 steps off once rounded: try its neighbours.
        best, best_gap = x, abs(self.forward(x) - z)
        for direction in (-np.inf, np.inf):
            candidate = x
            for _ in range(4):
                candidate = float(np.nextafter(candidate, direction))
                gap = abs(self.forward(candidate) - z)
                if gap < best_gap:
                    best, best_gap = candidate, gap
        return best


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and np.isnan(value))


def _same(value: Any, category: Any) -> bool:
    if _missing(value) or _missing(category):
        return _missing(value) and _missing(category)
    return bool(value == category)


def _opaque(step: Any, width: int) -> list[ColumnSource]:
    return [ColumnSource("opaque", step=type(step).__name__)] * width


def _width(step: Any) -> int | None:
    try:
        return len(step.get_feature_names_out())
    except Exception:
        return None


def _affine(step: Any) -> list[list[tuple[str, float]]] | None:
    """Per input column, the elementwise operations of a fitted scaler (None: not a scaler).

    Only the operations the scaler's options switch on: StandardScaler fits ``mean_`` when
    ``with_std=True`` even with ``with_mean=False``, and does not subtract it then.
    """
    name = type(step).__name__
    n = int(getattr(step, "n_features_in_", 0))
    params = step.get_params() if hasattr(step, "get_params") else {}

    def column(*parts: tuple[str, Any, bool]) -> list[list[tuple[str, float]]]:
        used = [
            (op, np.asarray(c, dtype=np.float64)) for op, c, on in parts if on and c is not None
        ]
        return [[(op, float(c if c.ndim == 0 else c[k])) for op, c in used] for k in range(n)]

    if name == "StandardScaler":
        return column(
            ("sub", getattr(step, "mean_", None), bool(params.get("with_mean", True))),
            ("div", getattr(step, "scale_", None), bool(params.get("with_std", True))),
        )
    if name == "MinMaxScaler":
        low, high = params.get("feature_range", (0, 1))
        clip = bool(params.get("clip", False))
        return column(
            ("mul", step.scale_, True),
            ("add", step.min_, True),
            ("max", float(low), clip),
            ("min", float(high), clip),
        )
    if name == "MaxAbsScaler":
        return column(("div", step.scale_, True))
    if name == "RobustScaler":
        return column(
            ("sub", getattr(step, "center_", None), bool(params.get("with_centering", True))),
            ("div", getattr(step, "scale_", None), bool(params.get("with_scaling", True))),
        )
    return None


def _encoder(step: Any, sources: list[ColumnSource]) -> list[ColumnSource] | None:
    name = type(step).__name__
    categories = getattr(step, "categories_", None)
    if name not in ("OneHotEncoder", "OrdinalEncoder") or categories is None:
        return None
    params = step.get_params()
    if params.get("max_categories") is not None or params.get("min_frequency") is not None:
        return None  # infrequent categories share a column: not one category per column
    out: list[ColumnSource] = []
    drop = getattr(step, "drop_idx_", None)
    for k, (source, known) in enumerate(zip(sources, categories, strict=True)):
        known = tuple(np.asarray(known).tolist())
        if not source.raw:
            return None
        if name == "OrdinalEncoder":
            out.append(ColumnSource("ordinal", source.column, categories=known))
            continue
        dropped = None if drop is None or drop[k] is None else int(drop[k])
        out.extend(
            ColumnSource("onehot", source.column, category=value, categories=known)
            for code, value in enumerate(known)
            if code != dropped
        )
    return out


def _kept_by_imputer(step: Any, width: int) -> list[int] | None:
    """Positions of the input columns an imputer keeps (None: it cannot say).

    Imputers drop the columns that were entirely missing in training unless
    ``keep_empty_features=True``; the kept ones lead ``get_feature_names_out()``, in order,
    before the missing-value indicators.
    """
    if step.get_params().get("keep_empty_features", False):
        return list(range(width))
    known = getattr(step, "feature_names_in_", None)
    names_in = [str(n) for n in known] if known is not None else [f"x{k}" for k in range(width)]
    indicator = _indicator(step)
    try:
        out = [str(n) for n in step.get_feature_names_out()]
    except Exception:
        return None
    out = out[: len(out) - (len(indicator.features_) if indicator is not None else 0)]
    if len(names_in) != width or len(set(names_in)) != width or not set(out) <= set(names_in):
        return None
    kept = [names_in.index(n) for n in out]
    return kept if kept == sorted(kept) else None


def _indicator(step: Any) -> Any:
    return getattr(step, "indicator_", None) if getattr(step, "add_indicator", False) else None


def _imputer(step: Any, sources: list[ColumnSource]) -> list[ColumnSource]:
    kept_at = _kept_by_imputer(step, len(sources))
    if kept_at is None:
        return _opaque(step, _width(step) or len(sources))
    kept = [sources[k] for k in kept_at]
    indicator = _indicator(step)
    if indicator is not None:
        for k in indicator.features_:
            source = sources[int(k)]
            kept.append(
                ColumnSource("indicator", source.column)
                if source.raw
                else ColumnSource("opaque", step="MissingIndicator")
            )
    return kept


def _through(step: Any, sources: list[ColumnSource], names: list[str]) -> list[ColumnSource]:
    """The sources of ``step``'s output columns, given those of its input columns."""
    if step is None or (isinstance(step, str) and step == "passthrough"):
        return sources
    name = type(step).__name__
    if name == "Pipeline":
        for _, inner in step.steps:
            sources = _through(inner, sources, names)
        return sources
    if name == "ColumnTransformer":
        return _column_transformer(step, sources, names)
    opaque = [s for s in sources if s.kind == "opaque"]
    if name in _IDENTITY_ON_COMPLETE_ROWS:
        return _imputer(step, sources)
    if name == "FunctionTransformer" and step.func is None:
        return sources
    encoded = _encoder(step, sources)
    if encoded is not None:
        return encoded
    affine = _affine(step)
    if affine is not None and len(affine) == len(sources):
        out = []
        for source, ops in zip(sources, affine, strict=True):
            if source.kind != "numeric":
                out.append(source if source.kind == "opaque" else _opaque(step, 1)[0])
            else:
                out.append(ColumnSource("numeric", source.column, ops=source.ops + tuple(ops)))
        return out
    if opaque and len(opaque) == len(sources) and _width(step) in (None, len(sources)):
        return sources  # already opaque: keep the first step that could not be inverted
    return _opaque(step, _width(step) or len(sources))


def _positions(columns: Any, names: list[str], width: int) -> list[int]:
    if callable(columns):
        raise TypeError("unresolved column selector")
    if isinstance(columns, (str, int, np.integer)):
        columns = [columns]
    if isinstance(columns, slice):
        if isinstance(columns.start, str) or isinstance(columns.stop, str):
            start = names.index(columns.start) if columns.start is not None else 0
            stop = names.index(columns.stop) + 1 if columns.stop is not None else width
            return list(range(start, stop))
        return list(range(width))[columns]
    values = list(np.asarray(columns).tolist())
    if values and isinstance(values[0], bool):
        return [i for i, keep in enumerate(values) if keep]
    return [names.index(v) if isinstance(v, str) else int(v) for v in values]


def _column_transformer(
    step: Any, sources: list[ColumnSource], names: list[str]
) -> list[ColumnSource]:
    slices = getattr(step, "output_indices_", None)
    width = _width(step)
    if slices is None or width is None:
        return _opaque(step, width or len(sources))
    known = getattr(step, "feature_names_in_", None)
    inner_names = [str(n) for n in known] if known is not None else names
    out: list[ColumnSource] = _opaque(step, width)
    for name, transformer, columns in step.transformers_:
        part = slices.get(name)
        if part is None or (isinstance(transformer, str) and transformer == "drop"):
            continue
        span = part.stop - part.start
        if span == 0:
            continue
        try:
            picked = [sources[i] for i in _positions(columns, inner_names, len(sources))]
            branch = _through(transformer, picked, inner_names)
        except (TypeError, ValueError, IndexError):
            branch = _opaque(transformer, span)
        if len(branch) != span:
            branch = _opaque(transformer, span)
        out[part.start : part.stop] = branch
    return out


def column_sources(estimator: Any, names: list[str]) -> list[ColumnSource]:
    """The source of every column the final step of ``estimator`` sees.

    Args:
        estimator: a fitted model or Pipeline (the steps before the last one are walked).
        names: the model's input columns, in order.

    Returns:
        One :class:`ColumnSource` per column the final step takes.
    """
    sources = [ColumnSource("numeric", k) for k in range(len(names))]
    while hasattr(estimator, "steps"):
        for _, step in list(estimator.steps)[:-1]:
            sources = _through(step, sources, names)
        estimator = estimator.steps[-1][1]
    return sources
