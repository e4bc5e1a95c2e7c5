"""float32 local fits: every backend's answer is float64's, rounded once; the degree rule is float64's.

A local fit's degree is decided per query by the reciprocal condition of its scaled system
(:data:`nadaraya.local.solve.RCOND`), and a far query, or one whose weight sits on a cluster of
keys, has a nearly singular system. Moments rounded to float32 (relative ``6e-8``) move that
condition by about ``1e-7``: the decision and the fit would be rounding noise (a degree-1 line
extrapolated a million units). So float32 local fits sum and solve in float64, and round the
prediction once. Checked for every backend that serves the call, degree 1 and 2, on queries far
outside the data and on queries beside clusters of keys of widths ``1e-2 h`` to ``1e-6 h``
(reciprocal conditions from about ``1e-5`` down past ``RCOND``): the float32 prediction equals
the float64 call's on the same values rounded to float32, bit for bit, on every query, and each
query's degree is the float64 rule's.

Moments that arrive in float32 all the same (the torch backend on an accelerator sums in the
inputs' dtype) are solved under a threshold scaled to their resolution and size
(:func:`nadaraya.local.solve.rcond_for`, 16 P eps): checked against a plainly written float64
weighted least squares, their degree is never one the float64 rule calls singular, it is float64's
wherever float64's reciprocal condition is clear of the threshold, and the estimate is within
the first-order bound of float32 rounding amplified by the system's condition; queries 2.8
bandwidths outside the data keep float64's degree. The degrees of float32 calls are read from the
solve the public call makes.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from test_local import design

import nadaraya
from _spies import solved_degrees
from nadaraya import backends
from nadaraya.backends._capabilities import why_not
from nadaraya.kernels import get
from nadaraya.local import fit as _fit
from nadaraya.local import job as job_module
from nadaraya.local.solve import RCOND, monomials, rcond_for, solve
from nadaraya.partials import Partials
from naive import PLAIN_KERNELS

F32 = np.float32
H = 0.05
#: each kernel and the backends that serve its local fits in float32 (auto too)
SERVED = {
    "gaussian": ["auto", "fused", "truncated", "taylor", "reference"],
    "epanechnikov": ["auto", "fused", "windowed"],
    "tricube": ["auto", "fused", "windowed"],
    "laplacian": ["auto", "fused", "laplace"],
    "logistic": ["auto", "logistic"],
    "constant": ["auto", "constant", "fused"],
}
CELLS = [(k, b) for k, bs in SERVED.items() for b in bs]


def _data(kernel: str, d: int = 1, seed: int = 3):
    """float32 keys in [0, 1]^d, four clusters of 12 keys beyond them (at 2, 3, 4, 5 along the
    first feature, widths 1e-2 h to 1e-6 h), and queries: across the data, half a bandwidth
    beside each cluster, and far outside (a million units for the constant kernel)."""
    rng = np.random.default_rng(seed)
    spread = rng.uniform(0.0, 1.0, size=(300, d))
    clusters = []
    for j, width in enumerate([1e-2, 1e-4, 1e-5, 1e-6]):
        c = rng.uniform(0.0, 1.0, size=(12, d)) * width * H
        c[:, 0] += 2.0 + j
        clusters.append(c)
    X = np.vstack([spread, *clusters]).astype(F32)
    y = (np.sin(6 * X.astype(np.float64)).sum(axis=1) + 0.1 * rng.normal(size=X.shape[0])).astype(F32)
    inside = rng.uniform(-0.1, 1.1, size=(24, d))
    beside = np.zeros((8, d)) + 0.5 * H
    beside[:, 0] = np.repeat(2.0 + np.arange(4), 2) + np.tile([0.5, -0.5], 4) * H
    far = np.zeros((4, d)) + 0.5
    far[:, 0] = [1.0 + 3 * H, 1.5, -1.0, 30.0] if kernel != "constant" else [3.0, 1e3, -2e4, 2e6]
    Q = np.vstack([inside, beside, far]).astype(F32)
    return Q, X, y


def _pool(Q, X, y, kernel, backend, degree):
    tol = 1e-8 if backend == "taylor" else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return nadaraya.pool(Q, X, y, kernel=kernel, bandwidth=H, degree=degree, backend=backend, tol=tol)


def _degrees(monkeypatch, Q, X, y, kernel, backend, degree):
    """Each query's degree as the public ``nadaraya.pool`` call decides it, end to end: recorded
    from the solve it makes (:func:`nadaraya.local.fit.finish_local`)."""
    with solved_degrees(monkeypatch) as seen:
        _pool(Q, X, y, kernel, backend, degree)
    assert len(seen) == 1
    return seen[0]


def _served(kernel: str, backend: str, d: int, degree: int) -> None:
    tol = 1e-8 if backend == "taylor" else None
    if backend != "auto" and why_not(backend, kernel, d=d, degree=degree, tol=tol):
        pytest.skip(f"{backend} does not serve {kernel} in d={d} at degree {degree}")


@pytest.mark.parametrize(("kernel", "backend"), CELLS)
@pytest.mark.parametrize("degree", [1, 2])
def test_float32_is_float64_rounded_once(kernel, backend, degree, monkeypatch):
    _served(kernel, backend, 1, degree)
    Q, X, y = _data(kernel)
    got = _pool(Q, X, y, kernel, backend, degree)
    want = _pool(*(a.astype(np.float64) for a in (Q, X, y)), kernel, backend, degree)
    assert got.dtype == F32
    np.testing.assert_array_equal(got, want.astype(F32))
    d32 = _degrees(monkeypatch, Q, X, y, kernel, backend, degree)
    d64 = _degrees(monkeypatch, *(a.astype(np.float64) for a in (Q, X, y)), kernel, backend, degree)
    np.testing.assert_array_equal(d32, d64)
    assert (d64 < degree).any() and (d64 == degree).any()  # the cases reach both sides of the rule


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
@pytest.mark.parametrize("backend", ["auto", "fused", "reference"])
@pytest.mark.parametrize("degree", [1, 2])
def test_float32_is_float64_rounded_once_in_two_features(kernel, backend, degree, monkeypatch):
    """Two features take the general solve (eigenvalues), not the closed forms of one."""
    Q, X, y = _data(kernel, d=2)
    got = _pool(Q, X, y, kernel, backend, degree)
    want = _pool(*(a.astype(np.float64) for a in (Q, X, y)), kernel, backend, degree)
    assert got.dtype == F32
    np.testing.assert_array_equal(got, want.astype(F32))
    wide = (a.astype(np.float64) for a in (Q, X, y))
    np.testing.assert_array_equal(_degrees(monkeypatch, Q, X, y, kernel, backend, degree),
                                  _degrees(monkeypatch, *wide, kernel, backend, degree))


@pytest.mark.parametrize("kernel", ["gaussian", "constant", "epanechnikov"])
@pytest.mark.parametrize("degree", [1, 2])
def test_loo_float32_is_float64_rounded_once(kernel, degree):
    _, X, y = _data(kernel)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = nadaraya.loo_pool(X, y, kernel=kernel, bandwidth=H, degree=degree)
        want = nadaraya.loo_pool(X.astype(np.float64), y.astype(np.float64), kernel=kernel, bandwidth=H,
                                 degree=degree)
    assert got.dtype == F32
    np.testing.assert_array_equal(got, want.astype(F32))


# --- sums that arrive in float32: the threshold scaled to their resolution -------------------------

U32 = 2.0**-24  # float32's unit roundoff
LOG_KERNELS = {"gaussian": lambda z: -(z**2) / 2, "laplacian": lambda z: -np.abs(z)}


def _plain_system(q, X, y, kernel, degree):
    """The scaled normal equations of one query written plainly in float64: ``S`` (unit
    diagonal), ``r``, and the fit's intercept by lstsq."""
    z = (X.astype(np.float64) - q.astype(np.float64)) / H
    if kernel in LOG_KERNELS:  # in the log domain, scaled by the largest weight (far queries)
        lw = LOG_KERNELS[kernel](z).sum(axis=1)
        w = np.exp(lw - lw.max())
    else:
        w = PLAIN_KERNELS[kernel](z).prod(axis=1)
    on = w > 0
    B = design(z[on], degree)
    M = (B * w[on, None]).T @ B / w[on].sum()
    R = (B * w[on, None]).T @ y[on].astype(np.float64) / w[on].sum()
    s = 1.0 / np.sqrt(np.diag(M))
    root = np.sqrt(w[on])
    est = np.linalg.lstsq(B * root[:, None], y[on] * root, rcond=None)[0][0]
    return M * s[:, None] * s[None, :], R * s, est


