"""The partial-sums type that every backend returns, and its exact merge.

A block of keys contributes to a block of queries a :class:`Partials`: per query a ``shift``
at or above the largest log weight seen so far (the running maximum, or a cheap upper bound of
it such as the fused backend's), the sum of the weights rescaled by ``exp(-shift)``, the same
weighted sum of the values, and any stack of further weighted sums under the same shift (the
moments of local polynomial fits: ``sum_i w_i (k_i - q)``, ``sum_i w_i (k_i - q)(k_i - q)^T``,
``sum_i w_i (k_i - q) y_i``, ...). What a partial means is ``shift + log(weight)`` (the
log-sum-exp of the weights) and ``value / weight``; the split between shift and weight is free.
Two partials over disjoint key sets merge exactly by rescaling the one with the smaller shift
(the online-softmax rescaling of FlashAttention); every weighted sum is rescaled by the same
factor. Kernels that are not computed in the log domain use ``shift = 0``.

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

__all__ = ["Partials", "concat", "empty", "merge", "merge_all"]


@dataclass
class Partials:
    """Per-query partial sums of Nadaraya-Watson attention pooling.

    The represented sums are ``exp(shift)`` times ``weight``, ``value`` and each of
    ``moments``. Every field may have the same leading batch dimensions ``(...)`` before the
    query axis, and may be an array of another namespace with NumPy's names (``torch``).

    Parameters
    ----------
    shift : ndarray of shape (..., m)
        At or above the largest log weight (the running maximum, or an upper bound of it);
        ``-inf`` where no key contributed yet; ``0`` for kernels computed directly rather than
        in the log domain.
    weight : ndarray of shape (..., m)
        ``sum_i exp(log w_i - shift)``.
    value : ndarray of shape (..., m, p)
        ``sum_i exp(log w_i - shift) v_i``.
    moments : tuple of ndarray, each of shape (..., m, ...), default ()
        Further sums ``sum_i exp(log w_i - shift) g_i(q)`` under the same shift, one array per
        sum with its own trailing shape (e.g. ``(d,)`` for ``sum w (k - q)``, ``(d, d)`` for
        ``sum w (k - q)(k - q)^T``, ``(d, p)`` for ``sum w (k - q) v``). What each one means is
        the caller's convention; :func:`merge` only rescales them. Empty for plain pooling.

    Examples
    --------
    >>> import numpy as np
    >>> p = Partials(np.zeros(2), np.array([2.0, 0.0]), np.array([[4.0], [0.0]]))
    >>> p.finalize()[:, 0].tolist()
    [2.0, nan]
    >>> q = Partials(np.zeros(1), np.ones(1), np.ones((1, 1)), (np.full((1, 2), 3.0),))
    >>> q.moments[0].shape
    (1, 2)
    """

    shift: NDArray[np.floating]
    weight: NDArray[np.floating]
    value: NDArray[np.floating]
    moments: tuple[NDArray[np.floating], ...] = ()

    @property
    def empty(self) -> NDArray[np.bool_]:
        """Queries that received no positive weight (an empty window)."""
        return ~(self.weight > 0)

    def finalize(self) -> NDArray[np.floating]:
        """The pooled values ``value / weight``, shape (..., m, p); NaN where the window is empty."""
        with np.errstate(invalid="ignore", divide="ignore"):
            out = self.value / self.weight[..., None]
        out[self.empty] = np.nan
        return out

    def __getitem__(self, index: object) -> Partials:
        """Select queries (along the query axis, after any batch dimensions).

        Examples
        --------
        >>> import numpy as np
        >>> p = Partials(np.zeros(3), np.arange(3.0), np.ones((3, 1)), (np.ones((3, 2)),))
        >>> p[1:].weight.tolist(), p[1:].moments[0].shape
        ([1.0, 2.0], (2, 2))
        """
        at: Any = (slice(None),) * (self.shift.ndim - 1) + (index,)
        return Partials(
            self.shift[at], self.weight[at], self.value[at], tuple(s[at] for s in self.moments)
        )


def empty(
    m: int,
    p: int,
    dtype: np.dtype | type = np.float64,
    log_domain: bool = True,
    moments: Sequence[tuple[int, ...]] = (),
) -> Partials:
    """Partials of ``m`` queries that have seen no key.

    Parameters
    ----------
    m, p : int
        Queries and value columns.
    dtype : dtype, default float64
    log_domain : bool, default True
        Start the shift at ``-inf`` (log-domain kernels) or ``0``.
    moments : sequence of tuple of int, default ()
        The trailing shape of each moment sum (zeros of shape ``(m, *shape)``).

    Examples
    --------
    >>> empty(2, 1).shift.tolist()
    [-inf, -inf]
    >>> [s.shape for s in empty(2, 1, moments=[(3,), (3, 3)]).moments]
    [(2, 3), (2, 3, 3)]
    """
    start = -np.inf if log_domain else 0.0
    return Partials(
        np.full(m, start, dtype=dtype),
        np.zeros(m, dtype=dtype),
        np.zeros((m, p), dtype=dtype),
        tuple(np.zeros((m, *shape), dtype=dtype) for shape in moments),
    )


def _scale(old: Any, new: Any, xp: Any) -> Any:
    """``exp(old - new)`` with ``exp(-inf - (-inf)) = 0`` (nothing seen on either side)."""
    finite = xp.isfinite(old)
    return xp.where(finite, xp.exp(xp.where(finite, old, 0.0) - xp.where(finite, new, 0.0)), 0.0)


def _rescaled(x: Any, sx: Any, y: Any, sy: Any) -> Any:
    """``x * sx + y * sy`` with the per-query factors ``sx``, ``sy`` broadcast over x's trailing axes."""
    tail = (...,) + (None,) * (x.ndim - sx.ndim)
    return x * sx[tail] + y * sy[tail]


