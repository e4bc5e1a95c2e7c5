"""KernelPooling's metrics (diagonal, low_rank, full), heads and categorical lambdas vs dense attention."""

from __future__ import annotations

import io

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import nadaraya  # noqa: E402
from nadaraya.nn import KernelPooling  # noqa: E402

F64 = torch.float64
CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
METRICS = ["diagonal", "low_rank", "full"]
PATHS = ["auto", "chunked"]


def tensors(*shapes, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(*s, generator=g, dtype=F64) for s in shapes]


def layer_for(metric, d=3, seed=1, **kw):
    """A float64 layer of ``metric`` on d features, its map moved off the starting point."""
    torch.manual_seed(seed)
    if metric == "diagonal":
        layer = KernelPooling(bandwidth=[0.7, 1.3, 0.9][:d], dtype=F64, **kw)
    elif metric == "low_rank":
        layer = KernelPooling(metric="low_rank", n_components=2, in_features=d, dtype=F64, **kw)
    else:
        layer = KernelPooling(metric="full", in_features=d, dtype=F64, **kw)
    with torch.no_grad():
        for p in layer.parameters():
            p.add_(0.3 * torch.randn(p.shape, dtype=F64, generator=torch.Generator().manual_seed(seed + 7)))
    return layer


def map_of(layer):
    """The dense (heads, k, d) map A of a layer: diag(1 / h) for the diagonal metric."""
    if layer.metric == "diagonal":
        w = (-layer.log_bandwidth.detach()).exp()
        heads = layer.heads
        w = w.reshape(heads, -1)
        d = w.shape[-1]
        return torch.stack([torch.diag(w[i]) for i in range(heads)]) if d > 1 else w[:, :, None]
    a = layer.components.detach()
    return a.reshape(layer.heads, *a.shape[-2:])


def dense(q, k, v, a, log_lam=None, ordered=(), unordered=(), cont=None, profile=None):
    """softmax over keys of ``-|A (q - k)|^2 / 2`` (+ ``sum_j log lambda_j * dist_j``), written out.

    q (B, m, d), k (B, n, d), v (B, n, p), a (k, dc); with ``profile`` (a kernel's profile) the
    weights are the product of ``profile(A (q - k))`` instead, normalised.
    """
    cont = list(range(q.shape[-1])) if cont is None else cont
    diff = q[:, :, None, :] - k[:, None, :, :]  # (B, m, n, d)
    u = diff[..., cont] @ a.T  # (B, m, n, k)
    if profile is not None:
        w = profile(u).prod(-1)
        return (w @ v) / w.sum(-1, keepdim=True)
    s = -0.5 * (u * u).sum(-1)
    for j, col in enumerate(ordered):
        s = s + log_lam[j] * diff[..., col].abs()
    for j, col in enumerate(unordered):
        s = s + log_lam[len(ordered) + j] * (diff[..., col] != 0).to(F64)
    return torch.softmax(s, dim=-1) @ v


# ------------------------------------------------------------------------------------ values


@pytest.mark.parametrize("method", PATHS)
@pytest.mark.parametrize("metric", METRICS)
def test_values_equal_dense_softmax_attention(metric, method):
    q, k, v = tensors((2, 5, 3), (2, 11, 3), (2, 11, 2))
    layer = layer_for(metric, method=method)
    out, w = layer(q, k, v, return_weights=True)
    ref = dense(q, k, v, map_of(layer)[0])
    assert out.shape == (2, 5, 2) and w.shape == (2, 5, 11)
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-10)
    torch.testing.assert_close(w @ v, ref, rtol=0, atol=1e-10)
    assert layer.path(q, k) == ("sdpa" if method == "auto" else "chunked")
    a = map_of(layer)[0]
    assert a.shape == {"diagonal": (3, 3), "low_rank": (2, 3), "full": (3, 3)}[metric]


@pytest.mark.parametrize("metric", ["low_rank", "full"])
def test_compact_kernel_takes_the_map_too(metric):
    q, k, v = tensors((7, 3), (30, 3), (30,), seed=2)
    torch.manual_seed(3)
    rows = 2 if metric == "low_rank" else None
    layer = KernelPooling("epanechnikov", 2.5, metric=metric, n_components=rows, in_features=3, dtype=F64)
    kern = nadaraya.kernels.get("epanechnikov")
    ref = dense(q[None], k[None], v[None, :, None], map_of(layer)[0],
                profile=lambda u: torch.as_tensor(kern(u.numpy())))[0, :, 0]
    out = layer(q, k, v)
    assert out.shape == (7,)
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-10, equal_nan=True)


