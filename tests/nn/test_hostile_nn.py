"""Hostile input for nadaraya.nn (issue 12, item 7; issue 18, the layers' empty windows).

Second derivatives through every path against torch's gradgradcheck and finite differences,
zero queries and zero keys, far queries whose log weights overflow, bad training data, and the
empty-window policy against plain formulas written here.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import nadaraya  # noqa: E402
from nadaraya.nn import (  # noqa: E402
    AdditiveAttentionPooling,
    AttentionPoolingRegressor,
    AveragePooling,
    DotProductAttentionPooling,
    KernelPooling,
    fit,
)

F64 = torch.float64
KERNELS = nadaraya.kernels.names()
COMPACT = [k for k in KERNELS if nadaraya.kernels.get(k).compact]


def t(a, dtype=F64):
    return torch.as_tensor(np.asarray(a), dtype=dtype)


def every_module():
    """Every module kind and method, float64."""
    torch.manual_seed(0)
    return {
        "gaussian-auto": KernelPooling("gaussian", 1.5, dtype=F64),
        "gaussian-sdpa": KernelPooling("gaussian", 1.5, method="sdpa", dtype=F64),
        "gaussian-chunked": KernelPooling("gaussian", 1.5, method="chunked", dtype=F64),
        "epanechnikov": KernelPooling("epanechnikov", [4.0, 3.0], dtype=F64),
        "laplacian": KernelPooling("laplacian", 1.0, dtype=F64),
        "average": AveragePooling().double(),
        "additive": AdditiveAttentionPooling(2, 5).double(),
        "dot-sdpa": DotProductAttentionPooling(2, 3).double(),
        "dot-chunked": DotProductAttentionPooling(2, 3, method="chunked").double(),
    }


MODULES = list(every_module())


# ------------------------------------------------------------------- second derivatives


def small_inside(seed=1):
    """Queries, keys and values with every key inside every query's window (bandwidths
    [2.5, 3.0] on [0, 1]^2) and no query on a key (kinks of |u| at 0)."""
    rng = np.random.default_rng(seed)
    q, k, v = rng.uniform(0, 1, (3, 2)), rng.uniform(0, 1, (5, 2)), rng.normal(size=(5, 2))
    return [t(a).requires_grad_() for a in (q, k, v)]


@pytest.mark.parametrize("method", ["auto", "chunked"])
@pytest.mark.parametrize("kernel", KERNELS)
def test_gradgradcheck_every_kernel_and_path(kernel, method):
    layer = KernelPooling(kernel, [2.5, 3.0], method=method, dtype=F64)
    q, k, v = small_inside()

    def f(a, b, c, log_h):
        return layer(a, b, c)

    assert torch.autograd.gradgradcheck(f, (q, k, v, layer.log_bandwidth), eps=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", ["additive", "dot-sdpa", "dot-chunked", "gaussian-auto", "epanechnikov"])
@pytest.mark.parametrize("how", ["mask", "exclude"])
def test_gradgradcheck_attention_modules_with_masks(name, how):
    layer = every_module()[name]
    q, k, v = small_inside(2)
    mask = torch.tensor(np.random.default_rng(3).random((3, 5)) > 0.4)
    mask[:, 1] = True
    exclude = torch.tensor([0, -1, 4])
    params = [p for p in layer.parameters() if p.requires_grad]

    def f(a, b, c, *_):
        return layer(a, b, c, mask) if how == "mask" else layer(a, b, c, exclude=exclude)

    assert torch.autograd.gradgradcheck(f, (q, k, v, *params), eps=1e-6, atol=1e-6)


@pytest.mark.parametrize("method", ["auto", "chunked"])
@pytest.mark.parametrize("kernel", ["epanechnikov", "gaussian", "tricube"])
def test_second_derivative_in_log_h_equals_finite_differences(kernel, method):
    """The issue's case: d2f/d(log h)^2 of an Epanechnikov layer was 0.498 by autograd and
    1.727 by finite differences; here both come from the layer, the second by central
    differences of its (first-order, exact) gradient."""
    rng = np.random.default_rng(0)
    x = t(rng.uniform(0, 1, (8, 1)))
    y = torch.sin(3 * x[:, 0])
    layer = KernelPooling(kernel, 0.7, method=method, dtype=F64)
    lh = layer.log_bandwidth

    def grad_at(shift):
        with torch.no_grad():
            lh.add_(shift)
        g = torch.autograd.grad(layer(x[:4] + 0.05, x, y).pow(2).sum(), lh)[0].item()
        with torch.no_grad():
            lh.sub_(shift)
        return g

    (g,) = torch.autograd.grad(layer(x[:4] + 0.05, x, y).pow(2).sum(), lh, create_graph=True)
    (g2,) = torch.autograd.grad(g, lh)
    eps = 1e-5
    fd = (grad_at(eps) - grad_at(-eps)) / (2 * eps)
    assert g.item() == pytest.approx(grad_at(0.0), rel=1e-12)
    assert g2.item() == pytest.approx(fd, rel=1e-5, abs=1e-8)


def test_first_order_backward_never_recomputes_with_autograd(monkeypatch):
    """The ordinary backward keeps its block-by-block recomputation (memory one block) and the
    fused kernels' own backward: the double-backward path is taken only for create_graph."""
    from nadaraya.nn import _chunked

    def boom(*args, **kwargs):
        raise AssertionError("the double-backward recomputation ran for a first-order backward")

    monkeypatch.setattr(_chunked, "_recomputed_grads", boom)
    q, k, v = small_inside()
    for layer in every_module().values():
        layer(q, k, v).sum().backward()
    out = KernelPooling("epanechnikov", 3.0, dtype=F64)(q, k, v).sum()
    with pytest.raises(AssertionError, match="double-backward"):  # the spy does watch
        torch.autograd.grad(out, q, create_graph=True)


