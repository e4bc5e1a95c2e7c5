"""The degree-2 local system in one feature in closed form: equilibrated 3 x 3, LDL^T, and its condition.

The same rule as the general solve of :mod:`nadaraya.local.solve` (the system scaled to a unit
diagonal, singular below :data:`nadaraya.local.solve.RCOND` by its eigenvalues, then the highest
lower degree), on whole arrays of queries: the eigenvalues of the scaled system ``I + A``
(``A`` its off-diagonal part, a traceless symmetric 3 x 3) from the trigonometric roots of
``det(lambda I - A) = lambda^3 - p lambda - q``; the solve by ``L D L^T`` without pivoting
(the scaled system is positive definite wherever it is regular, so the factorisation is
backward stable). The trigonometric roots lose up to ``sqrt(eps)`` where two eigenvalues
nearly meet (a far query's system is nearly of rank one): a query whose closed-form reciprocal
condition is under :data:`MARGIN`, or whose system is not regular, is left to the general
solve, so every decision is the general one.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from nadaraya.partials import Partials

__all__ = ["parabola"]

#: queries whose closed-form reciprocal condition is under this are decided by the general
#: solve (its eigenvalues, not these: the closed form's smallest is within about 1e-7 absolute)
MARGIN = 1e-5


def parabola(
    parts: Partials, h: float, rcond: float
) -> tuple[NDArray[np.bool_], NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """``(done, estimate, slope, inverse00)`` of the degree-2 fits in one feature; ``done``
    marks the queries solved here (the others are left to the general solve).

    Examples
    --------
    >>> import numpy as np
    >>> from nadaraya.backends import reference
    >>> from nadaraya.kernels import get
    >>> x = np.linspace(0.0, 1.0, 21)[:, None]
    >>> parts = reference.partials(np.array([[0.5]]), x, 1 + x + x**2, kernel=get("gaussian"),
    ...                            bandwidth=np.array([0.2]), moments=2)
    >>> done, est, slope, inv00 = parabola(parts, 0.2, 1e-10)
    >>> bool(done[0]), round(float(est[0, 0]), 12), round(float(slope[0, 0]), 12)
    (True, 1.75, 2.0)
    """
    m, p = parts.value.shape
    f64 = np.float64
    ok = parts.weight > 0
    s0 = np.where(ok, parts.weight, 1.0).astype(f64)
    z = [parts.moments[j].reshape(m, -1)[:, 0].astype(f64) / s0 / h ** (j + 1) for j in range(4)]
    m1, m2, m3, m4 = z
    r0 = parts.value.astype(f64) / s0[:, None]
    r1 = parts.moments[4][:, 0, :].astype(f64) / s0[:, None] / h
    r2 = parts.moments[5][:, 0, 0, :].astype(f64) / s0[:, None] / h**2
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        s1, s2 = 1.0 / np.sqrt(m2), 1.0 / np.sqrt(m4)
        a, b, c = m1 * s1, m2 * s2, m3 * s1 * s2
        pp = a * a + b * b + c * c
        q = a * b * c  # det(A) / 2
        root = np.sqrt(pp / 3.0)
        cos3 = np.clip(q / np.where(root > 0, root**3, 1.0), -1.0, 1.0)
        phi = np.arccos(cos3) / 3.0
        top = 1.0 + 2.0 * root * np.cos(phi)
        low = 1.0 + 2.0 * root * np.cos(phi + 2.0 * np.pi / 3.0)
        est_rcond = low / top
        # L D L^T of [[1, a, b], [a, 1, c], [b, c, 1]]
        d1 = 1.0 - a * a
        l21 = (c - a * b) / d1
        d2 = 1.0 - b * b - l21 * l21 * d1
    done = (ok & (m2 > 0) & (m4 > 0) & np.isfinite(m2) & np.isfinite(m4) & np.isfinite(est_rcond)
            & (est_rcond >= max(MARGIN, rcond)) & (d1 > 0) & (d2 > 0))
    idx = np.nonzero(done)[0]
    a, b, l21, d1, d2 = (v[idx] for v in (a, b, l21, d1, d2))
    sc = np.stack([np.ones(idx.size), s1[idx], s2[idx]])  # the scaling D^-1/2, per row
    rhs = np.concatenate([np.stack([r0[idx], r1[idx], r2[idx]]) * sc[:, :, None],
                          np.stack([np.ones(idx.size), np.zeros(idx.size), np.zeros(idx.size)])[:, :, None]],
                         axis=2)  # (3, k, p + 1): the values, and e_0 for the inverse's corner
    y0 = rhs[0]
    y1 = rhs[1] - a[:, None] * y0
    y2 = rhs[2] - b[:, None] * y0 - l21[:, None] * y1
    x2 = y2 / d2[:, None]
    x1 = y1 / d1[:, None] - l21[:, None] * x2
    x0 = y0 - a[:, None] * x1 - b[:, None] * x2
    estimate = np.full((m, p), np.nan)
    slope = np.full((m, p), np.nan)
    inv00 = np.full(m, np.nan)
    estimate[idx] = x0[:, :p]
    slope[idx] = x1[:, :p] * sc[1][:, None] / h
    inv00[idx] = x0[:, p]
    return done, estimate, slope, inv00
