"""Tests of nadaraya.nn: the torch modules against the core, their gradients, paths, masks and training."""

from __future__ import annotations

import subprocess
import sys
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import nadaraya  # noqa: E402
from nadaraya.datasets import textbook  # noqa: E402
from nadaraya.nn import (  # noqa: E402
    AdditiveAttentionPooling,
    AttentionPoolingRegressor,
    AveragePooling,
    DotProductAttentionPooling,
    KernelPooling,
    fit,
)

F64 = torch.float64
CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


def data(m: int = 13, n: int = 40, d: int = 2, p: int = 3, seed: int = 0):
    rng = np.random.default_rng(seed)
    return rng.uniform(0, 5, (m, d)), rng.uniform(0, 5, (n, d)), rng.normal(size=(n, p))


def t(a):
    return torch.as_tensor(np.asarray(a), dtype=F64)


def plain_pool(q, k, v, kernel, h, allowed=None):
    """The primitive written out densely with the kernel's profile (no log domain)."""
    K = nadaraya.kernels.get(kernel)
    w = K((q[:, None, :] - k[None, :, :]) / np.asarray(h)).prod(-1)
    if allowed is not None:
        w = w * allowed
    with np.errstate(invalid="ignore"):
        return (w @ v) / w.sum(1, keepdims=True)


def modules():
    """Every module kind, in float64, with its name (for ids)."""
    torch.manual_seed(0)
    return {
        "gaussian-sdpa": KernelPooling("gaussian", 1.5, dtype=F64),
        "gaussian-chunked": KernelPooling("gaussian", 1.5, method="chunked", dtype=F64),
        "gaussian-per-feature": KernelPooling("gaussian", [1.0, 2.0], dtype=F64),
        "epanechnikov": KernelPooling("epanechnikov", [4.0, 3.0], dtype=F64),
        "laplacian": KernelPooling("laplacian", 1.0, dtype=F64),
        "average": AveragePooling().double(),
        "additive": AdditiveAttentionPooling(2, 5).double(),
        "dot-sdpa": DotProductAttentionPooling(2, 3).double(),
        "dot-chunked": DotProductAttentionPooling(2, 3, method="chunked").double(),
    }


NAMES = list(modules())


# ---------------------------------------------------------------------------------- gradients


@pytest.mark.parametrize("masked", [False, True], ids=["no-mask", "mask"])
@pytest.mark.parametrize("name", NAMES)
def test_gradcheck(name, masked):
    mod = modules()[name]
    q, k, v = data(4, 6, 2, 2, seed=1)
    Q, K, V = (t(a).requires_grad_() for a in (q, k, v))
    mask = None
    if masked:
        mask = torch.tensor(np.random.default_rng(2).random((4, 6)) > 0.4)
        mask[:, 0] = True  # no empty row: NaN has no gradient to check
    params = [p for p in mod.parameters() if p.requires_grad]

    def f(a, b, c, *_):
        return mod(a, b, c, mask)

    assert torch.autograd.gradcheck(f, (Q, K, V, *params), eps=1e-6, atol=1e-7)


# ---------------------------------------------------------------------- against the core


@pytest.mark.parametrize("kernel", nadaraya.kernels.names())
def test_kernel_pooling_equals_pool(kernel):
    q, k, v = data()
    h = [1.1, 1.6]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nadaraya.EmptyWindowWarning)
        ref = nadaraya.pool(q, k, v, kernel=kernel, bandwidth=h)
        ref_loo = nadaraya.loo_pool(k, v, kernel=kernel, bandwidth=h)
    layer = KernelPooling(kernel, h, learnable=False, dtype=F64)
    out = layer(t(q), t(k), t(v)).numpy()
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-10)
    loo = layer(t(k), t(k), t(v), exclude=torch.arange(len(k))).numpy()
    np.testing.assert_allclose(loo, ref_loo, rtol=0, atol=1e-10)


