"""The attention-pooling modules and the two ways they are computed: fused SDPA and key chunks."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .._config import get_config
from ..kernels import Kernel
from ..kernels import get as get_kernel
from ..partials import Partials, merge

__all__ = [
    "AdditiveAttentionPooling",
    "AveragePooling",
    "DotProductAttentionPooling",
    "KernelPooling",
]

Method = Literal["auto", "sdpa", "chunked"]
METHODS: tuple[str, ...] = ("auto", "sdpa", "chunked")

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
        ctx: Any,
        scorer: Scorer,
        allowed: _Mask,
        blocks: tuple[int, int],
        qa: Tensor,
        ka: Tensor,
        values: Tensor,
        *params: Tensor,
    ) -> tuple[Tensor, Tensor]:
        out, stat = _chunked_forward(scorer, allowed, blocks, qa, ka, values, params)
        ctx.scorer, ctx.allowed, ctx.blocks = scorer, allowed, blocks
        ctx.save_for_backward(qa, ka, values, out, stat, *params)
        ctx.mark_non_differentiable(stat)
        return out, stat

    @staticmethod
    def backward(ctx: Any, grad_out: Tensor, grad_stat: Tensor | None = None) -> tuple[Tensor | None, ...]:
        qa, ka, values, out, stat, *params = ctx.saved_tensors
        scorer: Scorer = ctx.scorer
        if torch.is_grad_enabled():  # create_graph=True: gradients that are differentiable again
            grads = _recomputed_grads(scorer, ctx.allowed, ctx.blocks, [qa, ka, values, *params],
                                      ctx.needs_input_grad[3:], grad_out)
            return (None, None, None, *grads)
        bq, bk = ctx.blocks
        m, n = qa.shape[1], ka.shape[1]
        need_q, need_k, need_v = ctx.needs_input_grad[3:6]
        need_p = ctx.needs_input_grad[6:]
        gq, gk, gv = torch.zeros_like(qa), torch.zeros_like(ka), torch.zeros_like(values)
        gp = [torch.zeros_like(t) for t in params]
        qs, ks, allowed = _finite_inputs(qa, ka, ctx.allowed)
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
        return (None, None, None, gq if need_q else None, gk if need_k else None,
                gv if need_v else None, *(g if w else None for g, w in zip(gp, need_p)))


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
            blocks = _block_sizes(batch, m, ka.shape[1], ctx.scorer.width, qa.element_size())
            grads = _recomputed_grads(ctx.scorer, _Mask(ctx.allowed, None), blocks, [qa, ka, values],
                                      needs, grad_out)
            return (None, None, *grads)
        wanted = [t for t, w in zip(ctx.inner, needs) if w]
        if not wanted or not ctx.out.requires_grad:
            return (None, None, None, None, None)
        go = torch.where(torch.isnan(ctx.out), 0.0, grad_out)
        found = iter(torch.autograd.grad(ctx.out, wanted, go, retain_graph=True, allow_unused=True))
        grads = [(next(found) if w else None) for w in needs]
        grads = [torch.zeros_like(t) if (w and g is None) else g for t, g, w in zip(ctx.inner, grads, needs)]
        return (None, None, *grads)


# --------------------------------------------------------------------------------------------
# The shared forward: shapes, the choice of path, and the weights for inspection
# --------------------------------------------------------------------------------------------


def _check_tensor(name: str, t: Any, min_dim: int) -> Tensor:
    if not isinstance(t, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor; got {type(t).__name__}")
    if t.ndim < min_dim:
        raise ValueError(f"{name} must have at least {min_dim} dimensions; got shape {tuple(t.shape)}")
    if not t.is_floating_point() and name != "mask":
        raise TypeError(f"{name} must be a floating-point tensor; got dtype {t.dtype}")
    return t


def _check_sizes(**sizes: int | None) -> None:
    """Each given size is a positive int (None: not given)."""
    for name, value in sizes.items():
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ValueError(f"{name} must be a positive int; got {value!r}")


@dataclass
class _Inputs:
    """Inputs flattened to one batch axis: q (B, m, d), k (B, n, dk), v (B, n, p)."""

    q: Tensor
    k: Tensor
    v: Tensor
    allowed: _Mask
    batch_shape: torch.Size
    squeeze: bool


def _flatten(
    queries: Tensor, keys: Tensor, values: Tensor, mask: Tensor | None, exclude: Tensor | None
) -> _Inputs:
    _check_tensor("queries", queries, 2)
    _check_tensor("keys", keys, 2)
    _check_tensor("values", values, 1)
    squeeze = values.ndim == keys.ndim - 1
    if squeeze:
        values = values[..., None]
    if values.ndim < keys.ndim:
        raise ValueError(
            "values must have shape (..., n, p), or (..., n) with one dimension fewer than keys; "
            f"got values of shape {tuple(values.shape)} for keys of shape {tuple(keys.shape)}"
        )
    m, n = queries.shape[-2], keys.shape[-2]
    if values.shape[-2] != n:
        raise ValueError(
            f"values must have one row per key ({n}); got values of shape {tuple(values.shape)} "
            f"for keys of shape {tuple(keys.shape)}"
        )
    for name, t in (("keys", keys), ("values", values)):
        if t.dtype != queries.dtype or t.device != queries.device:
            raise TypeError(
                f"{name} must have the queries' dtype and device ({queries.dtype}, {queries.device}); "
                f"got ({t.dtype}, {t.device})"
            )
    shapes = [queries.shape[:-2], keys.shape[:-2], values.shape[:-2]]
    if mask is not None:
        _check_tensor("mask", mask, 2)
        if mask.dtype != torch.bool:
            raise TypeError(f"mask must be boolean (True where a query may attend); got {mask.dtype}")
        if mask.shape[-2:] != (m, n):
            raise ValueError(f"mask must have shape (..., {m}, {n}) for {m} queries and {n} keys; "
                             f"got {tuple(mask.shape)}")
        shapes.append(mask.shape[:-2])
    if exclude is not None:
        if not isinstance(exclude, Tensor) or exclude.dtype.is_floating_point or exclude.ndim < 1:
            raise TypeError(f"exclude must be an integer tensor of shape (..., {m}); got {exclude!r}")
        if exclude.shape[-1] != m:
            raise ValueError(f"exclude must have shape (..., {m}), one key index per query; "
                             f"got {tuple(exclude.shape)}")
        shapes.append(exclude.shape[:-1])
    try:
        batch_shape = torch.broadcast_shapes(*shapes)
    except RuntimeError as err:
        got = [tuple(s) for s in shapes]
        raise ValueError(f"the leading (batch) dimensions do not broadcast: {got}") from err

    def flat(t: Tensor, tail: int) -> Tensor:
        rest = t.shape[t.ndim - tail:]
        return t.expand(*batch_shape, *rest).reshape(math.prod(batch_shape), *rest)  # sizes may be 0

    allowed = _Mask(
        None if mask is None else flat(mask.to(queries.device), 2),
        None if exclude is None else flat(exclude.to(queries.device), 1),
    )
    return _Inputs(flat(queries, 2), flat(keys, 2), flat(values, 2), allowed, batch_shape, squeeze)


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


class _Pooling(nn.Module):
    """Shared forward of the pooling modules: subclasses say how to project and score."""

    method: str

    def _check_method(self, method: str) -> str:
        if method not in METHODS:
            raise ValueError(f"method={method!r} is not valid; use one of {', '.join(map(repr, METHODS))}")
        return method

    def _project(self, q: Tensor, k: Tensor) -> tuple[Tensor, Tensor, Scorer, tuple[Tensor, ...]]:
        raise NotImplementedError

    def path(self, queries: Tensor, keys: Tensor) -> str:
        """Which computation a call takes: ``"sdpa"`` (fused attention) or ``"chunked"``.

        Examples
        --------
        >>> import torch
        >>> from nadaraya.nn import KernelPooling
        >>> x = torch.zeros(4, 1)
        >>> KernelPooling("gaussian").path(x, x), KernelPooling("epanechnikov").path(x, x)
        ('sdpa', 'chunked')
        """
        x = _flatten(queries, keys, keys[..., :1], None, None)
        qa, ka, scorer, _ = self._project(x.q, x.k)
        return self._route(scorer, qa, ka)

    def _choose(self, scorer: Scorer) -> str:
        if self.method == "sdpa" and scorer.sdpa is None:
            raise ValueError(f"method='sdpa' is not available for {self!r}; use 'chunked' or 'auto'")
        if self.method == "chunked" or scorer.sdpa is None:
            return "chunked"
        return "sdpa"

    def forward(
        self,
        queries: Tensor,
        keys: Tensor,
        values: Tensor,
        mask: Tensor | None = None,
        *,
        exclude: Tensor | None = None,
        return_weights: bool = False,
    ) -> Tensor | tuple[Tensor, Tensor]:
        """Pool ``values`` at each query; see the class docstring for the shapes.

        Parameters
        ----------
        queries : Tensor of shape (..., m, d)
        keys : Tensor of shape (..., n, d)
        values : Tensor of shape (..., n, p) or (..., n)
        mask : bool Tensor of shape (..., m, n), optional
            True where a query may attend to a key (torch's ``attn_mask`` convention); a
            query left with no key gets NaN.
        exclude : int Tensor of shape (..., m), optional
            One key index per query to leave out (``-1``: none); ``arange(n)`` with the keys
            as queries gives leave-one-out predictions without an (m, n) mask on the chunked
            path (the fused path builds one).
        return_weights : bool, default False
            Also return the (..., m, n) attention weights (materialised: for inspection).

        Returns
        -------
        Tensor of shape (..., m, p) or (..., m)
            And the weights when ``return_weights``.
        """
        x = _flatten(queries, keys, values, mask, exclude)
        qa, ka, scorer, params = self._project(x.q, x.k)
        batch, m, n = qa.shape[0], qa.shape[1], ka.shape[1]
        stat = None
        if self._route(scorer, qa, ka) == "sdpa":
            out = _SdpaPool.apply(scorer, x.allowed.dense(m, n), qa, ka, x.v)
        else:
            blocks = _block_sizes(batch, m, n, scorer.width, qa.element_size())
            out, stat = _ChunkedPool.apply(scorer, x.allowed, blocks, qa, ka, x.v, *params)
        far = None
        if stat is not None and self._has_limit(scorer) and not bool(torch.isfinite(stat).all()):
            # log weights that all overflowed to -inf (or inf - inf): the limit, not 0 / 0
            bad = ~torch.isfinite(stat) & x.allowed.has_key(batch, m, n, stat.device)
            bi, ii = torch.nonzero(bad, as_tuple=True)
            if bi.numel():
                far = (bi, ii, *self._far_limit(x.q, x.k, x.v, x.allowed, bi, ii))
                out = out.index_put((bi, ii), far[2])
        out = out.reshape(*x.batch_shape, *out.shape[1:])
        if x.squeeze:
            out = out[..., 0]
        if not return_weights:
            return out
        w = _weights(scorer, qa, ka, params, x.allowed)
        if far is None and self._has_limit(scorer) and bool(torch.isnan(w).any()):
            # the fused path's output was right, but the weights' softmax overflowed
            bad = torch.isnan(w).any(-1) & x.allowed.has_key(batch, m, n, w.device)
            bi, ii = torch.nonzero(bad, as_tuple=True)
            if bi.numel():
                far = (bi, ii, *self._far_limit(x.q, x.k, x.v, x.allowed, bi, ii))
        if far is not None:
            w = w.index_put(far[:2], far[3].to(w.dtype))
        return out, w.reshape(*x.batch_shape, *w.shape[1:])

    def _route(self, scorer: Scorer, qa: Tensor, ka: Tensor) -> str:
        """The path for these (projected) inputs: the fused one unless the data are empty or so
        spread out that its dot products could overflow, where the chunked path (exact in the
        log domain, with the limit for far queries) serves."""
        path = self._choose(scorer)
        if path == "chunked":
            return path
        if qa.numel() == 0 or ka.numel() == 0:
            return "chunked"
        assert scorer.sdpa is not None
        with torch.no_grad():
            q1, k1 = scorer.sdpa(qa, ka)
            bound = float(q1.abs().amax()) * float(k1.abs().amax()) * q1.shape[-1]
        return "sdpa" if bound < torch.finfo(qa.dtype).max / 4 else "chunked"

    def _has_limit(self, scorer: Scorer) -> bool:
        """Whether a query whose log weights all overflow has a limit (:meth:`_far_limit`)."""
        return False

    def _far_limit(
        self, q: Tensor, k: Tensor, v: Tensor, allowed: _Mask, bi: Tensor, ii: Tensor
    ) -> tuple[Tensor, Tensor]:
        raise NotImplementedError


# --------------------------------------------------------------------------------------------
# The modules
# --------------------------------------------------------------------------------------------


class KernelPooling(_Pooling):
    r"""Nadaraya-Watson attention pooling with a kernel of ``(q - k) / h`` and a learnable ``h``.

    The weights are those of :func:`nadaraya.pool`: ``alpha(q, k_i)`` proportional to the
    product kernel ``prod_j K((q_j - k_ij) / h_j)`` from :mod:`nadaraya.kernels`. The textbook's
    learnable model ``exp(-((q - k) w)^2 / 2)`` is the Gaussian with ``w = 1 / h``; the
    parameter is ``log h`` so that ``h`` stays positive.

    Shapes: queries (..., m, d), keys (..., n, d), values (..., n, p) or (..., n), mask
    (..., m, n); the leading dimensions broadcast. Output (..., m, p) or (..., m).

    The Gaussian runs through :func:`torch.nn.functional.scaled_dot_product_attention` by the
    augmented-dimension identity ``-|q - k|^2 / 2 = [q, 1] . [k, -|k|^2 / 2] - |q|^2 / 2``
    (after centring on the keys' mean), so torch's fused kernels serve it: on CPU
    ``_scaled_dot_product_flash_attention_for_cpu`` (also with a mask, in torch 2.13), on CUDA
    flash or memory-efficient attention (float16/bfloat16/float32; in float64 CUDA has only
    the math path, which builds the (m, n) matrix: use ``method="chunked"`` there for large
    m n). Its precision: the log weights carry an absolute
    error of about ``eps * max |k - centre|^2 / h^2``; that is negligible in float64 and
    float32 for data within a few hundred bandwidths, but in float16/bfloat16 (eps 1e-3 and
    8e-3) it is already ~0.5 at ``|k - centre| / h = 10``: use float32, or ``method="chunked"``,
    for half precision. Every other kernel (and ``method="chunked"``) runs over blocks of
    keys with a running maximum (log-domain kernels) or plain sums (compact kernels), and
    backward recomputes the blocks: memory stays within ``nadaraya.get_config()
    ["working_memory"]``, never O(m n).

    A query with no key inside a compact kernel's window, or with every key masked, gets NaN
    (the core's ``empty="nan"``) and no gradient; no warning is raised, since checking would
    synchronise the device on every call. With zero keys every query is such a query (NaN
    rows of shape (..., m, p)); zero queries give an empty (..., 0, p) output.

    A query so far from every key that all its log weights overflow (``u^2`` beyond the
    dtype's range: ``|u| > 1.3e154`` in float64, ``1.8e19`` in float32, or ``q / h`` itself
    infinite) gets the limit of the weights, the nearest key's value (in ``u``; exact ties
    share equally), never NaN; no gradient reaches ``q``, ``k`` or ``h`` from such a query.
    Data spread so far that the fused path's dot products could overflow take the chunked
    path. Both checks read one scalar per call (on CUDA, a synchronisation; cheap next to
    the attention itself).

    Second derivatives (``create_graph=True``, e.g. a Hessian in ``log h``) are exact on
    every path: the first-order backward is the fast one above, and a double backward
    recomputes the forward with autograd (O(m n) memory, as any double backward through
    attention).

    Parameters
    ----------
    kernel : str or Kernel, default "gaussian"
        A name from :mod:`nadaraya.kernels`.
    bandwidth : float or sequence of float, default 1.0
        Initial (or fixed) ``h``, positive and finite; a sequence gives one per feature.
    learnable : bool, default True
        Whether ``log h`` is an ``nn.Parameter`` (else a buffer).
    per_feature : int, optional
        Number of features for one bandwidth per feature (feature weighting), each
        initialised from ``bandwidth``. By default, inferred from ``bandwidth``: a scalar
        gives one shared ``h``.
    method : {"auto", "sdpa", "chunked"}, default "auto"
        ``"auto"`` takes SDPA for the Gaussian and chunks otherwise.
    device, dtype : optional
        Of the parameter, as for torch's layers; ``log h`` is computed in float64 and then
        cast, so ``dtype=torch.float64`` keeps the given bandwidth exactly.

    Attributes
    ----------
    log_bandwidth : Tensor of shape () or (d,)

    Examples
    --------
    >>> import torch
    >>> from nadaraya.nn import KernelPooling
    >>> layer = KernelPooling("gaussian", bandwidth=2.0)
    >>> round(layer.w.item(), 3), round(layer.bandwidth.item(), 3)
    (0.5, 2.0)
    >>> q = torch.tensor([[2.5]]); k = torch.tensor([[1.0], [2.0], [3.0]])
    >>> v = torch.tensor([3.0, 5.0, 4.0])
    >>> KernelPooling(bandwidth=1.0)(q, k, v).detach().round(decimals=2)
    tensor([4.2700])
    """

    def __init__(
        self,
        kernel: str | Kernel = "gaussian",
        bandwidth: float | Sequence[float] | Tensor = 1.0,
        learnable: bool = True,
        per_feature: int | None = None,
        *,
        method: Method = "auto",
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.kernel = get_kernel(kernel)
        self.method = self._check_method(method)
        allowed = "a positive, finite number or one per feature"
        if isinstance(bandwidth, str | bytes):
            raise ValueError(f"bandwidth must be {allowed}; got the string {bandwidth!r}")
        try:
            h = torch.as_tensor(bandwidth, dtype=torch.float64).detach().clone()
        except (TypeError, ValueError, RuntimeError) as exc:
            raise ValueError(f"bandwidth must be {allowed}; got {bandwidth!r:.80} ({exc})") from None
        if h.ndim > 1 or h.numel() == 0 or not bool(torch.all(torch.isfinite(h) & (h > 0))):
            raise ValueError(
                f"bandwidth must be positive and finite, a scalar or one per feature; got {bandwidth!r}"
            )
        if per_feature is not None:
            _check_sizes(per_feature=per_feature)
            if h.ndim == 1 and h.numel() not in (1, per_feature):
                raise ValueError(f"bandwidth has {h.numel()} entries but per_feature={per_feature}")
            h = h.reshape(-1).expand(per_feature).clone() if h.numel() == 1 else h
        log_h = torch.log(h).to(device=device, dtype=dtype or torch.get_default_dtype())
        if learnable:
            self.log_bandwidth = nn.Parameter(log_h)
        else:
            self.register_buffer("log_bandwidth", log_h)

    @property
    def bandwidth(self) -> Tensor:
        """``h = exp(log h)``: a scalar, or one per feature."""
        return self.log_bandwidth.exp()

    @property
    def w(self) -> Tensor:
        """The textbook's parameter ``w = 1 / h``."""
        return (-self.log_bandwidth).exp()

    def _project(self, q: Tensor, k: Tensor) -> tuple[Tensor, Tensor, Scorer, tuple[Tensor, ...]]:
        d = q.shape[-1]
        if k.shape[-1] != d:
            raise ValueError(
                f"queries and keys must have the same number of features; got {d} and {k.shape[-1]}"
            )
        lh = self.log_bandwidth
        if lh.ndim == 1 and lh.numel() not in (1, d):
            raise ValueError(
                f"this layer has {lh.numel()} bandwidths (per_feature) but the inputs have {d} features"
            )
        w = (-lh).exp().to(q.dtype)
        return q * w, k * w, _kernel_scorer(self.kernel, d), ()

    def _has_limit(self, scorer: Scorer) -> bool:
        return self.kernel.log_profile is not None and self.kernel.name != "constant"

    def _far_limit(
        self, q: Tensor, k: Tensor, v: Tensor, allowed: _Mask, bi: Tensor, ii: Tensor
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
        lh = self.log_bandwidth.detach().double().reshape(-1).expand(d)
        big = torch.maximum(qf.abs(), torch.where(ok[..., None], kf.abs(), 0.0).amax(1))
        e = (torch.frexp(big)[1] + 1).clamp(-1000, 1100)  # |x| / 2^e < 1/2
        qs, ks = torch.ldexp(qf, -e), torch.ldexp(kf, -e[:, None, :])
        a = qs[:, None, :] - ks  # u / (2^e w), |a| < 1
        scale = e - lh / math.log(2.0)  # log2 of 2^e w per feature
        f = torch.exp2(scale - scale.amax(-1, keepdim=True))[:, None, :]  # common factor: order kept
        power = _FAR_POWER.get(self.kernel.name, 2)
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

    def extra_repr(self) -> str:
        h = self.bandwidth.detach()
        text = f"{h.item():.4g}" if h.numel() == 1 else f"{h.numel()} per feature"
        return f"kernel={self.kernel.name!r}, bandwidth={text}, method={self.method!r}"


class AveragePooling(KernelPooling):
    """Average pooling: every (unmasked) key weighs the same, ``f(q) = mean(values)``.

    The ``constant`` kernel of :mod:`nadaraya.kernels`, without parameters. Shapes as for
    :class:`KernelPooling`.

    Examples
    --------
    >>> import torch
    >>> from nadaraya.nn import AveragePooling
    >>> k = torch.zeros(3, 1); v = torch.tensor([1.0, 2.0, 6.0])
    >>> AveragePooling()(torch.zeros(2, 1), k, v)
    tensor([3., 3.])
    """

    def __init__(self, *, device: torch.device | str | None = None, dtype: torch.dtype | None = None) -> None:
        super().__init__("constant", 1.0, learnable=False, method="chunked", device=device, dtype=dtype)

    def extra_repr(self) -> str:
        return ""


def _same_dtype(weight: Tensor, queries: Tensor, keys: Tensor) -> None:
    """A projection needs inputs of its parameters' dtype: say so, naming the argument, instead
    of torch's "mat1 and mat2 must have the same dtype"."""
    for name, t in (("queries", queries), ("keys", keys)):
        if t.dtype != weight.dtype:
            raise TypeError(
                f"{name} has dtype {t.dtype}, but the module's parameters are {weight.dtype}; "
                f"convert one to the other (e.g. module.to({t.dtype}) or {name}.to({weight.dtype}))"
            )


class AdditiveAttentionPooling(_Pooling):
    r"""Additive (Bahdanau) attention pooling: score ``v^T tanh(W_q q + W_k k)``, softmax over keys.

    Shapes: queries (..., m, in_features), keys (..., n, key_features), values (..., n, p) or
    (..., n), mask (..., m, n); output (..., m, p) or (..., m).

    ``W_q q`` and ``W_k k`` are computed once per point; the (m, n, hidden) tensor of their
    sums is never built: blocks of queries and keys are scored in turn with a running maximum
    (online softmax), and backward recomputes them, so memory stays within
    ``nadaraya.get_config()["working_memory"]`` (a small multiple of one block) whatever m and n.

    Parameters
    ----------
    in_features : int
        Features of a query.
    hidden : int
        Width of the scorer's hidden layer.
    key_features : int, optional
        Features of a key; default ``in_features``.
    bias : bool, default True
        A bias in ``W_q``: with it, two hidden units can form a bump ``tanh(a + b) - tanh(a - b)``
        around ``q = k``, which is what kernel-like attention on raw coordinates needs. The
        textbook's layer has none.
    device, dtype : optional
        Of the parameters, as for :class:`torch.nn.Linear`.

    Examples
    --------
    >>> import torch
    >>> from nadaraya.nn import AdditiveAttentionPooling
    >>> _ = torch.manual_seed(0)
    >>> layer = AdditiveAttentionPooling(2, hidden=8)
    >>> out, w = layer(torch.randn(5, 2), torch.randn(7, 2), torch.randn(7, 3), return_weights=True)
    >>> out.shape, w.shape, bool(torch.allclose(w.sum(-1), torch.ones(5)))
    (torch.Size([5, 3]), torch.Size([5, 7]), True)
    """

    def __init__(
        self,
        in_features: int,
        hidden: int,
        *,
        key_features: int | None = None,
        bias: bool = True,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        _check_sizes(in_features=in_features, hidden=hidden, key_features=key_features)
        self.method = "chunked"
        place = {"device": device, "dtype": dtype}
        self.W_q = nn.Linear(in_features, hidden, bias=bias, **place)
        self.W_k = nn.Linear(key_features or in_features, hidden, bias=False, **place)
        self.w_v = nn.Linear(hidden, 1, bias=False, **place)

    def _project(self, q: Tensor, k: Tensor) -> tuple[Tensor, Tensor, Scorer, tuple[Tensor, ...]]:
        _same_dtype(self.W_q.weight, q, k)
        scorer = Scorer(_additive_fn, True, 3 * self.w_v.in_features)
        return self.W_q(q), self.W_k(k), scorer, (self.w_v.weight[0],)


class DotProductAttentionPooling(_Pooling):
    r"""Dot-product attention pooling: score ``(W_q q) . (W_k k) / sqrt(dim)``, softmax over keys.

    Shapes: queries (..., m, in_features), keys (..., n, key_features), values (..., n, p) or
    (..., n), mask (..., m, n); output (..., m, p) or (..., m). Runs through
    :func:`torch.nn.functional.scaled_dot_product_attention` (its fused kernels), or over
    key blocks with ``method="chunked"``.

    Parameters
    ----------
    in_features : int
    dim : int
        Size of the projected queries and keys.
    scaled : bool, default True
        Divide the scores by ``sqrt(dim)``.
    key_features : int, optional
        Features of a key; default ``in_features``.
    method : {"auto", "sdpa", "chunked"}, default "auto"
    device, dtype : optional
        Of the parameters, as for :class:`torch.nn.Linear`.

    Examples
    --------
    >>> import torch
    >>> from nadaraya.nn import DotProductAttentionPooling
    >>> layer = DotProductAttentionPooling(3, dim=4)
    >>> layer(torch.randn(2, 5, 3), torch.randn(2, 6, 3), torch.randn(2, 6, 2)).shape
    torch.Size([2, 5, 2])
    """

    def __init__(
        self,
        in_features: int,
        dim: int,
        scaled: bool = True,
        *,
        key_features: int | None = None,
        method: Method = "auto",
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        _check_sizes(in_features=in_features, dim=dim, key_features=key_features)
        self.method = self._check_method(method)
        self.scaled = scaled
        place = {"device": device, "dtype": dtype}
        self.W_q = nn.Linear(in_features, dim, bias=False, **place)
        self.W_k = nn.Linear(key_features or in_features, dim, bias=False, **place)

    def _project(self, q: Tensor, k: Tensor) -> tuple[Tensor, Tensor, Scorer, tuple[Tensor, ...]]:
        _same_dtype(self.W_q.weight, q, k)
        qa = self.W_q(q)
        if self.scaled:
            qa = qa / math.sqrt(self.W_q.out_features)
        return qa, self.W_k(k), Scorer(_dot_fn, True, 1, _dot_identity), ()