def merge(a: Partials, b: Partials, xp: Any = np) -> Partials:
    """Merge partials of the same queries over two disjoint sets of keys. Exact.

    The fields may have leading batch dimensions (shift and weight ``(..., m)``, value
    ``(..., m, p)``, each moment ``(..., m, *trailing)``) and may be arrays of another
    namespace ``xp`` with NumPy's names (``torch`` for the layers of :mod:`nadaraya.nn`): one
    merge serves every backend. Both sides must carry the same stack of moments.

    Raises
    ------
    ValueError
        When ``a`` and ``b`` carry different numbers of moments.

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
    moments: tuple[Any, ...] = ()
    if a.moments or b.moments:
        if len(a.moments) != len(b.moments):
            raise ValueError(
                f"cannot merge partials carrying {len(a.moments)} and {len(b.moments)} moments; "
                "both sides must carry the same stack"
            )
        moments = tuple(_rescaled(x, sa, y, sb) for x, y in zip(a.moments, b.moments))
    return Partials(
        shift,
        a.weight * sa + b.weight * sb,
        a.value * sa[..., None] + b.value * sb[..., None],
        moments,
    )


def merge_all(parts: Iterable[Partials], xp: Any = np) -> Partials:
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
        acc = merge(acc, p, xp)
    return acc


def concat(parts: Sequence[Partials], xp: Any = np) -> Partials:
    """Stack partials of consecutive query blocks (along the query axis, after any batch axes).

    Raises
    ------
    ValueError
        For no parts, or parts carrying different numbers of moments.

    Examples
    --------
    >>> import numpy as np
    >>> p = Partials(np.zeros(1), np.ones(1), np.ones((1, 1)))
    >>> concat([p, p]).weight.shape
    (2,)
    """
    if not parts:
        raise ValueError("concat() needs at least one Partials")
    count = len(parts[0].moments)
    if any(len(p.moments) != count for p in parts):
        raise ValueError(
            f"cannot concatenate partials carrying {sorted({len(p.moments) for p in parts})} moments; "
            "all must carry the same stack"
        )
    axis = parts[0].shift.ndim - 1
    return Partials(
        xp.concatenate([p.shift for p in parts], axis=axis),
        xp.concatenate([p.weight for p in parts], axis=axis),
        xp.concatenate([p.value for p in parts], axis=axis),
        tuple(xp.concatenate([p.moments[j] for p in parts], axis=axis) for j in range(count)),
    )
