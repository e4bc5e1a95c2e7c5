"""Checks shared by the weighted truncated tests: each column's scale, its sum of absolute terms.

``scales`` writes the terms out densely; the moments' ``|k - q|`` is taken a bandwidth longer: the
cells compute ``k - q`` as ``h (b - s)`` (offsets from the cells' centres, each exact to an ulp of
``h``), so a term of a key on top of its query carries an ulp of ``h``, not of ``k - q`` (that
matters where one heavy key dominates: its ``|k - q|`` alone would set the scale).
"""

from __future__ import annotations

import numpy as np


def scales(q, k, v, s, h, shift, ex, degree):
    """Each column's sum of absolute terms (weight, values, the moments of ``degree``) in units of
    ``exp(shift)`` for queries ``q``, keys ``k``, values ``v`` (n, p), sample weights ``s`` (zeros:
    no term) and left-out keys ``ex`` (or None)."""
    u = (q[:, None] - k[None, :]) / h
    with np.errstate(divide="ignore"):  # zero weights: log 0 = -inf, no term
        w = np.exp(np.log(s)[None, :] - 0.5 * u * u - shift[:, None])
    if ex is not None:
        w[np.arange(q.size), ex] = 0.0
    d = np.abs(k[None, :] - q[:, None]) + h
    av = np.abs(v)
    cols = [w.sum(1), w @ av]
    cols += [(w * d**j).sum(1) for j in range(1, 2 * degree + 1)]
    cols += [(w * d**j) @ av for j in range(1, degree + 1)]
    return cols
