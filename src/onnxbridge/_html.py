"""Small HTML building blocks for the ``_repr_html_`` of result objects (rich display in Jupyter).

Everything is escaped unless wrapped in :class:`Html`, styles are inline (a notebook keeps inline
``style`` attributes but may drop ``<style>`` blocks), and nothing is loaded from elsewhere.
"""

from __future__ import annotations

import html
import math
from collections.abc import Collection, Iterable, Sequence
from typing import Any

__all__ = ["Html", "badge", "escape", "fmt_number", "heading", "paragraph", "table"]

_TABLE_STYLE = "border-collapse:collapse;margin:0.3em 0 0.8em 0;font-size:0.9em"
_CELL_STYLE = "border:1px solid #ccc;padding:0.15em 0.5em;"
_HEAD_STYLE = _CELL_STYLE + "background:#f2f2f2;text-align:left"
_GOOD = "background:#d8f5d0;color:#1d5e12"
_BAD = "background:#fbd9d6;color:#8a1409"


class Html(str):
    """Text that is already HTML: :func:`table` and :func:`paragraph` insert it as it is."""

    __slots__ = ()


def escape(value: Any) -> str:
    """``value`` as text safe inside HTML elements and quoted attributes."""
    if isinstance(value, Html):
        return str(value)
    return html.escape(str(value), quote=True)


def fmt_number(value: float | None) -> str:
    """A number on three significant digits (``2.38e-08``), ``0`` for zero, ``-`` for None."""
    if value is None:
        return "-"
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return "0" if value == 0 else f"{value:.3g}"


def badge(text: str, good: bool) -> Html:
    """``text`` in a green (``good``) or red box, e.g. a verdict."""
    style = _GOOD if good else _BAD
    return Html(
        f'<span style="{style};font-weight:700;padding:0.1em 0.5em;border-radius:0.3em">'
        f"{escape(text)}</span>"
    )


def heading(text: str) -> Html:
    """A small bold heading line (not an ``<h*>``, which notebooks style very large)."""
    return Html(f'<p style="font-weight:700;margin:0.6em 0 0.2em 0">{escape(text)}</p>')


def paragraph(*parts: Any) -> Html:
    """One paragraph of ``parts`` joined by spaces; strings are escaped, :class:`Html` is not."""
    return Html(f'<p style="margin:0.2em 0">{" ".join(escape(p) for p in parts)}</p>')


def _cell(tag: str, value: Any, right: bool | None) -> str:
    if value is None:
        value = "-"
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if number:
        value = str(value) if isinstance(value, int) else fmt_number(value)
    # Numbers right-aligned so their digits line up.
    align = "right" if (number if right is None else right) else "left"
    return f'<{tag} style="{_CELL_STYLE}text-align:{align}">{escape(value)}</{tag}>'


def table(
    header: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    right: Collection[int] | None = None,
) -> Html:
    """A ``<table>`` with one header row; cells are escaped unless they are :class:`Html`.

    Args:
        header: the column titles; empty for a table without a header row (field, value).
        rows: one sequence of cells per row; ints and floats are right-aligned, floats shown on
            three significant digits, None as ``-``.
        right: the columns to right-align whatever their cells hold (numbers already formatted
            as text, such as ``1.2 ms``); the others are then left-aligned.
    """

    def align(i: int) -> bool | None:
        return None if right is None else i in right

    head = "".join(f'<th style="{_HEAD_STYLE}">{escape(title)}</th>' for title in header)
    thead = f"<thead><tr>{head}</tr></thead>" if header else ""
    body = "".join(
        "<tr>" + "".join(_cell("td", v, align(i)) for i, v in enumerate(row)) + "</tr>"
        for row in rows
    )
    return Html(f'<table style="{_TABLE_STYLE}">{thead}<tbody>{body}</tbody></table>')
