"""The even pivot sweep's coefficients (:mod:`nadaraya.backends._windowed_meven`) against a plain expansion.

``A[a, j]``, the weight of ``t^j`` in ``K(t - Q) (t - Q)^a``, is made per query by Horner's rule
and a recurrence; here it is compared with the same polynomial multiplied out by NumPy, and the
rounding bound's ``Ã`` (the recurrence in ``|Q|`` and ``|c_d|``) with ``sum_d |c_d| C(d + a, j)
|Q|^(d + a - j)`` written out; the cell bound ``G`` is at least ``Ã`` for every ``|Q|`` of a cell.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from numpy.polynomial import polynomial as poly

from nadaraya.backends._windowed_meven import _coefficients, cell_bound, horner_rows
from nadaraya.kernels import get


@pytest.mark.parametrize("kernel, degree", [("biweight", 2), ("triweight", 1), ("triweight", 2)])
def test_coefficients_match_the_expansion(kernel, degree):
    c = np.asarray(get(kernel).polynomial, dtype=float)
    d = c.size - 1
    na = 2 * degree + 1
    H, Hb = horner_rows(c)
    G = cell_bound(c, degree, 2)
    for Q in (-0.25, -0.1, 0.0, 0.03, 0.2):
        A = np.zeros((na, c.size + 2 * degree))
        _coefficients(A, H, Q, d, na)
        Ab = np.zeros_like(A)
        _coefficients(Ab, Hb, -abs(Q), d, na)
        shift = np.array([-Q, 1.0])  # t - Q
        kern = np.zeros(1)
        for k, cd in enumerate(c):
            kern = poly.polyadd(kern, cd * poly.polypow(shift, k))
        for a in range(na):
            want = poly.polymul(kern, poly.polypow(shift, a))
            got = A[a, : d + a + 1]
            np.testing.assert_allclose(got, np.pad(want, (0, d + a + 1 - want.size)), rtol=0, atol=1e-13)
            plain = [sum(abs(c[k]) * math.comb(k + a, j) * abs(Q) ** (k + a - j)
                         for k in range(c.size) if k + a >= j) for j in range(d + a + 1)]
            np.testing.assert_allclose(Ab[a, : d + a + 1], plain, rtol=1e-14, atol=0)
            assert np.all(G[a, : d + a + 1] >= Ab[a, : d + a + 1])
