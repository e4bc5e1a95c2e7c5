"""The autograd machinery of the pooling modules: the chunked passes (online softmax over key
blocks, recomputed block by block in backward), the fused SDPA path, and the weights for inspection."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from nadaraya.backends.reference import block_sizes as _block_sizes
from nadaraya.nn._scores import Scorer, _fill, _finite_inputs, _Mask
from nadaraya.partials import Partials, merge

#: the largest key block of the layers (the NumPy reference takes larger ones)
_MAX_KEYS = 1024


def block_sizes(batch: int, m: int, n: int, width: int, itemsize: int) -> tuple[int, int]:
    """Query and key block sizes whose (B, bq, bk, width) temporaries fit the working memory
    (:func:`nadaraya.backends.reference.block_sizes` with a batch and a width per pair)."""
    return _block_sizes(m, n, itemsize, per_pair=max(1, batch) * max(1, width), max_keys=_MAX_KEYS)


@dataclass(frozen=True)
class Plan:
    """One chunked call: how blocks are scored, which pairs are allowed, and the block sizes."""

    scorer: Scorer
    allowed: _Mask
    blocks: tuple[int, int]


# --------------------------------------------------------------------------------------------
# The chunked passes
# --------------------------------------------------------------------------------------------


def _chunked_forward(
    plan: Plan, qa: Tensor, ka: Tensor, values: Tensor, params: Sequence[Tensor]
) -> tuple[Tensor, Tensor]:
    """Pooled values (B, m, p) and per query the log-sum-exp of the log weights (log-domain
    scores) or the sum of the weights; NaN rows for empty windows.

    Plain torch operations over blocks of queries and keys: without autograd it is the fast
    forward, with autograd (the double-backward recomputation) it is differentiable any
    number of times; an empty window gives NaN but no NaN in any gradient.
    """
    scorer, allowed = plan.scorer, plan.allowed
    batch, m, _ = qa.shape
    n, p = ka.shape[1], values.shape[-1]
    bq, bk = plan.blocks
    outs, stats = [], []
    for q0 in range(0, m, bq):
        q1 = min(m, q0 + bq)
        start = -math.inf if scorer.log_domain else 0.0
        acc = Partials(values.new_full((batch, q1 - q0), start), values.new_zeros(batch, q1 - q0),
                       values.new_zeros(batch, q1 - q0, p))
        for k0 in range(0, n, bk):
            k1 = min(n, k0 + bk)
            s = _fill(scorer.fn(qa[:, q0:q1], ka[:, k0:k1], *params), allowed.block(q0, q1, k0, k1),
                      scorer.log_domain)
            if scorer.log_domain:
                top = s.amax(-1)
                s = torch.exp(s - torch.where(torch.isfinite(top), top, 0.0)[..., None])
            else:
                top = torch.zeros_like(acc.shift)
            # the one merge of nadaraya.partials, on torch tensors
            acc = merge(acc, Partials(top, s.sum(-1), s @ values[:, k0:k1]), xp=torch)
        some = acc.weight > 0
        safe = torch.where(some, acc.weight, 1.0)
        outs.append(torch.where(some[..., None], acc.value / safe[..., None], math.nan))  # empty: NaN
        stats.append(acc.shift + torch.log(acc.weight) if scorer.log_domain else acc.weight)
    if not outs:
        return values.new_zeros(batch, 0, p), values.new_zeros(batch, 0)
    return torch.cat(outs, dim=1), torch.cat(stats, dim=1)


def _recomputed_grads(
    plan: Plan, inputs: Sequence[Tensor], needs: Sequence[bool], grad_out: Tensor
) -> list[Tensor | None]:
    """Gradients for a double backward: the forward recomputed with autograd, then
    ``torch.autograd.grad(..., create_graph=True)``, so the gradients are themselves
    differentiable (in the inputs and in ``grad_out``). It holds the recomputed graph:
    O(m n) memory, as any double backward through attention does; the first-order backward
    never takes this way."""
    qa, ka, values, *params = inputs
    wanted = [t for t, w in zip(inputs, needs) if w and t.requires_grad]
    if not wanted:
        return [None] * len(inputs)
    with torch.enable_grad():
        qs, ks, mask = _finite_inputs(qa, ka, plan.allowed)
        out, _ = _chunked_forward(Plan(plan.scorer, mask, plan.blocks), qs, ks, values, params)
        go = torch.where(torch.isnan(out), 0.0, grad_out)
        grads = torch.autograd.grad(out, wanted, go, create_graph=True, allow_unused=True)
    found = iter(grads)
    result: list[Tensor | None] = []
    for t, w in zip(inputs, needs):
        if w and t.requires_grad:
            g = next(found)
            result.append(torch.zeros_like(t) if g is None else g)
        else:
            result.append(None)
    return result


def _chunked_backward(
    plan: Plan, saved: Sequence[Tensor], needs: Sequence[bool], grad_out: Tensor
) -> tuple[Tensor | None, ...]:
    """First-order gradients of :func:`_chunked_forward`, ``saved`` being ``(qa, ka, values, out,
    stat, *params)`` and ``needs`` whether each of ``(qa, ka, values, *params)`` wants one.

    Each block's scores are recomputed and ``dL/ds = P * (dO . v - dO . O)`` is backpropagated
    through them (FlashAttention's backward), so memory stays at one block.
    """
    qa, ka, values, out, stat, *params = saved
    scorer = plan.scorer
    bq, bk = plan.blocks
    m, n = qa.shape[1], ka.shape[1]
    need_q, need_k, need_v = needs[:3]
    need_p = needs[3:]
    gq, gk, gv = torch.zeros_like(qa), torch.zeros_like(ka), torch.zeros_like(values)
    gp = [torch.zeros_like(t) for t in params]
    qs, ks, allowed = _finite_inputs(qa, ka, plan.allowed)
    grad_out = torch.where(torch.isnan(out), 0.0, grad_out)  # empty windows: no gradient
    dot = (grad_out * torch.nan_to_num(out)).sum(-1)
    if scorer.log_domain:
        scale = torch.where(torch.isfinite(stat), stat, math.inf)  # P = exp(s - lse)
    else:
        scale = torch.where(stat > 0, 1.0 / stat, 0.0)  # P = w / W
    wanted = [need_q, need_k, *need_p]
    for q0 in range(0, m, bq):
        q1 = min(m, q0 + bq)
        go, dq = grad_out[:, q0:q1], dot[:, q0:q1, None]
        sc = scale[:, q0:q1, None]
        for k0 in range(0, n, bk):
            k1 = min(n, k0 + bk)
            inputs = [qs[:, q0:q1].detach(), ks[:, k0:k1].detach(), *(t.detach() for t in params)]
            for t, w in zip(inputs, wanted):
                t.requires_grad_(w)
            with torch.enable_grad():
                s = _fill(scorer.fn(*inputs[:2], *inputs[2:]), allowed.block(q0, q1, k0, k1),
                          scorer.log_domain)
            v = values[:, k0:k1]
            if scorer.log_domain:
                prob = torch.exp(s.detach() - sc)
                ds = prob * (go @ v.transpose(-1, -2) - dq)
            else:
                prob = s.detach() * sc
                ds = sc * (go @ v.transpose(-1, -2) - dq)
            if need_v:
                gv[:, k0:k1] += prob.transpose(-1, -2) @ go
            targets = [(i, t) for i, (t, w) in enumerate(zip(inputs, wanted)) if w]
            if not targets or not s.requires_grad:  # e.g. the constant kernel: no parameters
                continue
            grads = torch.autograd.grad(s, [t for _, t in targets], ds, allow_unused=True)
            for (i, _), g in zip(targets, grads):
                if g is None:
                    continue
                if i == 0:
                    gq[:, q0:q1] += g
                elif i == 1:
                    gk[:, k0:k1] += g
                else:
                    gp[i - 2] += g
    return (gq if need_q else None, gk if need_k else None,
            gv if need_v else None, *(g if w else None for g, w in zip(gp, need_p)))


def _sdpa(q1: Tensor, k1: Tensor, v: Tensor, allowed: Tensor | None) -> Tensor:
    """``scaled_dot_product_attention`` with scale 1, in the layout its fused kernels take.

    Inputs are made 4-D (B, 1, L, E) and the value and query head sizes equal (zeros pad the
    narrower: zero columns of q' and k' add nothing to a dot product, zero columns of v are
    cut from the output). With 3-D inputs or unequal head sizes torch's CPU dispatcher silently
    falls back to the math path that builds the (m, n) matrix.
    """
    p, e = v.shape[-1], q1.shape[-1]
    if p < e:
        v = F.pad(v, (0, e - p))
    elif e < p:
        q1, k1 = F.pad(q1, (0, p - e)), F.pad(k1, (0, p - e))
    mask4 = None if allowed is None else allowed[:, None]
    out = F.scaled_dot_product_attention(q1[:, None], k1[:, None], v[:, None], attn_mask=mask4, scale=1.0)
    out = out[:, 0, :, :p]
    if allowed is not None:  # the fused path returns 0 for a query with no key; the core says NaN
        out = torch.where(allowed.any(-1, keepdim=True), out, math.nan)
    return out

# --------------------------------------------------------------------------------------------
# The autograd Functions of the two paths: key chunks and fused SDPA
# --------------------------------------------------------------------------------------------


class _ChunkedPool(torch.autograd.Function):
    """Attention pooling over blocks of queries and keys, never holding more than one block.

    Forward keeps per query a running maximum of the log weights (log-domain scores) or
    plain sums (non-negative weights), as :class:`nadaraya.partials.Partials` does, and
    returns the pooled values and that statistic (not differentiable). Backward recomputes
    each block's scores and backpropagates ``dL/ds = P * (dO . v - dO . O)`` through them
    (FlashAttention's backward), so memory stays at one block. A double backward
    (``create_graph=True``) recomputes the forward with autograd instead, so second
    derivatives are exact.
    """

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any, plan: Plan, qa: Tensor, ka: Tensor, values: Tensor, *params: Tensor
    ) -> tuple[Tensor, Tensor]:
        out, stat = _chunked_forward(plan, qa, ka, values, params)
        ctx.plan = plan
        ctx.save_for_backward(qa, ka, values, out, stat, *params)
        ctx.mark_non_differentiable(stat)
        return out, stat

    @staticmethod
    def backward(ctx: Any, grad_out: Tensor, grad_stat: Tensor | None = None) -> tuple[Tensor | None, ...]:
        qa, ka, values, _out, _stat, *params = ctx.saved_tensors
        needs = ctx.needs_input_grad[1:]
        if torch.is_grad_enabled():  # create_graph=True: gradients that are differentiable again
            grads = _recomputed_grads(ctx.plan, [qa, ka, values, *params], needs, grad_out)
        else:
            grads = list(_chunked_backward(ctx.plan, ctx.saved_tensors, needs, grad_out))
        return (None, *grads)


class _SdpaPool(torch.autograd.Function):
    """The fused path (:func:`torch.nn.functional.scaled_dot_product_attention`) with a
    double backward.

    Forward runs the fused kernel on detached inputs with autograd on, so the first-order
    backward is torch's fused backward, unchanged; torch has no derivative of that backward,
    so a double backward (``create_graph=True``) recomputes the same weights with the
    scorer's own formula (the chunked forward, with autograd) instead.
    """

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any, scorer: Scorer, allowed: Tensor | None, qa: Tensor, ka: Tensor, values: Tensor
    ) -> Tensor:
        assert scorer.sdpa is not None
        inner = [t.detach().requires_grad_(t.requires_grad) for t in (qa, ka, values)]
        with torch.enable_grad():
            q1, k1 = scorer.sdpa(inner[0], inner[1])
            out = _sdpa(q1, k1, inner[2], allowed)
        ctx.scorer, ctx.allowed, ctx.inner, ctx.out = scorer, allowed, inner, out
        ctx.save_for_backward(qa, ka, values)
        return out.detach()

    @staticmethod
    def backward(ctx: Any, grad_out: Tensor) -> tuple[Tensor | None, ...]:
        needs = ctx.needs_input_grad[2:5]
        if torch.is_grad_enabled():  # create_graph=True
            qa, ka, values = ctx.saved_tensors
            batch, m, _ = qa.shape
            blocks = block_sizes(batch, m, ka.shape[1], ctx.scorer.width, qa.element_size())
            plan = Plan(ctx.scorer, _Mask(ctx.allowed, None), blocks)
            return (None, None, *_recomputed_grads(plan, [qa, ka, values], needs, grad_out))
        wanted = [t for t, w in zip(ctx.inner, needs) if w]
        if not wanted or not ctx.out.requires_grad:
            return (None, None, None, None, None)
        go = torch.where(torch.isnan(ctx.out), 0.0, grad_out)
        found = iter(torch.autograd.grad(ctx.out, wanted, go, retain_graph=True, allow_unused=True))
        grads = [(next(found) if w else None) for w in needs]
        grads = [torch.zeros_like(t) if (w and g is None) else g for t, g, w in zip(ctx.inner, grads, needs)]
        return (None, None, *grads)


# --------------------------------------------------------------------------------------------
# The weights for inspection
# --------------------------------------------------------------------------------------------


def _weights(scorer: Scorer, qa: Tensor, ka: Tensor, params: Sequence[Tensor], allowed: _Mask) -> Tensor:
    """The (B, m, n) attention weights, by query blocks; NaN rows for empty windows."""
    batch, m, _ = qa.shape
    n = ka.shape[1]
    bq, _ = block_sizes(batch, m, 1, n * scorer.width, qa.element_size())
    rows = []
    for q0 in range(0, m, bq):
        q1 = min(m, q0 + bq)
        s = _fill(scorer.fn(qa[:, q0:q1], ka, *params), allowed.block(q0, q1, 0, n), scorer.log_domain)
        rows.append(torch.softmax(s, dim=-1) if scorer.log_domain else s / s.sum(-1, keepdim=True))
    return torch.cat(rows, dim=1) if rows else qa.new_zeros(batch, 0, n)