def _rconds(q, X, y, kernel, degree):
    """The plain float64 reciprocal condition of each degree's scaled system, 1 to ``degree``."""
    out = []
    for r in range(1, degree + 1):
        ev = np.linalg.eigvalsh(_plain_system(q, X, y, kernel, r)[0])
        out.append(ev[0] / ev[-1])
    return np.array(out)


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov", "laplacian", "constant"])
@pytest.mark.parametrize("d", [1, 2])
@pytest.mark.parametrize("degree", [1, 2])
def test_float32_sums_are_decided_above_their_noise(kernel, d, degree):
    """Exact float64 sums rounded to float32 (as an accelerator's or a Dask task's arrive): the
    degree is never one the float64 rule calls singular, it is float64's rule at
    :func:`rcond_for` float32 wherever the plain reciprocal conditions are clear of it (a factor
    of two), and the estimate is within the first-order bound of the rounding,
    ``(2 u |r| + 2 u P |beta|) / (lambda_min - 2 u P)`` (scaled system, ``u = 2^-24``), twice."""
    Q, X, y = _data(kernel, d=d)
    Q64, X64, y64 = (a.astype(np.float64) for a in (Q, X, y))
    parts = backends.compute("reference", Q64, X64, y64[:, None], kernel=get(kernel),
                             bandwidth=np.full(d, H), moments=degree)
    narrow = Partials(*(a.astype(F32) for a in (parts.shift, parts.weight, parts.value)),
                      tuple(a.astype(F32) for a in parts.moments))
    fit = solve(narrow, degree, np.full(d, H))
    T = rcond_for(F32, len(monomials(degree, d)))  # the size of the largest system the solve tries
    assert RCOND < 1e-3 * T
    banded = 0
    for i in range(Q.shape[0]):
        if not parts.weight[i] > 0:
            assert fit.degree[i] == -1
            continue
        rc = _rconds(Q[i], X, y, kernel, degree)
        got = int(fit.degree[i])
        regular64 = [r for r in range(1, degree + 1) if rc[r - 1] >= 0.5 * RCOND]
        assert got <= max(regular64, default=0), (i, got, rc)  # never a degree float64 calls singular
        banded += bool(((rc >= RCOND) & (rc < T)).any())
        clear = np.all((rc >= 2 * T) | (rc < 0.5 * T))
        if clear:
            want = max([r for r in range(1, degree + 1) if rc[r - 1] >= 2 * T], default=0)
            assert got == want, (i, got, rc)
        if got >= 1:
            S, r, est = _plain_system(Q[i], X, y, kernel, got)
            ev = np.linalg.eigvalsh(S)
            P = S.shape[0]
            beta = np.linalg.solve(S, r)
            noise = 2 * U32 * P
            assert ev[0] > 2 * noise
            bound = (2 * U32 * np.linalg.norm(r) + noise * np.linalg.norm(beta)) / (ev[0] - noise)
            assert abs(float(fit.estimate[i, 0]) - est) <= 2 * bound + 1e-12 * abs(est), (i, got, ev[0])
    assert banded  # some query lies between RCOND and the float32 threshold: the scaling decides it


