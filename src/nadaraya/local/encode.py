"""Text and pandas Categorical columns of ``X``: category codes for the declared categorical columns.

As the command line encodes them (:func:`nadaraya.cli._io.encode_categories`): an unordered
column (``var_types`` ``"u"``) of text gets its distinct values sorted, the j-th coded j; a
pandas Categorical keeps the order of its categories (for an ordered one, declared ``"o"``, that
order is the categories' own). Ordered text without an order (plain strings) is refused, since
sorted text is not the order of the categories. A text column declared continuous is refused,
naming it. The labels are kept in ``category_labels_`` (column name, or number, to labels);
queries are coded by them, a label not seen in training gets -1, "different" from every
training category; numbers in such a column are taken as the codes themselves.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["encode_fit", "encode_queries"]


def _is_frame(X: Any) -> bool:
    return hasattr(X, "columns") and hasattr(X, "dtypes") and hasattr(X, "iloc")


def _columns(X: Any) -> list[tuple[str, Any]] | None:
    """``(name, values)`` per column of a DataFrame or of a 2-D text/object array; None for
    anything else (numbers, or shapes that validation will refuse)."""
    if _is_frame(X):
        return [(str(c), X.iloc[:, j]) for j, c in enumerate(X.columns)]
    if isinstance(X, np.ndarray | list | tuple):
        a = np.asarray(X, dtype=object) if not isinstance(X, np.ndarray) else X
        if a.dtype.kind in "OUS" and a.ndim == 2:
            return [(str(j), a[:, j]) for j in range(a.shape[1])]
    return None


def _category(values: Any) -> Any:
    """The pandas Categorical behind ``values``, or None."""
    cat = getattr(values, "cat", None)
    if cat is not None:  # a Series of category dtype
        return values.array
    return values if type(values).__name__ == "Categorical" and hasattr(values, "codes") else None


def _numbers(values: Any) -> np.ndarray | None:
    """``values`` as float64; None when some entry is text (not a number)."""
    cat = _category(values)
    if cat is not None and not np.issubdtype(np.asarray(cat.categories).dtype, np.number):
        return None
    try:
        return np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        if any(isinstance(v, str | bytes) for v in np.asarray(values, dtype=object)):
            return None
        return np.zeros(0)  # neither numbers nor text (dicts, lists): validation refuses them as ever


def shown_labels(values: list[str]) -> str:
    """The first few labels, quoted, for a message."""
    return ", ".join(repr(v) for v in values[:4]) + (", ..." if len(values) > 4 else "")


def sorted_codes(text: list[str | None]) -> tuple[np.ndarray, list[str]]:
    """A text column's codes (float64: each label's place among the sorted distinct labels, NaN
    where missing) and those labels; the CLI codes its text columns the same way."""
    distinct = sorted({v for v in text if v is not None})
    code = {v: float(j) for j, v in enumerate(distinct)}
    return np.array([np.nan if v is None else code[v] for v in text], dtype=np.float64), distinct


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and v != v) or type(v).__name__ in ("NAType", "NaTType")


def _label(name: str, frame: bool) -> str:
    return f"X column {name!r}" if frame else f"X column {name}"


def _labels(values: Any, kind: str, label: str) -> tuple[np.ndarray, np.ndarray]:
    """The codes (float64, NaN where missing) and labels of a text column of ``kind``."""
    cat = _category(values)
    if cat is not None and (kind == "u" or bool(cat.ordered)):
        codes = np.asarray(cat.codes, dtype=np.float64)
        return np.where(codes < 0, np.nan, codes), np.array([str(c) for c in cat.categories], dtype=object)
    text = [None if _missing(v) else str(v) for v in np.asarray(values, dtype=object)]
    codes, distinct = sorted_codes(text)
    if kind == "o":
        raise ValueError(
            f"{label} is ordered (var_types 'o') but holds text ({shown_labels(distinct)}): ordered "
            "categories need numbers in their order, whose differences the Wang-van Ryzin kernel uses "
            "(e.g. low=0, medium=1, high=2), or a pandas Categorical with ordered=True; encode them so, "
            "or declare the column unordered ('u') if its categories have no order"
        )
    return codes, np.array(distinct, dtype=object)


def _text_error(label: str, values: Any, j: int, d: int) -> ValueError:
    text = sorted({str(v) for v in np.asarray(values, dtype=object) if not _missing(v)})
    suggest = "".join("u" if i == j else "c" for i in range(d))
    return ValueError(
        f"{label} holds text ({shown_labels(text)}), but var_types declares it continuous: declare it "
        f"categorical (e.g. var_types={suggest!r}: 'u' unordered, 'o' ordered), or encode it as numbers"
    )


def _rebuilt(X: Any, frame: bool, columns: dict[int, np.ndarray], d: int) -> Any:
    """``X`` with the columns ``columns`` replaced (a DataFrame stays one, with its names)."""
    if frame:
        out = X.copy()
        for j, v in columns.items():
            out[out.columns[j]] = v
        return out
    cols = _columns(X)
    assert cols is not None
    return np.column_stack([columns[j] if j in columns else _kept(cols[j][1]) for j in range(d)])


def _kept(values: Any) -> np.ndarray:
    """A column left as it is: float64 where it converts, else its objects (for validation)."""
    out = _numbers(values)
    return out if out is not None and out.shape == np.shape(values) else np.asarray(values, dtype=object)


def encode_fit(model: Any, X: Any) -> Any:
    """``X`` for ``fit``: its declared categorical text columns coded, ``category_labels_`` set
    (removed when none is text); a text column declared continuous is a ValueError naming it."""
    from nadaraya.local.mixed import as_var_types

    model.__dict__.pop("category_labels_", None)
    cols = _columns(X)
    if cols is None:
        return X
    frame, d = _is_frame(X), len(cols)
    text = [j for j, (_, v) in enumerate(cols) if _numbers(v) is None]
    if not text:
        return X
    vt = as_var_types(model.var_types, d)
    coded, labels = {}, {}
    for j in text:
        name, values = cols[j]
        if vt[j] == "c":
            raise _text_error(_label(name, frame), values, j, d)
        coded[j], labels[name] = _labels(values, vt[j], _label(name, frame))
    model.category_labels_ = labels
    return _rebuilt(X, frame, coded, d) if coded else X


def encode_queries(model: Any, X: Any) -> Any:
    """``X`` for ``predict`` and the other methods: the columns encoded at fit coded by their
    labels (-1 for a label not seen in training; numbers taken as codes)."""
    labels = getattr(model, "category_labels_", None) or {}
    cols = _columns(X)
    if cols is None:
        return X
    frame, d = _is_frame(X), len(cols)
    names = getattr(model, "feature_names_in_", None)
    keys = [str(v) for v in names] if names is not None else [str(j) for j in range(d)]
    vt = getattr(model, "var_types_", None) or "c" * d
    coded = {}
    for j, (name, values) in enumerate(cols):
        if _numbers(values) is not None:
            continue
        key = keys[j] if j < len(keys) else name
        if key not in labels:
            if j < len(vt) and vt[j] == "c":
                raise _text_error(_label(name, frame), values, j, d)
            raise ValueError(f"{_label(name, frame)} holds text, but it held numbers (category codes) when "
                             "the model was fitted: pass the same codes")
        code = {str(v): float(i) for i, v in enumerate(labels[key])}
        coded[j] = np.array([np.nan if _missing(v) else code.get(str(v), -1.0)
                             for v in np.asarray(values, dtype=object)])
    return _rebuilt(X, frame, coded, d) if coded else X
