"""The kernel registry: constants against numerical integration, lookup, shapes."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.integrate import quad

import nadaraya
from nadaraya import kernels
from nadaraya.kernels import REGISTRY

FINITE = [k for k in REGISTRY.values() if k.name != "constant"]


def test_registry_has_the_kernels_of_the_design():
    expected = {"gaussian", "epanechnikov", "boxcar", "triangular", "biweight", "triweight", "tricube",
                "cosine", "constant", "laplacian", "logistic", "parzen"}
    assert set(kernels.names()) == expected


@pytest.mark.parametrize("k", FINITE, ids=lambda k: k.name)
def test_constants_match_numerical_integrals(k):
    lim = 1.0 if k.compact else np.inf
    points = [-0.5, 0.0, 0.5] if k.compact else None
    integral = quad(lambda u: float(k(u)), -lim, lim, points=points, limit=200)[0]
    second = quad(lambda u: u * u * float(k(u)), -lim, lim, points=points, limit=200)[0]
    rough = quad(lambda u: float(k(u)) ** 2, -lim, lim, points=points, limit=200)[0]
    assert integral == pytest.approx(k.integral, rel=1e-9)
    assert second == pytest.approx(k.second_moment, rel=1e-9)
    assert rough == pytest.approx(k.roughness, rel=1e-9)


@pytest.mark.parametrize("k", list(REGISTRY.values()), ids=lambda k: k.name)
def test_profile_shape(k):
    u = np.linspace(-3, 3, 601)
    w = k(u)
    assert (w >= 0).all()
    np.testing.assert_allclose(w, k(-u), rtol=1e-15)  # symmetric
    assert k(0.0) == w.max()
    if k.compact:
        assert k.support == 1.0
        assert (w[np.abs(u) > 1] == 0).all()
        assert (w[np.abs(u) < 1] > 0).all()
    else:
        assert math.isinf(k.support)
    if k.log_profile is not None:
        # exp(log-profile) is the profile up to a constant factor
        ratio = np.exp(k.log_profile(u)) / w
        np.testing.assert_allclose(ratio, ratio[0], rtol=1e-12)


@pytest.mark.parametrize("k", [k for k in FINITE if k.polynomial], ids=lambda k: k.name)
def test_polynomial_coefficients_reproduce_the_profile(k):
    u = np.linspace(-1, 1, 201)
    a = np.abs(u)
    poly = sum(c * a**r for r, c in enumerate(k.polynomial))
    np.testing.assert_allclose(poly, k(u), atol=1e-14)


def test_get_accepts_aliases_and_case():
    assert kernels.get("Uniform").name == "boxcar"
    assert kernels.get("tophat").name == "boxcar"
    assert kernels.get("quartic").name == "biweight"
    assert kernels.get(REGISTRY["cosine"]) is REGISTRY["cosine"]


@pytest.mark.parametrize("bad", ["epanechikov", "", "gauss", 3, None])
def test_unknown_kernel_lists_valid_names(bad):
    with pytest.raises(ValueError, match=r"valid names are: .*gaussian.*triangular"):
        kernels.get(bad)


def test_docstring_says_textbook_epanechikov_is_triangular():
    doc = kernels.__doc__
    assert "epanechikov" in doc and "triangular" in doc
    # and the library's epanechnikov is not the textbook's function
    u = np.array([0.5])
    assert kernels.get("epanechnikov")(u)[0] == pytest.approx(0.75 * (1 - 0.25))
    assert kernels.get("triangular")(u)[0] == pytest.approx(max(1 - 0.5, 0))


def test_normalising_constants_do_not_change_predictions():
    rng = np.random.default_rng(0)
    x, y = rng.uniform(0, 1, 50), rng.normal(size=50)
    k = kernels.get("epanechnikov")
    scaled = kernels.Kernel("scaled", lambda u, xp=np: 7.0 * k.profile(u, xp), 1.0, None, 7.0, 1.4, 4.2)
    np.testing.assert_allclose(nadaraya.pool(x, x, y, kernel=k, bandwidth=0.3),
                               nadaraya.pool(x, x, y, kernel=scaled, bandwidth=0.3), rtol=1e-13)


def test_torch_namespace_gives_the_same_numbers():
    torch = pytest.importorskip("torch")
    u = np.linspace(-2, 2, 81)
    for k in REGISTRY.values():
        np.testing.assert_allclose(k.profile(torch.tensor(u), xp=torch).numpy(), k(u), rtol=1e-14)