def test_only_cpu_calls_are_widened():
    """On an accelerator the call keeps float32 (its sums are float32: the scaled rule decides);
    degree 0 keeps it everywhere (no local system); float64 calls are never rounded."""
    Q, X, y = _data("gaussian")

    def job(degree, device=None, dtype=F32):
        return job_module.prepare(Q.astype(dtype), X.astype(dtype), y.astype(dtype), kernel="gaussian",
                                  bandwidth=H, sample_weight=None, degree=degree, var_types=None,
                                  categorical_kernel="classic", device=device)

    for j in (job(1), job(2, "cpu")):
        assert j.call.keys.dtype == np.float64 and j.call.queries.dtype == np.float64 and j.dtype == F32
    for j in (job(1, "cuda"), job(2, "mps:0"), job(0)):
        assert j.call.keys.dtype == F32 and j.dtype is None
    assert job(1, dtype=np.float64).dtype is None
    assert job(1).narrowed(np.ones(2)).dtype == F32


@pytest.mark.parametrize(("device", "backend", "wide"), [
    (None, "auto", True), ("cpu", "auto", True), ("cpu:0", "torch", True), ("cuda:0", "auto", False),
    ("mps", "torch", False), ("cuda", "fused", True), ("cuda", "constant", True)])
@pytest.mark.parametrize("loo", [False, True])
def test_pool_passes_its_device_to_the_widening(monkeypatch, device, backend, wide, loo):
    """``nadaraya.pool`` and ``loo_pool`` hand their ``device`` and ``backend`` to the widening: the job
    the fit receives is float64 where its sums are made on the CPU (a CPU backend named with a
    device runs there too) and stays float32 where the torch backend makes them on an accelerator
    (a device string only: the fit is replaced, nothing runs there); the prediction comes back
    float32 either way."""
    Q, X, y = _data("constant")
    got = []

    def fake(job, empty, *rest, **kw):
        got.append(job.call.keys.dtype)
        return np.zeros(job.call.queries.shape[0], dtype=job.call.keys.dtype)

    monkeypatch.setattr(_fit, "pool", fake)
    kw = dict(kernel="constant", bandwidth=H, degree=1, device=device, backend=backend)
    out = nadaraya.loo_pool(X, y, **kw) if loo else nadaraya.pool(Q, X, y, **kw)
    assert got == [np.dtype(np.float64) if wide else np.dtype(F32)]
    assert out.dtype == F32


