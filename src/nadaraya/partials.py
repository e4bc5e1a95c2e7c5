"""The partial-sums type that every backend returns, and its exact merge.

A block of keys contributes to a block of queries a :class:`Partials`: per query a ``shift``
at or above the largest log weight seen so far (the running maximum, or a cheap upper bound of
it such as the fused backend's), the sum of the weights rescaled by ``exp(-shift)``, and the
same weighted sum of the values. What a partial means is ``shift + log(weight)`` (the
log-sum-exp of the weights) and ``value / weight``; the split between shift and weight is free.
Two partials over disjoint key sets merge exactly by rescaling the one with the smaller shift
(the online-softmax rescaling of FlashAttention). Kernels that are not computed in the log
domain use ``shift = 0``.

Examples
--------
>>> import numpy as np
>>> from nadaraya.partials import Partials, merge
>>> a = Partials(np.array([0.0]), np.array([1.0]), np.array([[2.0]]))
>>> b = Partials(np.array([-1.0]), np.array([1.0]), np.array([[4.0]]))
>>> merge(a, b).finalize()[0].round(4).tolist()
[2.5379]
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["Partials", "empty", "merge", "merge_all"]


@dataclass
class Partials:
    """Per-query partial sums of Nadaraya-Watson attention pooling.

    The represented weights are ``exp(shift) * weight`` and ``exp(shift) * value``.

    Parameters
    ----------
    shift : ndarray of shape (m,)
        At or above the largest log weight (the running maximum, or an upper bound of it);
        ``-inf`` where no key contributed yet; ``0`` for kernels computed directly rather than
        in the log domain.
    weight : ndarray of shape (m,)
        ``sum_i exp(log w_i - shift)``.
    value : ndarray of shape (m, p)
        ``sum_i exp(log w_i - shift) v_i``.

    Examples
    --------
    >>> import numpy as np
    >>> p = Partials(np.zeros(2), np.array([2.0, 0.0]), np.array([[4.0], [0.0]]))
    >>> p.finalize()[:, 0].tolist()
    [2.0, nan]
    """

    shift: NDArray[np.floating]
    weight: NDArray[np.floating]
    value: NDArray[np.floating]

    @property
    def empty(self) -> NDArray[np.bool_]:
        """Queries that received no positive weight (an empty window)."""
        return ~(self.weight > 0)

    def finalize(self) -> NDArray[np.floating]:
        """The pooled values ``value / weight``, shape (m, p); NaN where the window is empty."""
        with np.errstate(invalid="ignore", divide="ignore"):
            out = self.value / self.weight[:, None]
        out[self.empty] = np.nan
        return out

    def __getitem__(self, index: object) -> Partials:
        """Select queries."""
        return Partials(self.shift[index], self.weight[index], self.value[index])  # type: ignore[index]


def empty(m: int, p: int, dtype: np.dtype | type = np.float64, log_domain: bool = True) -> Partials:
    """Partials of ``m`` queries that have seen no key.

    Examples
    --------
    >>> empty(2, 1).shift.tolist()
    [-inf, -inf]
    """
    start = -np.inf if log_domain else 0.0
    return Partials(
        np.full(m, start, dtype=dtype), np.zeros(m, dtype=dtype), np.zeros((m, p), dtype=dtype)
    )


def _scale(old: Any, new: Any, xp: Any) -> Any:
    """``exp(old - new)`` with ``exp(-inf - (-inf)) = 0`` (nothing seen on either side)."""
    finite = xp.isfinite(old)
    return xp.where(finite, xp.exp(xp.where(finite, old, 0.0) - xp.where(finite, new, 0.0)), 0.0)


def merge(a: Partials, b: Partials, xp: Any = np) -> Partials:
    """Merge partials of the same queries over two disjoint sets of keys. Exact.

    The fields may have leading batch dimensions (shift and weight ``(..., m)``, value
    ``(..., m, p)``) and may be arrays of another namespace ``xp`` with NumPy's names
    (``torch`` for the layers of :mod:`nadaraya.nn`): one merge serves every backend.

    Examples
    --------
    >>> import numpy as np
    >>> a = Partials(np.array([5.0]), np.array([1.0]), np.array([[1.0]]))
    >>> b = Partials(np.array([-np.inf]), np.array([0.0]), np.array([[0.0]]))
    >>> merge(a, b).weight.tolist()
    [1.0]
    """
    shift = xp.maximum(a.shift, b.shift)
    sa = _scale(a.shift, shift, xp)
    sb = _scale(b.shift, shift, xp)
    return Partials(
        shift,
        a.weight * sa + b.weight * sb,
        a.value * sa[..., None] + b.value * sb[..., None],
    )


def merge_all(parts: Iterable[Partials]) -> Partials:
    """Merge a sequence of partials from left to right (a fixed, reproducible order).

    Examples
    --------
    >>> import numpy as np
    >>> ps = [Partials(np.zeros(1), np.ones(1), np.full((1, 1), v)) for v in (1.0, 2.0, 6.0)]
    >>> merge_all(ps).finalize().tolist()
    [[3.0]]
    """
    it = iter(parts)
    try:
        acc = next(it)
    except StopIteration:
        raise ValueError("merge_all() needs at least one Partials") from None
    for p in it:
        acc = merge(acc, p)
    return acc


def concat(parts: Sequence[Partials]) -> Partials:
    """Stack partials of consecutive query blocks.

    Examples
    --------
    >>> import numpy as np
    >>> p = Partials(np.zeros(1), np.ones(1), np.ones((1, 1)))
    >>> concat([p, p]).weight.shape
    (2,)
    """
    return Partials(
        np.concatenate([p.shift for p in parts]),
        np.concatenate([p.weight for p in parts]),
        np.concatenate([p.value for p in parts]),
    )