# -------------------------------------------------------------- zero queries, zero keys


@pytest.mark.parametrize("name", MODULES)
@pytest.mark.parametrize("m,n", [(0, 4), (3, 0), (0, 0)])
@pytest.mark.parametrize("batch", [(), (2,)], ids=["plain", "batched"])
@pytest.mark.parametrize("p", [None, 3], ids=["values-1d", "values-2d"])
def test_zero_queries_or_keys_give_empty_or_nan_outputs(name, m, n, batch, p):
    layer = every_module()[name]
    q = torch.zeros(*batch, m, 2, dtype=F64, requires_grad=True)
    k = torch.zeros(*batch, n, 2, dtype=F64, requires_grad=True)
    v = torch.zeros(*batch, n, *(() if p is None else (p,)), dtype=F64, requires_grad=True)
    out, w = layer(q, k, v, return_weights=True)
    assert out.shape == (*batch, m, *(() if p is None else (p,)))
    assert w.shape == (*batch, m, n)
    assert torch.isnan(out).all()  # no key: every query's window is empty (NaN); no query: vacuous
    torch.nan_to_num(out).sum().backward()
    for g in (q.grad, k.grad, v.grad, *(p.grad for p in layer.parameters())):
        assert g is None or (torch.isfinite(g).all() and (g == 0).all())


def test_zero_keys_with_a_mask_and_exclude():
    layer = KernelPooling("epanechnikov", 1.0, dtype=F64)
    out = layer(torch.zeros(3, 1, dtype=F64), torch.zeros(0, 1, dtype=F64), torch.zeros(0, dtype=F64),
                torch.zeros(3, 0, dtype=torch.bool), exclude=torch.tensor([-1, 0, 2]))
    assert out.shape == (3,) and torch.isnan(out).all()


# ----------------------------------------------------------- far queries: the limit, not NaN