@pytest.mark.parametrize("kernel", ["gaussian", "laplacian"])
@pytest.mark.parametrize("degree", [1, 2])
def test_float32_sums_keep_the_degree_outside_the_data(kernel, degree):
    """The reviewer's queries 2.8 bandwidths outside the data (float64 reciprocal condition about
    1e-5 at degree 2, well above the float32 noise floor 2 P u): exact float64 sums rounded to
    float32, as an accelerator delivers them, keep float64's degree, and the estimate is within the
    first-order bound of the rounding (twice, as above) of the float64 solve of the same sums."""
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, (300, 1)).astype(F32)
    y = np.sin(6 * X[:, 0]).astype(F32)
    Q = np.array([[-0.14], [1.14]], dtype=F32)
    Q64, X64, y64 = (a.astype(np.float64) for a in (Q, X, y))
    parts = backends.compute("reference", Q64, X64, y64[:, None], kernel=get(kernel), bandwidth=np.full(1, H),
                             moments=degree)
    narrow = Partials(*(a.astype(F32) for a in (parts.shift, parts.weight, parts.value)),
                      tuple(a.astype(F32) for a in parts.moments))
    wide, fit = solve(parts, degree, np.full(1, H)), solve(narrow, degree, np.full(1, H))
    np.testing.assert_array_equal(wide.degree, [degree, degree])
    np.testing.assert_array_equal(fit.degree, wide.degree)
    for i in range(2):
        S, r, est = _plain_system(Q[i], X, y, kernel, degree)
        ev = np.linalg.eigvalsh(S)
        P = S.shape[0]
        beta = np.linalg.solve(S, r)
        noise = 2 * U32 * P
        bound = (2 * U32 * np.linalg.norm(r) + noise * np.linalg.norm(beta)) / (ev[0] - noise)
        assert abs(float(fit.estimate[i, 0]) - float(wide.estimate[i, 0])) <= 2 * bound, (i, ev[0])
        assert abs(float(wide.estimate[i, 0]) - est) <= 1e-12 * (1 + abs(est)) / ev[0]  # float64 itself
