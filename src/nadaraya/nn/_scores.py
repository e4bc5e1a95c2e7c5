"""How a block of (projected) queries scores a block of keys, and which (query, key) pairs are allowed."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from nadaraya.kernels import Kernel


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
