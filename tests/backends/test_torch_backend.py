"""The torch backend (issue 16, item 7) against the exact NumPy reference on every query, and on CUDA
against its own CPU run (those tests skip without a CUDA device)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import nadaraya  # noqa: E402
from nadaraya import backends  # noqa: E402
from nadaraya.backends import reference, torch_sums  # noqa: E402
from nadaraya.kernels import REGISTRY  # noqa: E402
from nadaraya.partials import Partials  # noqa: E402

KERNELS = list(REGISTRY)
LOG_DOMAIN = [k for k, v in REGISTRY.items() if v.log_domain]
P = 3
CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


def _data(n: int, m: int, d: int, seed: int, *, keys: str = "uniform"):
    rng = np.random.default_rng(seed)
    if keys == "cauchy":
        k = rng.standard_cauchy(size=(n, d))
    elif keys == "duplicates":
        k = rng.integers(0, 4, size=(n, d)).astype(float) * 0.5
    else:
        k = rng.uniform(-1.0, 2.0, size=(n, d))
    lo, hi = k.min(axis=0), k.max(axis=0)
    q = rng.uniform(lo - 0.3 * (hi - lo) - 0.1, hi + 0.3 * (hi - lo) + 0.1, size=(m, d))
    v = rng.normal(size=(n, P)) + k[:, :1]
    sw = rng.uniform(0.1, 2.0, size=n)
    sw[rng.random(n) < 0.15] = 0.0  # keys that carry no weight
    h = 0.3 + 0.2 * np.arange(d)
    return q, k, v, sw, h


def _both(q, k, v, kernel, h, sw=None, exclude=None, moments=0, device=None) -> tuple[Partials, Partials]:
    kw = dict(kernel=REGISTRY[kernel], bandwidth=h, sample_weight=sw, exclude=exclude, moments=moments)
    return torch_sums.partials(q, k, v, **kw, device=device), reference.partials(q, k, v, **kw)


def _lse(p: Partials, ok) -> np.ndarray:
    return p.shift[ok] + np.log(p.weight[ok])


def _assert_close(got: Partials, want: Partials, rtol: float = 1e-12) -> None:
    """Same empty windows; per query the same log-sum-exp of the weights, the same predictions
    (relative to the values' scale) and the same moment sums (relative to the weight)."""
    assert got.weight.dtype == want.weight.dtype and got.value.shape == want.value.shape
    np.testing.assert_array_equal(got.empty, want.empty)
    ok = ~want.empty
    np.testing.assert_allclose(_lse(got, ok), _lse(want, ok), rtol=rtol, atol=rtol)
    scale = float(np.abs(want.finalize()[ok]).max(initial=1.0))
    np.testing.assert_allclose(got.finalize(), want.finalize(), rtol=rtol, atol=rtol * scale, equal_nan=True)
    assert len(got.moments) == len(want.moments)
    for a, b in zip(got.moments, want.moments):
        assert a.shape == b.shape
        # a moment over the query's weight, in the same shift: compare sum w g / sum w
        ra = a[ok] / got.weight[ok].reshape(-1, *(1,) * (a.ndim - 1))
        rb = b[ok] * np.exp(want.shift[ok] - got.shift[ok]).reshape(-1, *(1,) * (b.ndim - 1))
        rb = rb / got.weight[ok].reshape(-1, *(1,) * (b.ndim - 1))
        np.testing.assert_allclose(ra, rb, rtol=rtol * 100, atol=rtol * 100 * max(1.0, np.abs(rb).max()))


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("d", [1, 2, 3])
@pytest.mark.parametrize("n, m", [(1, 7), (97, 41), (1031, 13)])
def test_float64_matches_reference_with_weights(kernel: str, d: int, n: int, m: int) -> None:
    q, k, v, sw, h = _data(n, m, d, seed=100 * n + 10 * d + m)
    got, want = _both(q, k, v, kernel, h, sw)
    _assert_close(got, want)


@pytest.mark.parametrize("kernel", KERNELS)
def test_blocks_smaller_than_the_data_merge_exactly(kernel: str) -> None:
    """With 1 MiB of working memory the blocks are far smaller than the data (16 x 4096 pairs):
    many key blocks and query blocks, merged, still give the reference's sums."""
    q, k, v, sw, h = _data(5000, 70, 2, seed=7)
    assert reference.block_sizes(70, 5000, 8, working_memory_mib=1)[0] < 70
    with nadaraya.config_context(working_memory=1):
        got, want = _both(q, k, v, kernel, h, sw)
    _assert_close(got, want)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("d", [1, 3])
def test_leave_one_out_matches_reference(kernel: str, d: int) -> None:
    _, k, v, sw, h = _data(300, 1, d, seed=d)
    exclude = np.arange(300)
    exclude[::7] = -1  # some queries leave nothing out
    got, want = _both(k, k, v, kernel, h, sw, exclude)
    _assert_close(got, want)
    # independent check of the masking: leaving key i out changes query i's sums by its own term
    full, _ = _both(k, k, v, kernel, h, sw)
    kern = REGISTRY[kernel]
    i = 5
    own = np.prod([kern.profile((k[i, j] - k[i, j]) / h[j]) for j in range(d)]) * sw[i]
    if kern.log_domain:
        own = np.exp(np.sum([kern.log_profile(np.zeros(1))[0] for _ in range(d)]) - full.shift[i]) * sw[i]
    removed = full.weight[i] - got.weight[i] * np.exp(got.shift[i] - full.shift[i])
    np.testing.assert_allclose(removed, own, rtol=1e-9, atol=1e-12 * full.weight[i])


@pytest.mark.parametrize("kernel", ["gaussian", "laplacian", "logistic"])
@pytest.mark.parametrize("keys", ["uniform", "cauchy", "duplicates"])
@pytest.mark.parametrize("rel_h", [1e-6, 1e-3, 1.0, 1e3])
def test_far_queries_heavy_tails_duplicates_and_extreme_bandwidths(
    kernel: str, keys: str, rel_h: float
) -> None:
    """Bandwidths from 1e-6 to 1e3 times the keys' range: every query's sums still match (the
    narrow ones leave each query with its nearest keys only, in the log domain)."""
    q, k, v, sw, _ = _data(200, 30, 2, seed=int(rel_h * 1e6) % 1000, keys=keys)
    h = rel_h * np.ptp(k, axis=0)
    q[0] = k.max(axis=0) + 1e4 * np.ptp(k, axis=0)  # a query far from every key
    got, want = _both(q, k, v, kernel, h, sw)
    _assert_close(got, want)
    assert np.isfinite(got.shift[~want.empty]).all()


@pytest.mark.parametrize("kernel", ["epanechnikov", "tricube", "boxcar"])
@pytest.mark.parametrize("rel_h", [1e-6, 1e-2, 1e3])
def test_compact_kernels_at_extreme_bandwidths(kernel: str, rel_h: float) -> None:
    q, k, v, sw, _ = _data(200, 30, 2, seed=3, keys="duplicates")
    q[:10] = k[:10]  # queries on keys, so a narrow window is not always empty
    got, want = _both(q, k, v, kernel, rel_h * np.ptp(k, axis=0), sw)
    _assert_close(got, want)


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov", "logistic", "tricube"])
@pytest.mark.parametrize("d", [1, 3])
def test_float32_within_twice_the_float32_reference_error(kernel: str, d: int) -> None:
    q, k, v, sw, h = _data(1500, 60, d, seed=11 + d)
    exact, _ = _both(q, k, v, kernel, h, sw)
    a32 = [a.astype(np.float32) for a in (q, k, v)]
    got32, ref32 = _both(*a32, kernel, h, sw.astype(np.float32))
    assert got32.value.dtype == np.float32 and got32.weight.dtype == np.float32
    truth = exact.finalize()
    both = np.isfinite(truth).all(axis=1)
    err = lambda r: np.abs(r.finalize()[both].astype(np.float64) - truth[both]).max(initial=0.0)  # noqa: E731
    scale = float(np.abs(v).max())
    assert err(got32) <= 2.0 * err(ref32) + 4 * np.finfo(np.float32).eps * scale, (err(got32), err(ref32))
    np.testing.assert_array_equal(got32.empty, ref32.empty)


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov", "laplacian"])
@pytest.mark.parametrize("d", [1, 2])
@pytest.mark.parametrize("r", [1, 2])
def test_moments_match_reference(kernel: str, d: int, r: int) -> None:
    q, k, v, sw, h = _data(150, 20, d, seed=r * 10 + d)
    got, want = _both(q, k, v, kernel, h, sw, moments=r)
    assert [s.shape[1:] for s in got.moments] == reference.moment_shapes(r, d, P)
    _assert_close(got, want)


def test_moments_with_leave_one_out_and_local_linear_fit() -> None:
    """Moments with exclude match, and pool(degree=1) on torch reproduces a line exactly."""
    _, k, v, sw, h = _data(120, 1, 1, seed=5)
    got, want = _both(k, k, v, "gaussian", h, sw, exclude=np.arange(120), moments=1)
    _assert_close(got, want)
    x = np.linspace(0.0, 1.0, 40)
    fit = nadaraya.pool([0.25, 0.6], x, 3.0 * x - 1.0, bandwidth=0.2, degree=1, backend="torch")
    np.testing.assert_allclose(fit, [-0.25, 0.8], rtol=1e-12)


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov", "constant"])
def test_pool_and_loo_pool_end_to_end(kernel: str) -> None:
    q, k, v, sw, h = _data(400, 50, 2, seed=9)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nadaraya.EmptyWindowWarning)
        for fn, args in ((nadaraya.pool, (q, k, v)), (nadaraya.loo_pool, (k, v))):
            want = fn(*args, kernel=kernel, bandwidth=h, sample_weight=sw, backend="reference")
            got = fn(*args, kernel=kernel, bandwidth=h, sample_weight=sw, backend="torch")
            on_cpu = fn(*args, kernel=kernel, bandwidth=h, sample_weight=sw, backend="torch", device="cpu")
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, equal_nan=True)
            np.testing.assert_array_equal(on_cpu, got)