def exact_reference(q, k, v, h, kernel):
    """The pooled values with the log weights' differences between keys computed exactly (in
    rational arithmetic), so that a far query gets its true limit, the nearest key's value
    (ties share equally), where float64's ``q - k`` or ``u^2`` cannot tell the keys apart."""
    power = 2 if kernel == "gaussian" else 1
    out = []
    for qi in np.atleast_2d(q):
        us = [[(Fraction(float(a)) - Fraction(float(b))) / Fraction(float(hh))
               for a, b, hh in zip(qi, kj, np.broadcast_to(h, qi.shape))] for kj in np.atleast_2d(k)]
        dist = [sum(abs(u) ** power for u in row) for row in us]
        best = min(dist)
        logw = []
        for row, d in zip(us, dist):
            try:
                gap = float(d - best)
            except OverflowError:
                gap = math.inf
            extra = 0.0
            if kernel == "logistic":  # log K = -|u| - 2 log(1 + e^-|u|)
                extra = sum(-2 * math.log1p(math.exp(-float(min(abs(u), 800)))) for u in row)
            logw.append(-gap / power + extra)
        w = np.exp(np.array(logw) - max(logw))
        out.append(w @ np.asarray(v, dtype=np.float64) / w.sum())
    return np.array(out)


FAR_CASES = {
    # name: (queries, keys, values, bandwidth, dtype)
    "query-1e200": ([[1e200]], [[0.0], [1.0]], [1.0, 2.0], 1.0, F64),
    "bandwidth-1e-160": ([[0.4]], [[0.0], [1.0]], [1.0, 2.0], 1e-160, F64),
    "q-over-h-overflows": ([[1e200]], [[0.0], [1.0]], [1.0, 2.0], 1e-160, F64),
    "negative-side": ([[-1e300]], [[3.0], [-2.0], [7.0]], [1.0, 2.0, 3.0], 1.0, F64),
    "float32-query-1e20": ([[1e20]], [[0.0], [1.0]], [1.0, 2.0], 1.0, torch.float32),
    "float32-query-3e19": ([[-3e19]], [[0.0], [1.0]], [1.0, 2.0], 1.0, torch.float32),
    "float32-bandwidth-1e-20": ([[0.4]], [[0.0], [1.0]], [1.0, 2.0], 1e-20, torch.float32),
    "per-feature": ([[1e200, 0.0]], [[0.0, 0.0], [1.0, 5.0]], [1.0, 2.0], [1.0, 1e-100], F64),
    "per-feature-2": ([[1e200, 0.0]], [[0.0, 0.0], [1.0, 1e-101]], [1.0, 2.0], [1.0, 1e-100], F64),
    "float32-q-over-h-overflows": ([[1e20]], [[0.0], [1.0]], [1.0, 2.0], 1e-20, torch.float32),
    "mixed-rows": ([[0.3], [1e200], [0.9]], [[0.0], [1.0], [0.5]], [1.0, 2.0, 4.0], 0.2, F64),
}
FAR_LAYERS = {
    "gaussian-auto": ("gaussian", "auto"),
    "gaussian-sdpa": ("gaussian", "sdpa"),
    "gaussian-chunked": ("gaussian", "chunked"),
    "laplacian": ("laplacian", "auto"),
    "logistic": ("logistic", "auto"),
}


def far_reference(q, k, v, h, kernel, dtype=np.float64):
    """The Gaussian: the exact reference (its weights are one-hot far from the keys, and the
    layer must find the nearest key even where ``u^2`` overflows). The Laplacian and
    logistic kernels never overflow for finite ``u``; their far field is not one-hot (the
    ratio of two keys' weights tends to ``exp(-|k1 - k2| / h)``), and float64's ``q - k``
    is what it is: the plain log-domain formula in the data's dtype where it is finite, and
    the exact limit where ``u`` itself is infinite."""
    exact = exact_reference(q, k, v, h, kernel)
    if kernel == "gaussian":
        return exact
    with np.errstate(all="ignore"):
        q, k = q.astype(dtype), k.astype(dtype)
        u = (q[:, None, :] - k[None, :, :]) / np.asarray(h, dtype=dtype)
        logw = nadaraya.kernels.get(kernel).log_profile(u).sum(-1).astype(np.float64)
        w = np.exp(logw - logw.max(1, keepdims=True))
        plain = (w @ np.asarray(v, dtype=np.float64)) / w.sum(1)
    return np.where(np.isfinite(plain), plain, exact)


#: the Laplacian and logistic log-profiles overflow only where ``q / h`` itself does
FAR_PARAMS = [(c, n) for c in FAR_CASES for n in FAR_LAYERS if n.startswith("gaussian") or "q-over-h" in c]


