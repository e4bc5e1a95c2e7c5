"""Multi-head pooling: heads folded into the batch axis for one chunked call, and their outputs combined."""

from __future__ import annotations

from torch import Tensor

from nadaraya.nn._inputs import _Inputs
from nadaraya.nn._scores import _Mask


def fold(x: _Inputs, heads: int, combine: str) -> _Inputs:
    """The inputs with each batch row repeated once per head (row ``b * heads + h``), as the
    projection folds the queries and keys; 1-D values give a column per head under
    ``combine="concat"``."""
    if heads == 1:
        return x
    batch = x.v.shape[0]

    def rep(t: Tensor | None) -> Tensor | None:
        if t is None:
            return None
        return t[:, None].expand(batch, heads, *t.shape[1:]).reshape(batch * heads, *t.shape[1:])

    allowed = _Mask(rep(x.allowed.mask), rep(x.allowed.exclude))
    v = rep(x.v)
    assert v is not None
    return _Inputs(x.q, x.k, v, allowed, x.batch_shape, x.squeeze and combine == "mean")


def combine_outputs(out: Tensor, heads: int, combine: str) -> Tensor:
    """(B * heads, m, p) to (B, m, heads * p) (``"concat"``, head-major) or (B, m, p) (``"mean"``)."""
    if heads == 1:
        return out
    batch, m, p = out.shape[0] // heads, out.shape[1], out.shape[2]
    out = out.reshape(batch, heads, m, p)
    if combine == "mean":
        return out.mean(1)
    return out.permute(0, 2, 1, 3).reshape(batch, m, heads * p)


def split_weights(w: Tensor, heads: int) -> Tensor:
    """(B * heads, m, n) to (B, heads, m, n): each head's weights."""
    if heads == 1:
        return w
    return w.reshape(w.shape[0] // heads, heads, *w.shape[1:])
