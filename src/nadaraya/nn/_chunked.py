"""Attention pooling on tensors: scorers, masks, block sizes, the chunked passes, SDPA, the far limit."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from .._config import get_config
from ..kernels import Kernel
from ..partials import Partials, merge

#: the power of |u| by which a log-domain kernel's log-profile falls far from 0 (-u^2/2 for the
#: Gaussian, -|u| + ... for the Laplacian and logistic): which key is "nearest" in the limit
_FAR_POWER: dict[str, int] = {"gaussian": 2, "laplacian": 1, "logistic": 1}

#: how many block-sized scratch tensors one block may hold at once (the forward's and the
#: recomputation's temporaries); ``working_memory`` is divided by this to size the blocks.
_SCRATCH_TENSORS = 8


# --------------------------------------------------------------------------------------------
# Scores: how one block of queries scores one block of keys
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scorer:
    """How a module scores a block of (projected) queries against a block of (projected) keys.

    ``fn(qb, kb, *params)`` maps ``qb`` (B, bq, a) and ``kb`` (B, bk, a) to (B, bq, bk): log
    weights when ``log_domain`` (softmax attention), else non-negative weights. ``width`` is
    the size of the last axis of the largest temporary ``fn`` builds per (query, key) pair, to
    size the blocks. ``sdpa``, where given, maps (qa, ka) to (q', k') whose dot products are
    the log weights up to a per-query constant, so the fused attention kernels can compute it.
    """

    fn: Callable[..., Tensor]
    log_domain: bool
    width: int
    sdpa: Callable[[Tensor, Tensor], tuple[Tensor, Tensor]] | None = None


def _kernel_scorer(kernel: Kernel, d: int) -> Scorer:
    """Product kernel of ``u = qa - ka`` (inputs already divided by the bandwidth)."""
    if kernel.log_profile is not None:
        log_profile = kernel.log_profile

        def fn(qb: Tensor, kb: Tensor) -> Tensor:
            return log_profile(qb[:, :, None, :] - kb[:, None, :, :], xp=torch).sum(-1)

    else:
        profile = kernel.profile

        def fn(qb: Tensor, kb: Tensor) -> Tensor:
            return profile(qb[:, :, None, :] - kb[:, None, :, :], xp=torch).prod(-1)

    sdpa = _gaussian_augment if kernel.name == "gaussian" else None
    return Scorer(fn, kernel.log_profile is not None, 2 * d, sdpa)


def _gaussian_augment(qa: Tensor, ka: Tensor) -> tuple[Tensor, Tensor]:
    """The augmented-dimension identity: ``-|q - k|^2 / 2 = q'.k' - |q|^2 / 2``.

    ``q' = [q, 1]`` and ``k' = [k, -|k|^2 / 2]``; the ``-|q|^2 / 2`` term is the same for every
    key of a query and cancels in the softmax. The data are centred on the keys' mean first
    (the weights do not change under a common shift), so the cancellation between ``q.k`` and
    ``|k|^2 / 2`` loses as little as possible.
    """
    centre = ka.mean(dim=-2, keepdim=True).detach()
    qc, kc = qa - centre, ka - centre
    q1 = torch.cat([qc, torch.ones_like(qc[..., :1])], dim=-1)
    k1 = torch.cat([kc, -0.5 * (kc * kc).sum(-1, keepdim=True)], dim=-1)
    return q1, k1


def _additive_fn(qb: Tensor, kb: Tensor, w_v: Tensor) -> Tensor:
    z = qb[:, :, None, :] + kb[:, None, :, :]
    return z.tanh_() @ w_v  # in place: one (B, bq, bk, hidden) block less, autograd-safe


def _dot_fn(qb: Tensor, kb: Tensor) -> Tensor:
    return qb @ kb.transpose(-1, -2)


def _dot_identity(qa: Tensor, ka: Tensor) -> tuple[Tensor, Tensor]:
    return qa, ka


# --------------------------------------------------------------------------------------------
# Masks: a dense boolean mask and/or one excluded key per query (leave-one-out)
# --------------------------------------------------------------------------------------------


@dataclass
class _Mask:
    """Which keys each query may attend to: ``mask`` (B, m, n) True where allowed (or None),
    ``exclude`` (B, m) the index of one key left out per query (or None; -1 = none), and
    ``rows`` (B, m) / ``keys`` (B, n) False for whole queries / keys left out (or None)."""

    mask: Tensor | None
    exclude: Tensor | None
    rows: Tensor | None = None
    keys: Tensor | None = None

    def block(self, q0: int, q1: int, k0: int, k1: int) -> Tensor | None:
        """The (B, bq, bk) allowed-block, or None when every pair is allowed."""
        out = None if self.mask is None else self.mask[:, q0:q1, k0:k1]
        if self.exclude is not None:
            keys = torch.arange(k0, k1, device=self.exclude.device)
            keep = self.exclude[:, q0:q1, None] != keys
            out = keep if out is None else out & keep
        if self.rows is not None:
            out = self.rows[:, q0:q1, None] if out is None else out & self.rows[:, q0:q1, None]
        if self.keys is not None:
            out = self.keys[:, None, k0:k1] if out is None else out & self.keys[:, None, k0:k1]
        return out

    def dense(self, m: int, n: int) -> Tensor | None:
        return self.block(0, m, 0, n)

    def rows_of(self, bi: Tensor, ii: Tensor, n: int) -> Tensor:
        """(F, n): the keys that queries ``(bi, ii)`` (batch and query indices) may attend to."""
        out = torch.ones(bi.shape[0], n, dtype=torch.bool, device=bi.device)
        if self.mask is not None:
            out = out & self.mask[bi, ii]
        if self.exclude is not None:
            out = out & (self.exclude[bi, ii][:, None] != torch.arange(n, device=bi.device))
        if self.rows is not None:
            out = out & self.rows[bi, ii][:, None]
        if self.keys is not None:
            out = out & self.keys[bi]
        return out

    def has_key(self, batch: int, m: int, n: int, device: torch.device) -> Tensor:
        """(B, m): whether a query may attend to at least one key."""
        count = torch.full((batch, m), n, device=device)
        if self.mask is not None:
            count = self.mask.sum(-1).expand(batch, m)
        if self.exclude is not None:
            count = count - ((self.exclude >= 0) & (self.exclude < n)).long()
        return count > 0


def _finite_inputs(qa: Tensor, ka: Tensor, allowed: _Mask) -> tuple[Tensor, Tensor, _Mask]:
    """Queries and keys whose projected coordinates are not finite, replaced by 0 and left out.

    Such a query has no key of positive weight (every ``u`` is infinite) and such a key no
    weight for a finite query, so this changes no output; it keeps ``0 * inf = NaN`` out of the
    gradients of every other query and key (and of the parameters).
    """
    rows, keys = torch.isfinite(qa).all(-1), torch.isfinite(ka).all(-1)
    if bool(rows.all()) and bool(keys.all()):
        return qa, ka, allowed
    qa = torch.where(rows[..., None], qa, 0.0)
    ka = torch.where(keys[..., None], ka, 0.0)
    r = rows if allowed.rows is None else allowed.rows & rows
    k = keys if allowed.keys is None else allowed.keys & keys
    return qa, ka, _Mask(allowed.mask, allowed.exclude, r, k)


def _fill(s: Tensor, allowed: Tensor | None, log_domain: bool) -> Tensor:
    if allowed is None:
        return s
    return s.masked_fill(~allowed, -math.inf if log_domain else 0.0)


def _block_sizes(batch: int, m: int, n: int, width: int, itemsize: int) -> tuple[int, int]:
    """Query and key block sizes whose (B, bq, bk, width) temporaries fit the working memory."""
    budget = get_config()["working_memory"] * 2**20 / (_SCRATCH_TENSORS * itemsize)
    per_pair = max(1, batch) * max(1, width)
    pairs = max(1, int(budget // per_pair))
    bk = max(1, min(n, 1024, pairs))
    bq = max(1, min(m, pairs // bk))
    return bq, bk


# --------------------------------------------------------------------------------------------
# The chunked path: online softmax over key blocks, recomputed block by block in backward
# --------------------------------------------------------------------------------------------


def _chunked_forward(
    scorer: Scorer,
    allowed: _Mask,
    blocks: tuple[int, int],
    qa: Tensor,
    ka: Tensor,
    values: Tensor,
    params: Sequence[Tensor],
) -> tuple[Tensor, Tensor]:
    """Pooled values (B, m, p) and per query the log-sum-exp of the log weights (log-domain
    scores) or the sum of the weights; NaN rows for empty windows.

    Plain torch operations over blocks of queries and keys: without autograd it is the fast
    forward, with autograd (the double-backward recomputation) it is differentiable any
    number of times; an empty window gives NaN but no NaN in any gradient.
    """
    batch, m, _ = qa.shape
    n, p = ka.shape[1], values.shape[-1]
    bq, bk = blocks
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
    scorer: Scorer,
    allowed: _Mask,
    blocks: tuple[int, int],
    inputs: Sequence[Tensor],
    needs: Sequence[bool],
    grad_out: Tensor,
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
        qs, ks, mask = _finite_inputs(qa, ka, allowed)
        out, _ = _chunked_forward(scorer, mask, blocks, qs, ks, values, params)
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
    scorer: Scorer,
    allowed: _Mask,
    blocks: tuple[int, int],
    saved: Sequence[Tensor],
    needs: Sequence[bool],
    grad_out: Tensor,
) -> tuple[Tensor | None, ...]:
    """First-order gradients of :func:`_chunked_forward`, ``saved`` being ``(qa, ka, values, out,
    stat, *params)`` and ``needs`` whether each of ``(qa, ka, values, *params)`` wants one.

    Each block's scores are recomputed and ``dL/ds = P * (dO . v - dO . O)`` is backpropagated
    through them (FlashAttention's backward), so memory stays at one block.
    """
    qa, ka, values, out, stat, *params = saved
    bq, bk = blocks
    m, n = qa.shape[1], ka.shape[1]
    need_q, need_k, need_v = needs[:3]
    need_p = needs[3:]
    gq, gk, gv = torch.zeros_like(qa), torch.zeros_like(ka), torch.zeros_like(values)
    gp = [torch.zeros_like(t) for t in params]
    qs, ks, allowed = _finite_inputs(qa, ka, allowed)
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


# --------------------------------------------------------------------------------------------
# The fused path, the weights for inspection, and the limit for far queries
# --------------------------------------------------------------------------------------------


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


def _weights(scorer: Scorer, qa: Tensor, ka: Tensor, params: Sequence[Tensor], allowed: _Mask) -> Tensor:
    """The (B, m, n) attention weights, by query blocks; NaN rows for empty windows."""
    batch, m, _ = qa.shape
    n = ka.shape[1]
    bq, _ = _block_sizes(batch, m, 1, n * scorer.width, qa.element_size())
    rows = []
    for q0 in range(0, m, bq):
        q1 = min(m, q0 + bq)
        s = _fill(scorer.fn(qa[:, q0:q1], ka, *params), allowed.block(q0, q1, 0, n), scorer.log_domain)
        rows.append(torch.softmax(s, dim=-1) if scorer.log_domain else s / s.sum(-1, keepdim=True))
    return torch.cat(rows, dim=1) if rows else qa.new_zeros(batch, 0, n)


def _far_query_limit(
    kernel_name: str, log_bandwidth: Tensor, q: Tensor, k: Tensor, v: Tensor, allowed: _Mask,
    bi: Tensor, ii: Tensor,
) -> tuple[Tensor, Tensor]:
    """Values (F, p) and weights (F, n) at queries ``(bi, ii)`` whose log weights overflowed.

    ``u = (q - k) / h`` so large that ``-u^2 / 2`` is ``-inf`` for every key: the weights'
    limit is one-hot at the nearest key (in ``u``; ties share equally), since any other
    key's weight is smaller by a factor ``exp(-|u|)`` or less. The distances are compared
    without overflow, per feature scaled by a power of two, and the nearest key is
    confirmed by the exact difference of squared distances ``(c - k)(2q - c - k)``, so two
    keys that ``q - k`` cannot tell apart in floating point (``1e200 - 1 == 1e200``) are
    still told apart. No gradient flows to the queries, keys or bandwidth (the limit does
    not depend on them); values get theirs.
    """
    n, d = k.shape[1], k.shape[2]
    qf = q[bi, ii].detach().double()
    kf = k[bi].detach().double()
    ok = allowed.rows_of(bi, ii, n)
    lh = log_bandwidth.detach().double().reshape(-1).expand(d)
    big = torch.maximum(qf.abs(), torch.where(ok[..., None], kf.abs(), 0.0).amax(1))
    e = (torch.frexp(big)[1] + 1).clamp(-1000, 1100)  # |x| / 2^e < 1/2
    qs, ks = torch.ldexp(qf, -e), torch.ldexp(kf, -e[:, None, :])
    a = qs[:, None, :] - ks  # u / (2^e w), |a| < 1
    scale = e - lh / math.log(2.0)  # log2 of 2^e w per feature
    f = torch.exp2(scale - scale.amax(-1, keepdim=True))[:, None, :]  # common factor: order kept
    power = _FAR_POWER.get(kernel_name, 2)
    dist = torch.where(ok, ((a.abs() * f) ** power).sum(-1), math.inf)
    c = dist.argmin(-1)
    rows = torch.arange(len(c), device=c.device)
    ac, b = a[rows, c][:, None, :], ks[rows, c][:, None, :] - ks  # b = (c - k) / 2^e
    if power == 2:
        delta = (f * f * b * (ac + a)).sum(-1)  # |u_k|^2 - |u_c|^2, scaled
    else:
        same = torch.sign(a) == torch.sign(ac)
        delta = (f * torch.where(same, torch.sign(ac) * b, a.abs() - ac.abs())).sum(-1)
    nan_row = (torch.isnan(delta) & ok).any(-1) | torch.isnan(qf).any(-1)
    delta = torch.where(ok & ~torch.isnan(delta), delta, math.inf)
    tie = ok & (delta == delta.amin(-1, keepdim=True))
    weights = tie.double() / tie.sum(-1, keepdim=True).clamp(min=1)
    weights = torch.where(nan_row[:, None], math.nan, weights).to(v.dtype)
    vals = (torch.nan_to_num(weights)[:, None, :] @ v[bi])[:, 0]
    return torch.where(nan_row[:, None], math.nan, vals), weights