@pytest.mark.parametrize("case,layer_name", FAR_PARAMS)
def test_far_queries_get_the_nearest_keys_value(case, layer_name):
    q, k, v, h, dtype = FAR_CASES[case]
    kernel, method = FAR_LAYERS[layer_name]
    layer = KernelPooling(kernel, h, method=method, dtype=dtype)
    Q, K, V = t(q, dtype), t(k, dtype), t(v, dtype).requires_grad_()
    out, w = layer(Q, K, V, return_weights=True)
    ref = far_reference(Q.double().numpy(), K.double().numpy(), v, h, kernel, Q.numpy().dtype)
    np.testing.assert_allclose(out.detach().double().numpy(), ref, rtol=1e-5 if dtype != F64 else 1e-12)
    assert torch.isfinite(w).all()
    np.testing.assert_allclose(w.sum(-1).detach().double().numpy(), 1.0, rtol=1e-6)
    out.sum().backward()
    assert torch.isfinite(V.grad).all() and torch.isfinite(layer.log_bandwidth.grad).all()


def test_far_query_limit_in_a_batch_with_a_mask_and_exclude():
    """The nearest key is sought only among the keys a query may attend to."""
    layer = KernelPooling("gaussian", 1.0, method="chunked", dtype=F64)
    k = t([[0.0], [1.0], [2.0]])
    v = t([1.0, 2.0, 3.0])
    q = t([[[1e200], [1e200]], [[-1e200], [5.0]]])  # (2, 2, 1)
    mask = torch.tensor([[[True, True, False], [True, True, True]],
                         [[False, True, True], [True, True, True]]])
    out = layer(q, k, v, mask, exclude=torch.tensor([[-1, 2], [-1, -1]]))
    assert out[0, 0].item() == 2.0  # key 2 masked: key 1 is the nearest left
    assert out[0, 1].item() == 2.0  # key 2 excluded
    assert out[1, 0].item() == 2.0  # key 0 masked
    w = np.exp(-0.5 * (5.0 - np.array([0.0, 1.0, 2.0])) ** 2)
    assert out[1, 1].item() == pytest.approx(float(w @ [1.0, 2.0, 3.0] / w.sum()), rel=1e-12)


def test_far_query_ties_share_equally():
    layer = KernelPooling("gaussian", 1e-160, method="chunked", dtype=F64)
    out = layer(t([[0.0]]), t([[-1.0], [1.0], [3.0]]), t([2.0, 4.0, 100.0]))
    assert out.item() == 3.0


def test_far_query_with_nan_stays_nan():
    """Only an overflow takes the limit: a NaN query is not given a made-up value."""
    layer = KernelPooling("gaussian", 1e-160, method="chunked", dtype=F64)
    out = layer(t([[math.nan], [0.4]]), t([[0.0], [1.0]]), t([1.0, 2.0]))
    assert math.isnan(out[0].item()) and out[1].item() == 1.0


# ------------------------------------------------------------------- bad training data


def bad_fit_inputs():
    """name: (X, y, what the ValueError must say)."""
    n = np.nan
    return {
        "X-nan": ([0.0, 1.0, n], [1, 2, 3], r"X contains NaN or inf \(1 entries; the first at row 2: nan\)"),
        "X-inf-2d": (np.array([[0.0, 1.0], [1.0, np.inf]]), [1, 2], r"X contains NaN .*row 1, column 1: inf"),
        "y-inf": ([0.0, 1.0], [1.0, -np.inf], r"y contains NaN or inf .*row 1: -inf"),
        "X-tensor-nan": (torch.tensor([[0.0], [n], [n]]), [1, 2, 3], r"X contains NaN .*2 entries.*row 1"),
        "y-tensor-nan": ([0.0, 1.0], torch.tensor([[n], [1.0]]), r"y contains NaN .*row 0, column 0"),
        "X-overflows-float32": ([1e39, 0.0], [1.0, 2.0], r"X contains values too large for float32"),
        "X-complex": (np.array([1 + 1j, 2.0]), [1.0, 2.0], r"X must be real numbers"),
        "y-complex-tensor": ([0.0, 1.0], torch.tensor([1 + 0j, 2.0]), r"y must be real numbers.*complex"),
        "X-empty": ([], [], r"X is empty"),
        "X-no-features": (np.zeros((3, 0)), [1.0, 2.0, 3.0], r"X has no features"),
        "y-no-columns": ([0.0, 1.0], np.zeros((2, 0)), r"y has no columns"),
        "one-point-loo": ([0.0], [1.0], r"at least 2 rows; got 1"),
        "X-text": (["a", "b"], [1.0, 2.0], r"X must be numeric"),
    }


