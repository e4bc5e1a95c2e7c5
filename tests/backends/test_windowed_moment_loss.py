"""The windowed moments' loss test at its edge: queries planted just inside the bound it enforces.

Each 1-D moment route serves a moment only where a lower bound of its natural size ``N = sum |w|
|u|^j [|v|]`` is at least ``_LOSS`` (``2^-12``) of a bound ``E`` on the magnitudes its
arithmetic rounds (the table rows it differences, the expansion's terms): a rounding of ``k``
ulps of ``E`` is then at most ``k 2^-53 / _LOSS = k 2^-41`` of ``N``. Here a crowd of keys in the
cell before the query's window swells ``E``, and a bunch of keys spread by ``sigma`` about the
query sets ``N`` of its higher moments; ``sigma`` is bisected to where the route stops serving
the query, and the query served just above that edge is compared with the reference on every
sum to the tests' ``1e-12`` of its natural size (measured there: at most about ``1.2e-13``,
the sweep's loo), the one just below it (left to the pair sums) too.
"""

from __future__ import annotations

import numpy as np
import pytest

from _windowed_checks import compare
from nadaraya.backends._windowed_msplit import split_moments
from nadaraya.backends._windowed_msweep import prefix_moments
from nadaraya.kernels import get

#: (kernel, degree, route): the even sweep of :mod:`._windowed_msweep` (epanechnikov, boxcar),
#: the even pivot sweep and the split one of :mod:`._windowed_msplit`
CASES = [("epanechnikov", 1, prefix_moments), ("boxcar", 1, prefix_moments),
         ("biweight", 2, split_moments), ("triweight", 1, split_moments), ("tricube", 1, split_moments)]


def _case(sigma, loo, origin):
    """A crowd of 300 keys outside the window of the query at ``origin + 3.7`` (h = 1), in the
    cell before it, and 40 keys within ``sigma`` of the query; a far key ends the data."""
    rng = np.random.default_rng(5)
    crowd = origin + rng.uniform(2.0, 2.69, 300)
    bunch = origin + 3.7 + sigma * rng.uniform(-1.0, 1.0, 40)
    k = np.sort(np.concatenate([crowd, bunch, [origin + 10.0]]))[:, None]
    v = 3.0 * rng.normal(size=(k.shape[0], 1))
    q = np.array([[origin + 3.7]])
    return q, k, v, (np.array([305]) if loo else None)


def _served(route, kernel, degree, sigma, loo, origin):
    q, k, v, ex = _case(sigma, loo, origin)
    none = np.empty(0, dtype=np.int64)
    _, flag = route(np.ascontiguousarray(q[:, 0]), np.ascontiguousarray(k[:, 0]), 1.0, v, np.empty(0),
                    none if ex is None else ex, get(kernel), 1.0, degree)
    return not flag[0]


@pytest.mark.parametrize(("kernel", "degree", "route"), CASES)
@pytest.mark.parametrize("loo", [False, True])
@pytest.mark.parametrize("origin", [0.0, 1e6])
def test_served_at_the_edge_of_the_loss_test(kernel, degree, route, loo, origin):
    lo, hi = 1e-9, 0.9
    assert _served(route, kernel, degree, hi, loo, origin)
    assert not _served(route, kernel, degree, lo, loo, origin)
    for _ in range(24):  # to within about 2% of the edge
        mid = float(np.sqrt(lo * hi))
        if _served(route, kernel, degree, mid, loo, origin):
            hi = mid
        else:
            lo = mid
    for sigma in (hi, lo):
        q, k, v, ex = _case(sigma, loo, origin)
        compare(q, k, v, kernel, 1.0, degree, exclude=ex)
