"""The Laplacian's fast sum updating carries local fits' moments: degree 1 and 2, leave-one-out and
sample weights against a plainly written weighted least squares on every query."""

from __future__ import annotations

import numpy as np
import pytest

import nadaraya


def plain_wls(xq, xk, y, h, degree, sw=None, loo=False):
    out = np.empty(xq.size)
    for i, q in enumerate(xq):
        w = np.exp(-np.abs(xk - q) / h) * (1.0 if sw is None else sw)
        if loo:
            w[i] = 0.0
        design = np.vander(xk - q, degree + 1, increasing=True)
        root = np.sqrt(w)
        out[i] = np.linalg.lstsq(design * root[:, None], y * root, rcond=None)[0][0]
    return out


@pytest.mark.parametrize("degree", [1, 2])
@pytest.mark.parametrize("loo", [False, True])
@pytest.mark.parametrize("weighted", [False, True])
def test_laplace_local_fits_match_plain_wls(degree, loo, weighted):
    rng = np.random.default_rng(degree + 2 * loo + 4 * weighted)
    x = rng.uniform(0.0, 1.0, 800)
    y = np.sin(6 * x) + rng.normal(0.0, 0.3, x.size)
    sw = rng.uniform(0.5, 2.0, x.size) if weighted else None
    kw = {"kernel": "laplacian", "bandwidth": 0.05, "degree": degree, "sample_weight": sw,
          "backend": "laplace"}
    got = nadaraya.loo_pool(x, y, **kw) if loo else nadaraya.pool(x, x, y, **kw)
    np.testing.assert_allclose(got, plain_wls(x, x, y, 0.05, degree, sw, loo), rtol=0, atol=1e-9)


def test_laplace_refuses_degree_three():
    x = np.linspace(0.0, 1.0, 50)
    with pytest.raises(ValueError, match=r"moments|degree"):
        nadaraya.pool(x, x, x, kernel="laplacian", bandwidth=0.1, degree=3, backend="laplace")