@pytest.mark.parametrize("case", list(bad_fit_inputs()))
def test_fit_refuses_bad_data_naming_it(case):
    X, y, match = bad_fit_inputs()[case]
    layer = KernelPooling("gaussian", 1.0)  # float32 parameters
    before = layer.log_bandwidth.detach().clone()
    with pytest.raises(ValueError, match=match):
        fit(layer, X, y, epochs=2, lr=0.5)
    assert torch.equal(layer.log_bandwidth.detach(), before)  # nothing trained


@pytest.mark.parametrize(
    "X,y,match",
    [
        ([[0.0], [1.0], [np.nan]], [1.0, 2.0, 3.0], r"X contains NaN or inf .*row 2, column 0: nan"),
        ([[0.0], [1.0]], [1.0, np.inf], r"y contains NaN or inf .*row 1: inf"),
        (np.array([[1 + 1j], [2.0]]), [1.0, 2.0], r"X must be real numbers.*Complex data not supported"),
        ([[0.0], [1.0]], np.array([1 + 1j, 2.0]), r"y must be real numbers.*Complex data not supported"),
    ],
)
def test_regressor_fit_refuses_bad_data_naming_it(X, y, match):
    with pytest.raises(ValueError, match=match):
        AttentionPoolingRegressor(epochs=1).fit(X, y)


def test_regressor_predict_refuses_nan_naming_it():
    model = AttentionPoolingRegressor(epochs=1).fit([[0.0], [1.0]], [1.0, 2.0])
    with pytest.raises(ValueError, match=r"X contains NaN or inf .*row 1, column 0"):
        model.predict([[0.5], [np.nan]])


# --------------------------------------------------------- empty windows: the NaN policy


PLAIN_PROFILES = {  # written out here, not taken from the registry
    "epanechnikov": lambda u: np.where(np.abs(u) <= 1, 0.75 * (1 - u * u), 0.0),
    "boxcar": lambda u: np.where(np.abs(u) <= 1, 0.5, 0.0),
    "triangular": lambda u: np.where(np.abs(u) <= 1, 1 - np.abs(u), 0.0),
    "biweight": lambda u: np.where(np.abs(u) <= 1, (1 - u * u) ** 2, 0.0),
    "triweight": lambda u: np.where(np.abs(u) <= 1, (1 - u * u) ** 3, 0.0),
    "tricube": lambda u: np.where(np.abs(u) <= 1, (1 - np.abs(u) ** 3) ** 3, 0.0),
    "cosine": lambda u: np.where(np.abs(u) <= 1, np.cos(np.pi * u / 2), 0.0),
    "parzen": lambda u: np.where(
        np.abs(u) <= 0.5, 4 / 3 - 8 * u**2 + 8 * np.abs(u) ** 3,
        np.where(np.abs(u) <= 1, 8 / 3 * (1 - np.abs(u)) ** 3, 0.0)),
}


def plain_nan_policy(q, k, v, kernel, h, allowed=None):
    """sum K v / sum K per query; NaN where the sum of weights is zero (an empty window)."""
    w = PLAIN_PROFILES[kernel]((q[:, None, :] - k[None, :, :]) / np.asarray(h)).prod(-1)
    if allowed is not None:
        w = w * allowed
    total = w.sum(1)
    out = np.full((len(q), v.shape[1]), np.nan)
    some = total > 0
    out[some] = (w[some] @ v) / total[some, None]
    weights = np.full(w.shape, np.nan)
    weights[some] = w[some] / total[some, None]
    return out, weights