def test_blocks_and_masks_do_not_change_the_result(monkeypatch):
    from nadaraya.nn import _pooling

    q, k, v = tensors((33, 3), (57, 3), (57, 2), seed=4)
    mask = torch.tensor(np.random.default_rng(9).random((33, 57)) > 0.3)
    layer = layer_for("low_rank", method="chunked", heads=2, var_types="cco")

    def run():
        Q, K = q.clone().requires_grad_(), k.clone().requires_grad_()
        out = layer(Q, K, v, mask)
        return [out, *torch.autograd.grad(out.sum(), [Q, K, *layer.parameters()])]

    whole = run()
    monkeypatch.setattr(_pooling, "block_sizes", lambda *args: (4, 7))
    for a, b in zip(whole, run()):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


# ------------------------------------------------------------------------------------- heads


@pytest.mark.parametrize("method", PATHS)
@pytest.mark.parametrize("metric", METRICS)
def test_heads_concat_and_mean(metric, method):
    q, k, v = tensors((2, 4, 3), (2, 9, 3), (2, 9, 2), seed=5)
    cat = layer_for(metric, method=method, heads=3)
    mean = layer_for(metric, method=method, heads=3, combine="mean")
    mean.load_state_dict(cat.state_dict())
    a = map_of(cat)
    refs = [dense(q, k, v, a[h]) for h in range(3)]
    assert not torch.allclose(refs[0], refs[1])  # the heads differ from the start
    out = cat(q, k, v)
    assert out.shape == (2, 4, 6)
    torch.testing.assert_close(out, torch.cat(refs, -1), rtol=0, atol=1e-10)
    torch.testing.assert_close(mean(q, k, v), sum(refs) / 3, rtol=0, atol=1e-10)
    _, w = cat(q, k, v, return_weights=True)
    assert w.shape == (2, 3, 4, 9)
    torch.testing.assert_close(w[:, 1] @ v, refs[1], rtol=0, atol=1e-10)
    # 1-D values: a column per head (concat), or one (mean)
    assert cat(q, k, v[..., 0]).shape == (2, 4, 3) and mean(q, k, v[..., 0]).shape == (2, 4)
    torch.testing.assert_close(cat(q, k, v[..., 0]), torch.stack([r[..., 0] for r in refs], -1),
                               rtol=0, atol=1e-10)


def test_heads_with_leave_one_out_and_batch_broadcast():
    q, v = tensors((3, 8, 2), (3, 8), seed=6)
    layer = KernelPooling(metric="full", in_features=2, heads=2, combine="mean", dtype=F64)
    excl = torch.arange(8)
    got = layer(q, q, v, exclude=excl)
    a = map_of(layer)
    refs = []
    for h in range(2):
        u = (q[:, :, None] - q[:, None]) @ a[h].T
        s = (-0.5 * (u * u).sum(-1)).masked_fill(torch.eye(8, dtype=torch.bool), -torch.inf)
        refs.append((torch.softmax(s, -1) @ v[..., None])[..., 0])
    torch.testing.assert_close(got, (refs[0] + refs[1]) / 2, rtol=0, atol=1e-10)


# ------------------------------------------------------------------------ categorical lambdas


@pytest.mark.parametrize("method", PATHS)
@pytest.mark.parametrize("metric", METRICS)
def test_categorical_lambdas_values(metric, method):
    rng = np.random.default_rng(7)
    xc = torch.tensor(rng.normal(size=(2, 14, 2)))
    cats = torch.tensor(rng.integers(0, 3, (2, 14, 2)), dtype=F64)
    x = torch.cat([xc[..., :1], cats[..., :1], xc[..., 1:], cats[..., 1:]], -1)  # "cocu"
    v = torch.tensor(rng.normal(size=(2, 14, 3)))
    kw = {"diagonal": {}, "low_rank": {"metric": "low_rank", "n_components": 1},
          "full": {"metric": "full"}}[metric]
    torch.manual_seed(8)
    layer = KernelPooling(var_types="cocu", lambdas=[0.3, 0.6], method=method, dtype=F64, **kw)
    assert layer.path(x, x) == "chunked"
    torch.testing.assert_close(layer.lambdas, torch.tensor([0.3, 0.6], dtype=F64))
    a = map_of(layer)[0] if metric != "diagonal" else torch.eye(2, dtype=F64)
    ref = dense(x[:, :5], x, v, a, torch.log(layer.lambdas.detach()), ordered=[1], unordered=[3], cont=[0, 2])
    torch.testing.assert_close(layer(x[:, :5], x, v), ref, rtol=0, atol=1e-10)


