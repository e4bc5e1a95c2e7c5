"""Half precision on the chunked path (which the docs recommend for float16/bfloat16): the
scores, sums and gradients are taken in float32, so gradients through compact kernels are those
of float32 on the same (rounded) inputs, never zero because ``q / h`` was rounded in bfloat16."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from nadaraya.nn import AdditiveAttentionPooling, KernelPooling  # noqa: E402


def _grads(kernel, h, dtype, q, k, v, target):
    layer = KernelPooling(kernel, bandwidth=h, method="chunked", dtype=dtype)
    # the same bandwidth in every dtype: the one the half-precision layer holds
    with torch.no_grad():
        layer.log_bandwidth.copy_(torch.log(torch.tensor(h)).to(torch.bfloat16).to(dtype))
    qq, kk, vv = (t.to(dtype).detach().requires_grad_() for t in (q, k, v))
    out = layer(qq, kk, vv)
    ((out.double() - target) ** 2).mean().backward()
    grads = [layer.log_bandwidth.grad, qq.grad, kk.grad, vv.grad]
    return out.double(), [g.double() for g in grads]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("kernel", ["epanechnikov", "tricube", "gaussian"])
@pytest.mark.parametrize(("offset", "h"), [(20.0, 0.3), (1000.0, 5.0)])
def test_half_gradients_are_float32_gradients_of_the_same_inputs(dtype, kernel, offset, h):
    gen = torch.Generator().manual_seed(0)
    # inputs exactly representable in both half dtypes, so float32 sees the same numbers
    q = (torch.rand(100, 1, generator=gen) * 5 + offset).to(torch.bfloat16).to(dtype).double()
    k = (torch.rand(400, 1, generator=gen) * 5 + offset).to(torch.bfloat16).to(dtype).double()
    v = torch.sin(k[:, 0]).to(torch.bfloat16).to(dtype).double()
    target = torch.cos(q[:, 0])
    want_out, want = _grads(kernel, h, torch.float32, q, k, v, target)
    got_out, got = _grads(kernel, h, dtype, q, k, v, target)
    eps = torch.finfo(dtype).eps
    assert torch.isfinite(got_out).all()
    assert (got_out - want_out).abs().max() <= 4 * eps * v.abs().max()
    for name, g, w in zip(("log h", "queries", "keys", "values"), got, want):
        assert w.norm() > 0, name
        assert torch.isfinite(g).all(), name
        assert (g - w).norm() <= 8 * eps * w.norm(), (name, float(g.norm()), float(w.norm()))


def test_half_chunked_keeps_the_dtype_of_outputs_weights_and_gradients():
    q = torch.rand(7, 1, dtype=torch.bfloat16, requires_grad=True)
    k = torch.rand(30, 1, dtype=torch.bfloat16)
    v = torch.rand(30, 2, dtype=torch.bfloat16)
    layer = KernelPooling("epanechnikov", bandwidth=0.5, method="chunked", dtype=torch.bfloat16)
    out, w = layer(q, k, v, return_weights=True)
    assert out.dtype == w.dtype == torch.bfloat16
    out.sum().backward()
    assert q.grad.dtype == layer.log_bandwidth.grad.dtype == torch.bfloat16
    add = AdditiveAttentionPooling(1, 4).to(torch.bfloat16)  # always chunked
    out = add(q, k, v)
    assert out.dtype == torch.bfloat16
    out.sum().backward()
    assert all(p.grad is not None and p.grad.dtype == torch.bfloat16 for p in add.parameters())


def test_second_derivatives_in_half_precision():
    """create_graph=True recomputes the forward: in float32 too, so a Hessian in log h exists."""
    gen = torch.Generator().manual_seed(1)
    k = (torch.rand(200, 1, generator=gen) * 5 + 20).to(torch.bfloat16)
    v = torch.sin(k[:, 0].float()).to(torch.bfloat16)
    layer = KernelPooling("tricube", bandwidth=0.4, method="chunked", dtype=torch.bfloat16)
    loss = ((layer(k, k, v, exclude=torch.arange(200)).float() - v.float()) ** 2).nanmean()
    (g,) = torch.autograd.grad(loss, layer.log_bandwidth, create_graph=True)
    (hess,) = torch.autograd.grad(g, layer.log_bandwidth)
    assert float(g.detach()) != 0.0 and torch.isfinite(hess).all()