def test_far_query_gets_the_nearest_key_through_pool() -> None:
    keys = np.array([0.0, 1.0, 2.0])
    got = nadaraya.pool([1e6, -1e6], keys, [5.0, 6.0, 7.0], bandwidth=1e-3, backend="torch")
    np.testing.assert_array_equal(got, [7.0, 5.0])


def test_supports_every_kernel_in_any_dimension() -> None:
    assert all(torch_sums.supports(REGISTRY[k], d) for k in KERNELS for d in (1, 2, 5, 9))


@pytest.mark.parametrize("bad", ["gpu", "cuda:banana", 3.5])
def test_unknown_device_names_it(bad: object) -> None:
    q, k, v, _, h = _data(5, 2, 1, seed=0)
    with pytest.raises(ValueError, match="device="):
        torch_sums.partials(q, k, v, kernel=REGISTRY["gaussian"], bandwidth=h, device=bad)


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is present here")
def test_cuda_without_cuda_is_a_clear_error() -> None:
    q, k, v, _, h = _data(5, 2, 1, seed=0)
    with pytest.raises(ValueError, match=r"device='cuda'.*no CUDA"):
        torch_sums.partials(q, k, v, kernel=REGISTRY["gaussian"], bandwidth=h, device="cuda")
    with pytest.raises(ValueError, match="device='cuda'"):
        nadaraya.pool(q, k, v, bandwidth=h, backend="torch", device="cuda")