def test_compact_kernel_empty_window_is_nan_like_the_core():
    q, k, v = data(30, 20, 2, 1)
    layer = KernelPooling("epanechnikov", 0.4, dtype=F64)
    Q = t(q).requires_grad_()
    out = layer(Q, t(k), t(v))
    with pytest.warns(nadaraya.EmptyWindowWarning):
        ref = nadaraya.pool(q, k, v, kernel="epanechnikov", bandwidth=0.4)
    empty = np.isnan(ref).any(1)
    assert 0 < empty.sum() < len(q)
    np.testing.assert_array_equal(torch.isnan(out).any(-1).numpy(), empty)
    np.testing.assert_allclose(out.detach().numpy()[~empty], ref[~empty], atol=1e-12)
    torch.nan_to_num(out).sum().backward()  # the empty rows give no gradient, not NaN
    assert torch.isfinite(Q.grad).all() and torch.isfinite(layer.log_bandwidth.grad)
    assert (Q.grad[torch.as_tensor(empty)] == 0).all()


def test_gaussian_far_query_gets_nearest_keys_not_nan():
    k = t([[0.0], [1.0], [10.0]])
    v = t([1.0, 2.0, 3.0])
    far = t([[1e4]])
    for method in ("sdpa", "chunked"):
        out = KernelPooling("gaussian", 0.5, method=method, dtype=F64)(far, k, v)
        assert out.item() == pytest.approx(3.0), method


def test_return_weights_match_attention_weights():
    q, k, v = data(7, 11, 2, 2)
    for name, mod in modules().items():
        out, w = mod(t(q), t(k), t(v), return_weights=True)
        np.testing.assert_allclose(w.sum(-1).detach().numpy(), 1.0, atol=1e-12, err_msg=name)
        pooled = (w @ t(v)).detach().numpy()
        np.testing.assert_allclose(pooled, out.detach().numpy(), atol=1e-12, err_msg=name)
    layer = KernelPooling("triweight", [3.0, 2.0], dtype=F64)
    _, w = layer(t(q), t(k), t(v), return_weights=True)
    ref = nadaraya.attention_weights(q, k, kernel="triweight", bandwidth=[3.0, 2.0])
    np.testing.assert_allclose(w.detach().numpy(), ref, atol=1e-12)


# ------------------------------------------------------------------------------ the paths


def aten_ops(fn) -> set[str]:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    return {e.name for e in prof.events()}


@pytest.mark.parametrize("dtype", [torch.float32, F64])
@pytest.mark.parametrize("masked", [False, True], ids=["no-mask", "mask"])
def test_gaussian_takes_the_fused_cpu_path(dtype, masked):
    q, k, v = (torch.as_tensor(a, dtype=dtype) for a in data(50, 70, 3, 1))
    q.requires_grad_()
    mask = torch.rand(50, 70) > 0.2 if masked else None
    layer = KernelPooling("gaussian", 0.7, dtype=dtype)
    assert layer.path(q, k) == "sdpa"
    ops = aten_ops(lambda: layer(q, k, v, mask).sum().backward())
    assert "aten::_scaled_dot_product_flash_attention_for_cpu" in ops
    assert "aten::_scaled_dot_product_flash_attention_for_cpu_backward" in ops
    assert "aten::_scaled_dot_product_attention_math" not in ops
    assert "aten::softmax" not in ops and "aten::_softmax" not in ops  # no (m, n) matrix


def test_chunked_path_never_calls_sdpa_or_a_full_softmax():
    q, k, v = (t(a) for a in data(50, 70, 3, 1))
    layer = KernelPooling("gaussian", 0.7, method="chunked", dtype=F64)
    ops = aten_ops(lambda: layer(q, k, v))
    assert not any("scaled_dot_product" in o for o in ops) and "aten::softmax" not in ops


