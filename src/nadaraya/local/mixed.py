"""Mixed data: the variable types of the columns and the categorical kernels (ordered, unordered).

A column is continuous (``"c"``), ordered (``"o"``) or unordered (``"u"``), one letter per
column as in statsmodels and R's np. The weight of a key is the product of the continuous
kernel over the continuous columns and of one categorical factor per categorical column, whose
"bandwidth" is ``lambda``:

============  ===================================  ===============================  ============
kernel        equal (``x_i = x``)                   different                        lambda in
============  ===================================  ===============================  ============
classic, o    ``1 - lambda``                        ``(1 - lambda) / 2 * lambda **   [0, 1)
              (Wang and van Ryzin)                  |x_i - x|``
classic, u    ``1 - lambda``                        ``lambda / (c - 1)``             [0, (c-1)/c]
              (Aitchison and Aitken)
li-racine, o  ``1``                                 ``lambda ** |x_i - x|``          [0, 1]
li-racine, u  ``1``                                 ``lambda``                       [0, 1]
============  ===================================  ===============================  ============

``c`` is the number of distinct values of the column in the training data (statsmodels' and
np's convention; with ``c = 1`` the different-category weight is 0). Ordered differences are
the raw differences of the values. A category never seen in training is simply "different"
from every key: its weights follow the same formulas (with the unordered kernels at ``lambda
= 0`` it then has no key of positive weight, an empty window). ``lambda = 0`` is an indicator
(only equal categories count); the upper ends smooth the column out (every category equal),
except Wang-van Ryzin's, where ``lambda -> 1`` sends every weight to zero.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

__all__ = ["CATEGORICAL_KERNELS", "Categorical", "as_var_types", "lambda_bounds"]

CATEGORICAL_KERNELS = ("classic", "li-racine")


def as_var_types(var_types: str | None, d: int) -> str:
    """One letter per column among ``c``, ``o``, ``u``; None means all continuous.

    Examples
    --------
    >>> as_var_types(None, 3), as_var_types("cOu", 3)
    ('ccc', 'cou')
    >>> as_var_types("cx", 2)
    Traceback (most recent call last):
    ...
    ValueError: var_types='cx' has the letter 'x'; each column is 'c' continuous, 'o' ordered or ...
    """
    if var_types is None:
        return "c" * d
    if not isinstance(var_types, str):
        raise ValueError(f"var_types must be a string of 'c', 'o' and 'u', one per column; got {var_types!r}")
    vt = var_types.lower()
    bad = sorted(set(vt) - set("cou"))
    if bad:
        raise ValueError(
            f"var_types={var_types!r} has the letter {bad[0]!r}; each column is 'c' continuous, "
            "'o' ordered or 'u' unordered"
        )
    if len(vt) != d:
        raise ValueError(
            f"var_types={var_types!r} has {len(vt)} letters for {d} columns; give one per column"
        )
    return vt


def as_categorical_kernel(name: str) -> str:
    """``"classic"`` (Wang-van Ryzin and Aitchison-Aitken) or ``"li-racine"``.

    Examples
    --------
    >>> as_categorical_kernel("Li-Racine")
    'li-racine'
    """
    key = str(name).lower().replace("_", "-") if isinstance(name, str) else name
    if key not in CATEGORICAL_KERNELS:
        raise ValueError(f"categorical_kernel={name!r} is not one of {CATEGORICAL_KERNELS}")
    return key


def lambda_bounds(kind: str, levels: int, kernel: str) -> tuple[float, float, bool]:
    """The range of ``lambda`` for one categorical column: ``(low, high, high_included)``.

    Examples
    --------
    >>> lambda_bounds("u", 4, "classic")
    (0.0, 0.75, True)
    >>> lambda_bounds("o", 4, "classic")
    (0.0, 1.0, False)
    """
    if kernel == "li-racine":
        return 0.0, 1.0, True
    if kind == "o":
        return 0.0, 1.0, False
    return 0.0, (levels - 1) / levels if levels > 1 else 0.0, True


@dataclass
class Categorical:
    """The categorical columns of a call: their kinds, values and lambdas, and the key groups.

    Keys are grouped by their tuple of categories: within a group every key has the same
    categorical factor for a given query, so a group's continuous partial sums are computed
    once and shifted by the log of that factor (:meth:`log_factor`) before the exact merge.
    """

    kinds: str
    keys: NDArray[np.float64]  # (n, dk)
    queries: NDArray[np.float64]  # (m, dk)
    lambdas: NDArray[np.float64]  # (dk,)
    levels: NDArray[np.int64]  # (dk,): distinct training values per column
    kernel: str

    @classmethod
    def build(
        cls,
        kinds: str,
        keys: NDArray,
        queries: NDArray,
        lambdas: NDArray,
        kernel: str,
        levels: NDArray[np.int64] | None = None, columns: NDArray[np.intp] | None = None,
    ) -> Categorical:
        """Validated categorical columns (``levels`` defaults to the keys' distinct values;
        ``columns``, their positions among all the columns, numbers them in errors)."""
        keys = np.asarray(keys, dtype=np.float64)
        queries = np.asarray(queries, dtype=np.float64)
        if levels is None:
            levels = np.array([np.unique(keys[:, j]).size for j in range(keys.shape[1])], dtype=np.int64)
        lam = np.asarray(lambdas, dtype=np.float64)
        for j, kind in enumerate(kinds):
            low, high, closed = lambda_bounds(kind, int(levels[j]), kernel)
            ok = np.isfinite(lam[j]) and low <= lam[j] and (lam[j] <= high if closed else lam[j] < high)
            if not ok:
                what = "ordered" if kind == "o" else "unordered"
                top = f"{high:g}]" if closed else f"{high:g})"
                col = j if columns is None else int(columns[j])
                raise ValueError(
                    f"bandwidth entry {float(lam[j])!r} of {what} column {col} "
                    f"(a {kernel} categorical lambda) "
                    f"must lie in [{low:g}, {top}" + ("" if kind == "o" else f" (c = {levels[j]} categories)")
                )
        return cls(kinds, keys, queries, lam, levels, kernel)

    def groups(self) -> tuple[NDArray[np.float64], NDArray[np.intp]]:
        """The distinct category tuples of the keys (G, dk) and each key's group (n,)."""
        uniq, inverse = np.unique(self.keys, axis=0, return_inverse=True)
        return uniq, inverse.reshape(-1)

    def log_factor(self, queries: NDArray[np.float64], cats: NDArray[np.float64]) -> NDArray[np.float64]:
        """``log`` of the product of the categorical factors, queries (m, dk) by tuples (G, dk).

        Examples
        --------
        >>> c = Categorical.build("u", np.array([[0.0], [1.0], [2.0]]), np.zeros((1, 1)),
        ...                       np.array([0.3]), "classic")
        >>> np.exp(c.log_factor(np.array([[0.0]]), np.array([[0.0], [1.0]]))).round(3).tolist()
        [[0.7, 0.15]]
        """
        out = np.zeros((queries.shape[0], cats.shape[0]))
        with np.errstate(divide="ignore", invalid="ignore"):
            for j, kind in enumerate(self.kinds):
                lam = float(self.lambdas[j])
                diff = np.abs(queries[:, j, None] - cats[None, :, j])
                equal = diff == 0
                if self.kernel == "li-racine":
                    same, other = (
                        0.0,
                        (np.log(lam) * diff if kind == "o" else np.full(diff.shape, np.log(lam))),
                    )
                elif kind == "o":
                    same = np.log1p(-lam)
                    other = np.log((1.0 - lam) / 2.0) + np.where(equal, 0.0, diff) * np.log(lam)
                else:
                    c = int(self.levels[j])
                    same = np.log1p(-lam)
                    other = np.full(diff.shape, np.log(lam / (c - 1)) if c > 1 else -np.inf)
                out += np.where(equal, same, other)
        return out


def _levels(X: NDArray[np.float64], vt: str) -> NDArray[np.int64]:
    """The number of distinct training values of each categorical column (the ``c`` of
    Aitchison-Aitken), 0 for the continuous columns."""
    return np.array([np.unique(X[:, j]).size if t != "c" else 0 for j, t in enumerate(vt)], dtype=np.int64)