@pytest.mark.parametrize("moments", [-1, 1.5, True])
def test_bad_moments_are_refused(moments: object) -> None:
    q, k, v, _, h = _data(5, 2, 1, seed=0)
    with pytest.raises(ValueError, match="moments"):
        backends.compute("torch", q, k, v, kernel=REGISTRY["gaussian"], bandwidth=h, moments=moments)



_RSS_SCRIPT = """
import json, resource
import numpy as np
import nadaraya
rng = np.random.default_rng(0)
keys, values, queries = rng.uniform(0, 5, (4096, 1)), rng.normal(size=4096), rng.uniform(0, 5, (12000, 1))
with nadaraya.config_context(working_memory=16):
    nadaraya.pool(queries[:500], keys, values, bandwidth=0.05, backend="torch")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    nadaraya.pool(queries, keys, values, bandwidth=0.05, backend="torch")
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"extra": (after - before) * 1024}))
"""


def test_resident_memory_stays_within_the_working_memory() -> None:
    """188 query blocks of 64 x 4096 pairs (16 MiB of working memory) grow the resident memory by
    far less than the blocks' total: keeping each block's small result tensors to the end pinned
    glibc's heap (0.3 to 0.9 GB at 20000 queries)."""
    import json
    import resource
    import subprocess
    import sys

    if not hasattr(resource, "getrusage"):
        pytest.skip("resource.getrusage is not available on this platform")
    out = subprocess.run([sys.executable, "-c", _RSS_SCRIPT], capture_output=True, text=True, timeout=120,
                         check=True)
    extra = json.loads(out.stdout.strip().splitlines()[-1])["extra"]
    assert extra < 64 * 2**20, f"peak resident memory grew by {extra / 2**20:.1f} MiB"

# -- CUDA: the same sums on the device as on the CPU (skipped without a CUDA device) -------------