@pytest.mark.parametrize("masked", [False, True], ids=["no-mask", "mask"])
@pytest.mark.parametrize("kind", ["gaussian", "dot"])
def test_sdpa_path_equals_chunked_path(kind, masked):
    q, k, v = data(97, 130, 2, 5)
    mask = torch.tensor(np.random.default_rng(3).random((97, 130)) > 0.5) if masked else None
    if masked:
        mask[5] = False  # an empty row: NaN on both paths
    if kind == "gaussian":
        a = KernelPooling("gaussian", [0.5, 0.8], dtype=F64)
        b = KernelPooling("gaussian", [0.5, 0.8], method="chunked", dtype=F64)
    else:
        torch.manual_seed(0)
        a = DotProductAttentionPooling(2, 4).double()
        b = DotProductAttentionPooling(2, 4, method="chunked").double()
        b.load_state_dict(a.state_dict())
    outs, grads = [], []
    for layer in (a, b):
        Q, K, V = (t(x).requires_grad_() for x in (q, k, v))
        out = layer(Q, K, V, mask)
        torch.nan_to_num(out).pow(2).sum().backward()
        outs.append(out.detach())
        grads.append([Q.grad, K.grad, V.grad, *(p.grad for p in layer.parameters())])
    torch.testing.assert_close(outs[0], outs[1], rtol=1e-10, atol=1e-10, equal_nan=True)
    for ga, gb in zip(*grads):
        torch.testing.assert_close(ga, gb, rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("name", ["gaussian-chunked", "epanechnikov", "additive", "dot-chunked"])
def test_blocks_do_not_change_the_result(name, monkeypatch):
    from nadaraya.nn import _pooling

    mod = modules()[name]
    q, k, v = data(33, 57, 2, 2)
    mask = torch.tensor(np.random.default_rng(9).random((33, 57)) > 0.3)

    def run():
        Q, K = t(q).requires_grad_(), t(k).requires_grad_()
        out = mod(Q, K, t(v), mask)
        return [out, *torch.autograd.grad(out.sum(), [Q, K, *mod.parameters()])]

    assert _pooling.block_sizes(1, 33, 57, 10, 8) == (33, 57)  # one block by default
    whole = run()
    monkeypatch.setattr(_pooling, "block_sizes", lambda *args: (4, 7))  # awkward blocks both ways
    for a, b in zip(whole, run()):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_block_sizes_follow_the_working_memory():
    from nadaraya.backends.reference import SCRATCH_ARRAYS
    from nadaraya.nn import _pooling

    with nadaraya.config_context(working_memory=1):  # 1 MiB: 16384 float64 scratch entries
        bq, bk = _pooling.block_sizes(2, 4096, 4096, 64, 8)
    assert bq * bk * 2 * 64 <= 2**20 // (8 * SCRATCH_ARRAYS) and bq >= 1 and bk >= 1


# -------------------------------------------------------------------- batches and masks


@pytest.mark.parametrize("name", NAMES)
def test_batch_equals_loop(name):
    mod = modules()[name]
    rng = np.random.default_rng(4)
    q, k, v = rng.uniform(0, 5, (2, 3, 6, 2)), rng.uniform(0, 5, (3, 9, 2)), rng.normal(size=(2, 3, 9, 2))
    mask = torch.tensor(rng.random((2, 1, 6, 9)) > 0.3)
    out = mod(t(q), t(k), t(v), mask)
    assert out.shape == (2, 3, 6, 2)
    for i in range(2):
        for j in range(3):
            one = mod(t(q[i, j]), t(k[j]), t(v[i, j]), mask[i, 0])
            torch.testing.assert_close(out[i, j], one, rtol=1e-12, atol=1e-12, equal_nan=True)


@pytest.mark.parametrize("name", NAMES)
def test_mask_removes_exactly_the_masked_keys(name):
    mod = modules()[name]
    q, k, v = data(8, 15, 2, 2, seed=5)
    mask = torch.tensor(np.random.default_rng(6).random((8, 15)) > 0.5)
    mask[:, 3] = True
    out = mod(t(q), t(k), t(v), mask)
    for i in range(8):
        keep = mask[i].numpy()
        alone = mod(t(q[i : i + 1]), t(k[keep]), t(v[keep]))
        torch.testing.assert_close(out[i : i + 1], alone, rtol=1e-11, atol=1e-11)


def test_exclude_equals_mask_and_values_1d():
    q, k, v = data(15, 15, 2, 1)
    layer = KernelPooling("logistic", 0.9, dtype=F64)
    ex = torch.tensor([3, -1, *range(2, 15)])
    mask = torch.arange(15)[None, :] != ex[:, None]
    a = layer(t(q), t(k), t(v[:, 0]), exclude=ex)
    b = layer(t(q), t(k), t(v[:, 0]), mask)
    assert a.shape == (15,)
    torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


# ----------------------------------------------------------------------------- training


def cv_bandwidth(x, y) -> float:
    """The core's leave-one-out CV bandwidth: nadaraya.select_bandwidth where it exists, else the
    minimiser of the core's leave-one-out loss (the same criterion)."""
    import nadaraya.bandwidth

    select = getattr(nadaraya, "select_bandwidth", None)
    select = select or getattr(nadaraya.bandwidth, "select_bandwidth", None)
    if select is not None:
        return float(np.asarray(select(x, y).bandwidth).ravel()[0])
    from scipy.optimize import minimize_scalar

    def loss(log_h):
        return np.mean((nadaraya.loo_pool(x, y, bandwidth=np.exp(log_h)) - y) ** 2)

    res = minimize_scalar(loss, bounds=(np.log(0.01), np.log(5.0)), method="bounded", options={"xatol": 1e-8})
    return float(np.exp(res.x))


def test_textbook_replication():
    s = textbook(n=50, noise=0.5, seed=0)
    x, y = s.x_train, s.y_train

    def loo_loss(h):
        return float(np.mean((nadaraya.loo_pool(x, y, bandwidth=h) - y) ** 2))

    layer = KernelPooling("gaussian", 1.0, dtype=F64)  # w = 1
    history = fit(layer, x, y, epochs=5, lr=0.5, optimizer="sgd")
    assert history["loss"][0] == pytest.approx(loo_loss(1.0), rel=1e-12)  # the loss is the core's CV
    assert loo_loss(layer.bandwidth.item()) < loo_loss(1.0)
    assert layer.w.item() > 1.0
    assert len(history["bandwidth"]) == 5

    history = fit(layer, x, y, epochs=500, lr=0.5,
                  callback=lambda e, h: e > 2 and abs(h["bandwidth"][-1] / h["bandwidth"][-2] - 1) < 1e-7)
    h_cv = cv_bandwidth(x, y)
    assert 1.0 / abs(layer.w.item()) == pytest.approx(h_cv, rel=0.02)


def test_additive_beats_average_pooling_on_validation():
    s = textbook(n=50, noise=0.5, seed=0)
    xv, kv = t(s.x_val)[:, None], t(s.x_train)[:, None]

    def val_mse(mod):
        with torch.no_grad():
            pred = mod(xv, kv, t(s.y_train)).numpy()
        return float(np.mean((pred - s.y_val) ** 2))

    torch.manual_seed(0)
    additive = AdditiveAttentionPooling(1, 8).double()
    history = fit(additive, s.x_train, s.y_train, epochs=150, lr=0.05, optimizer="adam", seed=0)
    assert history["loss"][-1] < history["loss"][0]
    assert val_mse(additive) < val_mse(AveragePooling().double())


def test_fit_is_deterministic_with_a_seed_and_stops_on_callback():
    s = textbook(n=40, noise=0.5, seed=1)
    runs = []
    for _ in range(2):
        torch.manual_seed(1)
        mod = AdditiveAttentionPooling(1, 4).double()
        runs.append(fit(mod, s.x_train, s.y_train, epochs=3, lr=0.01, optimizer="adam", batch_size=7, seed=3))
    assert runs[0] == runs[1]
    seen = []
    hist = fit(KernelPooling(dtype=F64), s.x_train, s.y_train, epochs=10, lr=0.1,
               callback=lambda e, h: seen.append(e) or e == 2)
    assert seen == [0, 1, 2] and len(hist["loss"]) == 3


def test_fit_without_loo_drives_the_bandwidth_down():
    s = textbook(n=30, noise=0.5, seed=2)
    layer = KernelPooling(dtype=F64)
    hist = fit(layer, s.x_train, s.y_train, epochs=20, lr=0.5, loo=False)
    assert hist["bandwidth"][-1] < 0.5 * hist["bandwidth"][0]


# ---------------------------------------------------------------------------- regressor


def test_regressor_learns_the_cv_bandwidth_and_fits_in_a_pipeline():
    from sklearn.base import clone
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    s = textbook(n=50, noise=0.5, seed=0)
    X = s.x_train[:, None]
    model = AttentionPoolingRegressor(epochs=150, lr=0.5).fit(X, s.y_train)
    assert model.bandwidth_[0] == pytest.approx(cv_bandwidth(s.x_train, s.y_train), rel=0.02)
    ref = nadaraya.pool(s.x_val, s.x_train, s.y_train, bandwidth=model.bandwidth_[0])
    np.testing.assert_allclose(model.predict(s.x_val[:, None]), ref, rtol=1e-10)
    assert model.get_params()["bandwidth"] == 1.0  # the user's value is not overwritten
    pipe = make_pipeline(StandardScaler(), AttentionPoolingRegressor(module="additive", epochs=30, lr=0.05,
                                                                     optimizer="adam", random_state=0))
    pipe.fit(X, s.y_train)
    assert pipe.predict(s.x_val[:, None]).shape == s.x_val.shape
    again = clone(pipe).fit(X, s.y_train)
    np.testing.assert_array_equal(pipe.predict(X), again.predict(X))


def test_regressor_multi_output_and_per_feature():
    rng = np.random.default_rng(7)
    X = rng.uniform(0, 1, (60, 2))
    Y = np.column_stack([np.sin(6 * X[:, 0]), np.cos(6 * X[:, 0])]) + rng.normal(0, 0.1, (60, 2))
    model = AttentionPoolingRegressor(per_feature=True, bandwidth=0.3, epochs=100, lr=0.2).fit(X, Y)
    assert model.predict(X).shape == (60, 2)
    assert model.bandwidth_[1] > 2 * model.bandwidth_[0]  # the irrelevant feature is smoothed out
    for module in ("dot", "average"):
        small = AttentionPoolingRegressor(module=module, epochs=2, lr=0.01).fit(X, Y)
        assert small.predict(X[:3]).shape == (3, 2)


def test_regressor_check_estimator():
    from sklearn.utils.estimator_checks import check_estimator

    check_estimator(AttentionPoolingRegressor(epochs=3, lr=0.1))


# ---------------------------------------------------------------------------- bad input


def test_bad_input_errors_name_the_argument():
    q, k, v = (t(a) for a in data(3, 4, 2, 1))
    with pytest.raises(ValueError, match=r"bandwidth.*-1"):
        KernelPooling(bandwidth=-1.0)
    with pytest.raises(ValueError, match=r"kernel='nope'"):
        KernelPooling("nope")
    with pytest.raises(ValueError, match=r"method='fast'"):
        KernelPooling(method="fast")
    with pytest.raises(ValueError, match=r"per_feature.*True"):
        KernelPooling(per_feature=True)
    with pytest.raises(ValueError, match=r"method='sdpa' is not available"):
        KernelPooling("epanechnikov", method="sdpa", dtype=F64)(q, k, v)
    with pytest.raises(ValueError, match=r"hidden must be a positive int; got 0"):
        AdditiveAttentionPooling(2, 0)
    layer = KernelPooling(dtype=F64)
    with pytest.raises(ValueError, match=r"one row per key \(4\)"):
        layer(q, k, v[:3])
    with pytest.raises(TypeError, match=r"mask must be boolean.*float64"):
        layer(q, k, v, torch.ones(3, 4, dtype=F64))
    with pytest.raises(ValueError, match=r"mask must have shape \(\.\.\., 3, 4\)"):
        layer(q, k, v, torch.ones(4, 3, dtype=torch.bool))
    with pytest.raises(TypeError, match=r"keys must have the queries' dtype"):
        layer(q, k.float(), v)
    with pytest.raises(ValueError, match=r"same number of features; got 2 and 1"):
        layer(q, k[:, :1], v)
    with pytest.raises(ValueError, match=r"optimizer='lbfgs'"):
        fit(layer, q, v[:3], epochs=1, lr=0.1, optimizer="lbfgs")
    with pytest.raises(ValueError, match=r"epochs must be a non-negative int; got -1"):
        fit(layer, q, v[:3], epochs=-1, lr=0.1)
    with pytest.raises(ValueError, match=r"y must have shape \(3,\)"):
        fit(layer, q, v, epochs=1, lr=0.1)
    with pytest.raises(ValueError, match=r"'module' parameter of AttentionPoolingRegressor .* Got 'lstm'"):
        AttentionPoolingRegressor(module="lstm").fit(np.zeros((5, 1)), np.zeros(5))


def test_import_nadaraya_and_the_regressor_do_not_import_torch():
    code = (
        "import sys, nadaraya, nadaraya.nn\n"
        "assert 'torch' not in sys.modules\n"
        "nadaraya.AttentionPoolingRegressor(epochs=1)\n"
        "assert 'torch' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# -------------------------------------------------------------------------- memory bound


def peak_cpu_bytes(fn) -> int:
    """Peak of the bytes allocated on the CPU while ``fn`` runs, from torch's memory profiler."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events = sorted(
        (e.start_ns(), e.nbytes()) for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"
    )
    assert events, "the profiler recorded no allocation"
    return int(np.max(np.cumsum([b for _, b in events])))


@pytest.mark.slow
def test_additive_memory_stays_far_below_the_dense_tensor():
    m = n = 2048
    hidden = 64
    torch.manual_seed(0)
    mod = AdditiveAttentionPooling(2, hidden)
    q = torch.randn(m, 2, requires_grad=True)
    k, v = torch.randn(n, 2), torch.randn(n, 1)
    peak = peak_cpu_bytes(lambda: mod(q, k, v).sum().backward())
    dense = m * n * hidden * 4
    assert peak < dense / 10, f"peak {peak / 2**20:.0f} MiB vs dense (m, n, hidden) {dense / 2**20:.0f} MiB"
    assert torch.isfinite(q.grad).all() and q.grad.abs().sum() > 0


# -------------------------------------------------------------------------------- CUDA


@CUDA
@pytest.mark.gpu
@pytest.mark.parametrize("name", NAMES)
def test_cuda_equals_cpu(name):
    mod = modules()[name]
    q, k, v = data(37, 53, 2, 2)
    mask = torch.tensor(np.random.default_rng(8).random((37, 53)) > 0.3)
    outs, grads = [], []
    for device in ("cpu", "cuda"):
        mod.to(device)
        Q = t(q).to(device).requires_grad_()
        out = mod(Q, t(k).to(device), t(v).to(device), mask.to(device))
        out.pow(2).sum().backward()
        outs.append(out.detach().cpu())
        grads.append(Q.grad.cpu())
    torch.testing.assert_close(outs[0], outs[1], rtol=1e-9, atol=1e-10)
    torch.testing.assert_close(grads[0], grads[1], rtol=1e-8, atol=1e-10)


@CUDA
@pytest.mark.gpu
def test_cuda_fit_and_regressor():
    s = textbook(n=50, noise=0.5, seed=0)
    layer = KernelPooling(dtype=F64)
    fit(layer, s.x_train, s.y_train, epochs=150, lr=0.5, device="cuda")
    assert layer.log_bandwidth.device.type == "cuda"
    assert layer.bandwidth.item() == pytest.approx(cv_bandwidth(s.x_train, s.y_train), rel=0.02)
    model = AttentionPoolingRegressor(epochs=5, device="cuda").fit(s.x_train[:, None], s.y_train)
    assert model.predict(s.x_val[:, None]).shape == s.x_val.shape
