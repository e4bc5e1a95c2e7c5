"""The limit of the attention weights at queries so far from every key that all their log weights overflow."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from nadaraya.nn._scores import _Mask

#: the power of |u| by which a log-domain kernel's log-profile falls far from 0 (-u^2/2 for the
#: Gaussian, -|u| + ... for the Laplacian and logistic): which key is "nearest" in the limit
_FAR_POWER: dict[str, int] = {"gaussian": 2, "laplacian": 1, "logistic": 1}


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