def test_categorical_lambdas_are_learned_with_the_metric():
    """y follows a 1-D projection of 3 continuous columns and one categorical column; a second
    categorical column is noise. Training on the leave-one-out loss lowers it, drives the
    relevant column's lambda down (categories kept apart), the noise column's up, and turns
    the map toward the projection."""
    from nadaraya.nn import fit

    rng = np.random.default_rng(0)
    n = 80
    xc = rng.normal(size=(n, 3))
    z = rng.integers(0, 3, n)
    noise = rng.integers(0, 4, n)
    y = np.sin(xc @ np.array([1.5, -1.0, 0.0])) + 1.5 * (z == 1)
    X = np.column_stack([xc, z, noise])
    torch.manual_seed(0)
    layer = KernelPooling(metric="low_rank", n_components=1, var_types="cccuu", lambdas=0.5, dtype=F64)
    history = fit(layer, X, y, epochs=60, lr=0.05, optimizer="adam", seed=0)
    lam = layer.lambdas.detach()
    assert history["loss"][-1] < 0.3 * history["loss"][0]
    assert lam[0] < 0.2 and lam[1] > 0.7, lam  # both started at 0.5
    a = layer.components.detach()[0]
    truth = torch.tensor([1.5, -1.0, 0.0], dtype=F64)
    assert abs(a @ truth) / (a.norm() * truth.norm()) > 0.95  # the metric found the direction


# ----------------------------------------------------------------------------- gradients


def _functional(layer, names, fixed=None):
    """A function of (q, k, v, *parameters) for gradcheck; ``fixed`` appends categorical columns."""

    def f(q, k, v, *params):
        if fixed is not None:
            q, k = torch.cat([q, fixed[0]], -1), torch.cat([k, fixed[1]], -1)
        return torch.func.functional_call(layer, dict(zip(names, params)), (q, k, v))

    return f


@pytest.mark.parametrize("method", PATHS)
@pytest.mark.parametrize("metric", METRICS)
def test_gradcheck_and_gradgradcheck(metric, method):
    q, k, v = tensors((2, 3, 3), (2, 4, 3), (2, 4, 2), seed=9)
    layer = layer_for(metric, method=method, heads=2)
    names = [n for n, _ in layer.named_parameters()]
    inputs = [t.requires_grad_() for t in (q, k, v, *(p.detach().clone() for p in layer.parameters()))]
    f = _functional(layer, names)
    assert torch.autograd.gradcheck(f, inputs, atol=1e-7)
    assert torch.autograd.gradgradcheck(f, inputs, atol=1e-6)


def test_gradcheck_categorical_lambdas():
    q, k, v = tensors((1, 3, 2), (1, 5, 2), (1, 5, 1), seed=10)
    cq = torch.tensor([[[0.0, 1.0], [2.0, 0.0], [1.0, 1.0]]], dtype=F64)
    ck = torch.tensor([[[0.0, 1.0], [1.0, 0.0], [2.0, 1.0], [0.0, 0.0], [1.0, 1.0]]], dtype=F64)
    torch.manual_seed(11)
    layer = KernelPooling(metric="full", var_types="ccou", lambdas=[0.4, 0.7], heads=2, dtype=F64)
    names = [n for n, _ in layer.named_parameters()]
    assert names == ["components", "logit_lambda"]
    inputs = [t.requires_grad_() for t in (q, k, v, *(p.detach().clone() for p in layer.parameters()))]
    f = _functional(layer, names, fixed=(cq, ck))
    assert torch.autograd.gradcheck(f, inputs, atol=1e-7)
    assert torch.autograd.gradgradcheck(f, inputs, atol=1e-6)