@pytest.mark.gpu
@CUDA
@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("d", [1, 3])
def test_cuda_matches_cpu_float64(kernel: str, d: int) -> None:
    q, k, v, sw, h = _data(3000, 257, d, seed=d)
    exclude = np.full(257, -1)
    exclude[:100] = np.arange(100)
    got, _ = _both(q, k, v, kernel, h, sw, exclude, device="cuda")
    cpu, _ = _both(q, k, v, kernel, h, sw, exclude, device="cpu")
    _assert_close(got, cpu)


@pytest.mark.gpu
@CUDA
@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
def test_cuda_float32_and_moments(kernel: str) -> None:
    q, k, v, sw, h = _data(2000, 100, 2, seed=1)
    exact, _ = _both(q, k, v, kernel, h, sw)
    a32 = [a.astype(np.float32) for a in (q, k, v)]
    got32, ref32 = _both(*a32, kernel, h, sw.astype(np.float32), device="cuda")
    truth = exact.finalize()
    both = np.isfinite(truth).all(axis=1)
    err = lambda r: np.abs(r.finalize()[both].astype(np.float64) - truth[both]).max(initial=0.0)  # noqa: E731
    assert err(got32) <= 2.0 * err(ref32) + 4 * np.finfo(np.float32).eps * float(np.abs(v).max())
    got, _ = _both(q, k, v, kernel, h, sw, moments=2, device="cuda")
    cpu, _ = _both(q, k, v, kernel, h, sw, moments=2, device="cpu")
    _assert_close(got, cpu)


@pytest.mark.gpu
@CUDA
def test_cuda_pool_end_to_end() -> None:
    q, k, v, sw, h = _data(5000, 300, 2, seed=2)
    got = nadaraya.pool(q, k, v, bandwidth=h, sample_weight=sw, backend="torch", device="cuda")
    want = nadaraya.pool(q, k, v, bandwidth=h, sample_weight=sw, backend="reference")
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    loo = nadaraya.loo_pool(k, v, bandwidth=h, sample_weight=sw, device="cuda")
    want_loo = nadaraya.loo_pool(k, v, bandwidth=h, sample_weight=sw)
    np.testing.assert_allclose(loo, want_loo, rtol=1e-12, atol=1e-12)


# --- the estimator on a device -----------------------------------------------------------------


def _estimator_data(seed: int = 3):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 5, (200, 2))
    y = np.sin(X[:, 0]) + 0.3 * X[:, 1] + rng.normal(0, 0.2, 200)
    Q = rng.uniform(-0.5, 5.5, (40, 2))
    return X, y, Q


@pytest.mark.parametrize("degree", [0, 1])
def test_estimator_on_a_device_matches_the_cpu_backends(degree: int) -> None:
    """NadarayaWatson(device="cpu") runs its sums on the torch backend: predictions, standard
    errors and gradients equal the default backends' (the reference sums, reordered) to 1e-12."""
    X, y, Q = _estimator_data()
    plain = nadaraya.NadarayaWatson(bandwidth=[0.4, 0.7], degree=degree).fit(X, y)
    on = nadaraya.NadarayaWatson(bandwidth=[0.4, 0.7], degree=degree, device="cpu").fit(X, y)
    assert on.backend_ == "torch" and plain.backend_ != "torch"
    np.testing.assert_allclose(on.predict(Q), plain.predict(Q), rtol=1e-12, atol=1e-12)
    (m1, s1), (m2, s2) = on.predict(Q, return_std=True), plain.predict(Q, return_std=True)
    np.testing.assert_allclose(m1, m2, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(s1, s2, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(on.gradient(Q), plain.gradient(Q), rtol=1e-9, atol=1e-12)


def test_estimator_device_is_a_parameter_checked_at_fit() -> None:
    from sklearn.base import clone

    X, y, _ = _estimator_data()
    assert clone(nadaraya.NadarayaWatson(device="cpu")).get_params()["device"] == "cpu"
    with pytest.raises(ValueError, match=r"device='cpu' is for backend='torch'.*backend='fused'"):
        nadaraya.NadarayaWatson(bandwidth=0.5, device="cpu", backend="fused").fit(X, y)
    with pytest.raises(ValueError, match="device='gpu'"):
        nadaraya.NadarayaWatson(bandwidth=0.5, device="gpu").fit(X, y)


@CUDA
def test_estimator_on_cuda_matches_cpu() -> None:
    X, y, Q = _estimator_data()
    cpu = nadaraya.NadarayaWatson(bandwidth=[0.4, 0.7], degree=1).fit(X, y)
    gpu = nadaraya.NadarayaWatson(bandwidth=[0.4, 0.7], degree=1, device="cuda").fit(X, y)
    np.testing.assert_allclose(gpu.predict(Q), cpu.predict(Q), rtol=1e-10, atol=1e-12)