@pytest.mark.parametrize("kernel", sorted(PLAIN_PROFILES))
def test_compact_kernel_empty_windows_against_the_plain_formula(kernel):
    assert set(PLAIN_PROFILES) == set(COMPACT)
    rng = np.random.default_rng(7)
    q, k, v = rng.uniform(0, 6, (40, 2)), rng.uniform(0, 6, (25, 2)), rng.normal(size=(25, 2))
    h = [0.6, 0.9]
    ref, ref_w = plain_nan_policy(q, k, v, kernel, h)
    empty = np.isnan(ref).any(1)
    assert 5 < empty.sum() < 35  # both kinds of rows are tested
    layer = KernelPooling(kernel, h, dtype=F64)
    Q, K, V = (t(a).requires_grad_() for a in (q, k, v))
    out, w = layer(Q, K, V, return_weights=True)
    np.testing.assert_allclose(out.detach().numpy(), ref, rtol=1e-12, atol=1e-12)  # NaN where NaN
    np.testing.assert_allclose(w.detach().numpy(), ref_w, rtol=1e-12, atol=1e-12)
    torch.nan_to_num(out).sum().backward()
    assert (Q.grad[torch.as_tensor(empty)] == 0).all() and torch.isfinite(Q.grad).all()
    assert torch.isfinite(K.grad).all() and torch.isfinite(layer.log_bandwidth.grad).all()
    vg = np.zeros((25, 2)) + np.nansum(ref_w, 0)[:, None]  # d sum(out) / dv = column sums of the weights
    np.testing.assert_allclose(V.grad.numpy(), vg, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", MODULES)
def test_masked_out_rows_are_nan_and_the_rest_untouched(name):
    layer = every_module()[name]
    rng = np.random.default_rng(8)
    q, k, v = rng.uniform(0, 1, (6, 2)), rng.uniform(0, 1, (7, 2)), rng.normal(size=(7, 2))
    mask = torch.tensor(rng.random((6, 7)) > 0.4)
    mask[:, 0] = True
    mask[[1, 4]] = False  # two queries may attend to nothing
    Q = t(q).requires_grad_()
    out, w = layer(Q, t(k), t(v), mask, return_weights=True)
    assert torch.isnan(out[[1, 4]]).all() and torch.isnan(w[[1, 4]]).all()
    keep = [0, 2, 3, 5]
    assert torch.isfinite(out[keep]).all()
    # each other row equals the layer on its allowed keys alone, written as a weighted sum
    wk = w[keep].detach().numpy()
    np.testing.assert_allclose(wk[~mask[keep].numpy()], 0.0, atol=0)
    np.testing.assert_allclose(out[keep].detach().numpy(), wk @ v, rtol=1e-10, atol=1e-12)
    torch.nan_to_num(out).sum().backward()
    assert (Q.grad[[1, 4]] == 0).all() and torch.isfinite(Q.grad).all()


@pytest.mark.parametrize("name", MODULES)
def test_leave_one_out_of_a_single_key_is_nan(name):
    layer = every_module()[name]
    out = layer(t([[0.2, 0.3], [0.5, 0.5]]), t([[0.1, 0.1]]), t([2.0]), exclude=torch.tensor([0, -1]))
    assert math.isnan(out[0].item())
    assert out[1].item() == pytest.approx(2.0, rel=1e-12)  # the only key: its value


def test_regressor_predict_is_nan_where_no_training_point_is_in_the_window():
    X = np.array([[0.0], [1.0], [2.0]])
    y = np.array([1.0, 3.0, 8.0])
    model = AttentionPoolingRegressor(kernel="epanechnikov", bandwidth=1.5, epochs=0).fit(X, y)
    pred = model.predict([[0.5], [10.0]])
    u = (0.5 - X[:, 0]) / 1.5
    w = np.where(np.abs(u) <= 1, 1 - u * u, 0.0)
    assert pred[0] == pytest.approx(float(w @ y / w.sum()), rel=1e-12)
    assert math.isnan(pred[1])