# ----------------------------------------------------------------- state, compile, devices


@pytest.mark.parametrize("metric", METRICS)
def test_state_dict_round_trip(metric):
    q, k, v = tensors((4, 3), (9, 3), (9, 2), seed=12)
    a = layer_for(metric, heads=2, var_types="ccu" if metric != "diagonal" else None)
    b = layer_for(metric, seed=5, heads=2, var_types="ccu" if metric != "diagonal" else None)
    assert not torch.allclose(a(q, k, v), b(q, k, v))
    buf = io.BytesIO()
    torch.save(a.state_dict(), buf)
    buf.seek(0)
    b.load_state_dict(torch.load(buf, weights_only=True))
    torch.testing.assert_close(a(q, k, v), b(q, k, v), rtol=0, atol=0)
    want = {"diagonal": ["log_bandwidth"], "low_rank": ["components", "logit_lambda"],
            "full": ["components", "logit_lambda"]}[metric]
    assert list(a.state_dict()) == want


def test_default_layer_keeps_its_state_dict():
    """The diagonal metric is the layer as it was: the same keys and shapes, and an old
    state_dict (written out here) loads strictly."""
    for layer, shape in ((KernelPooling(), ()), (KernelPooling(bandwidth=[1.0, 2.0]), (2,)),
                         (KernelPooling(per_feature=3), (3,)), (KernelPooling(learnable=False), ())):
        state = layer.state_dict()
        assert list(state) == ["log_bandwidth"] and state["log_bandwidth"].shape == shape
        old = {"log_bandwidth": torch.full(shape, 0.25)}
        layer.load_state_dict(old, strict=True)
        torch.testing.assert_close(layer.log_bandwidth, old["log_bandwidth"])
        assert layer.metric == "diagonal" and layer.heads == 1
    want = "KernelPooling(kernel='gaussian', bandwidth=2, method='auto')"
    assert repr(KernelPooling(bandwidth=2.0)) == want


@pytest.mark.parametrize("metric", METRICS)
def test_torch_compile(metric):
    dynamo = pytest.importorskip("torch._dynamo")
    q, k, v = tensors((5, 3), (8, 3), (8, 2), seed=13)
    layer = layer_for(metric, method="chunked", heads=2)
    want = layer(q, k, v)
    (g_want,) = torch.autograd.grad(want.sum(), [next(layer.parameters())])
    dynamo.reset()
    try:
        compiled = torch.compile(layer, backend="aot_eager")
        got = compiled(q, k, v)
    except Exception as exc:  # a CPU build without a working compile stack
        pytest.skip(f"torch.compile is unavailable here: {type(exc).__name__}: {exc}")
    (g_got,) = torch.autograd.grad(got.sum(), [next(layer.parameters())])
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(g_got, g_want, rtol=1e-12, atol=1e-12)


def test_far_query_gets_the_nearest_key_in_the_mapped_space():
    k = torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]], dtype=F64)
    v = torch.tensor([1.0, 2.0, 3.0], dtype=F64)
    layer = KernelPooling(metric="low_rank", n_components=1, in_features=2,
                          components=torch.tensor([[0.0, 1.0]]), dtype=F64)
    q = torch.tensor([[0.0, 1e200]], dtype=F64)  # nearest in A q: the third key
    out = layer(q, k, v)
    assert out.tolist() == [3.0]


def test_memory_stays_far_below_the_dense_weights():
    """Forward and backward of a two-head low-rank layer with a categorical column hold
    blocks, never the (heads, m, n) weights."""
    from torch.profiler import ProfilerActivity, profile

    m = n = 1024
    torch.manual_seed(0)
    layer = KernelPooling(metric="low_rank", n_components=2, var_types="cccu", heads=2, combine="mean")
    x = torch.randn(n, 4)
    x[:, 3] = torch.randint(0, 3, (n,)).float()
    q = x.clone().requires_grad_()
    v = torch.randn(n, 1)
    with nadaraya.config_context(working_memory=2), \
            profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        layer(q, x, v, exclude=torch.arange(n)).sum().backward()
    events = sorted((e.start_ns(), e.nbytes()) for e in prof.profiler.kineto_results.events()
                    if e.name() == "[memory]")
    peak = int(np.max(np.cumsum([b for _, b in events])))
    dense = 2 * m * n * 4
    assert peak < dense / 4, f"peak {peak / 2**20:.1f} MiB vs dense (heads, m, n) {dense / 2**20:.0f} MiB"
    assert torch.isfinite(layer.logit_lambda.grad).all() and layer.components.grad.abs().sum() > 0


@CUDA
@pytest.mark.parametrize("metric", METRICS)
def test_cuda_equals_cpu(metric):
    q, k, v = tensors((2, 6, 3), (2, 20, 3), (2, 20, 2), seed=14)
    layer = layer_for(metric, heads=2)
    want = layer(q, k, v)
    gpu = layer.to("cuda")
    got = gpu(q.cuda(), k.cuda(), v.cuda())
    torch.testing.assert_close(got.cpu(), want, rtol=1e-9, atol=1e-9)
    gpu.method = "chunked"
    torch.testing.assert_close(gpu(q.cuda(), k.cuda(), v.cuda()).cpu(), want, rtol=1e-9, atol=1e-9)


# ------------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"metric": "cosine"}, "metric='cosine' is not valid"),
        ({"metric": "low_rank", "in_features": 3}, "needs n_components"),
        ({"metric": "low_rank", "n_components": 0, "in_features": 3}, r"n_components, an int in \[1, 3\]"),
        ({"metric": "low_rank", "n_components": 4, "in_features": 3}, r"n_components, an int in \[1, 3\]"),
        ({"metric": "full", "n_components": 2, "in_features": 3}, "use metric='low_rank'"),
        ({"metric": "full"}, "needs in_features"),
        ({"n_components": 2}, "n_components=2 is for metric='low_rank'"),
        ({"heads": 0}, "heads must be a positive int"),
        ({"heads": 1.5}, "heads must be a positive int"),
        ({"combine": "sum"}, "combine='sum' is not valid"),
        ({"var_types": "cx"}, "has the letter 'x'"),
        ({"var_types": "uu"}, "no continuous column"),
        ({"var_types": "cu", "lambdas": 1.0}, r"lambdas must be one number in \(0, 1\)"),
        ({"var_types": "cu", "in_features": 3}, "has 2 letters but in_features=3"),
        ({"metric": "low_rank", "n_components": 1, "in_features": 3, "components": torch.zeros(2, 3)},
         "components must be finite"),
        ({"metric": "full", "components": [[1.0, torch.nan], [0.0, 1.0]]}, "components must be finite"),
    ],
)
def test_bad_options_name_the_argument(kwargs, match):
    with pytest.raises(ValueError, match=match):
        KernelPooling(**kwargs)


def test_inputs_of_the_wrong_width_are_refused():
    layer = KernelPooling(metric="low_rank", n_components=2, in_features=3)
    x = torch.zeros(4, 2)
    with pytest.raises(ValueError, match="takes 3 features"):
        layer(x, x, x[:, 0])
    mixed = KernelPooling(var_types="cu", per_feature=1)
    with pytest.raises(ValueError, match="takes 2 features"):
        mixed(torch.zeros(4, 3), torch.zeros(4, 3), torch.zeros(4))


def test_a_map_has_no_bandwidth():
    layer = KernelPooling(metric="full", in_features=2)
    assert not hasattr(layer, "bandwidth") and not hasattr(layer, "w") and not hasattr(layer, "log_bandwidth")
    torch.testing.assert_close(KernelPooling(bandwidth=2.0, heads=2, dtype=F64).bandwidth,
                               torch.tensor([2.0 / 2 ** 0.5, 2.0 * 2 ** 0.5], dtype=F64))  # a factor 2 apart


def test_a_starting_map_sizes_the_layer():
    a = np.array([[0.5, -1.0, 0.25], [0.0, 2.0, 1.0]])  # e.g. an MLKR's components_ times sqrt(2)
    layer = KernelPooling(metric="low_rank", components=a, dtype=F64)
    assert layer.components.shape == (2, 3)
    q, k, v = tensors((4, 3), (9, 3), (9, 2), seed=15)
    ref = dense(q[None], k[None], v[None], torch.tensor(a))[0]
    torch.testing.assert_close(layer(q, k, v), ref, rtol=0, atol=1e-10)
