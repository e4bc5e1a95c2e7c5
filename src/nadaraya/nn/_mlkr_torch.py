"""MLKR's leave-one-out loss and analytic gradient with torch, on any device, in blocks of rows.

The same formulas as :mod:`nadaraya.nn._mlkr_loss` (its docstring has them): each block of
queries against all keys gives its rows' log weights ``2 z_i . z_j - |z_j|^2`` (the softmax
over ``j`` does not change with the ``-|z_i|^2`` of the row), its own pair masked to ``-inf``,
shifted by the row's largest before ``exp``; then the rows' residuals, the pair terms ``c_ij``,
and the block's share of ``C X``, the row and column sums of ``C``. Blocks are sized to the
working memory (:func:`nadaraya.get_config`), so memory stays O(n (d + block)).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray

from nadaraya._support.config import get_config

__all__ = ["loo_loss_grad_torch", "torch_evaluator"]

#: block-sized float64 arrays alive at once in one block
_BLOCK_ARRAYS = 4


def _rows_per_block(n: int) -> int:
    budget = get_config()["working_memory"] * 2**20 / (8 * _BLOCK_ARRAYS)
    return max(1, min(n, int(budget // max(1, n))))


def loo_loss_grad_torch(
    A: torch.Tensor, Xc: torch.Tensor, Y: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Loss ``(1/n) sum_i |yhat_i - y_i|^2`` and its gradient in ``A`` (k, d).

    ``Xc`` (n, d) are centred inputs, ``Y`` (n, p) the targets.

    Examples
    --------
    >>> import torch
    >>> X = torch.arange(8.0, dtype=torch.float64).reshape(4, 2)
    >>> loss, grad = loo_loss_grad_torch(torch.eye(2, dtype=torch.float64), X - X.mean(0), X[:, :1])
    >>> round(float(loss), 6), tuple(grad.shape)
    (2.0, (2, 2))
    """
    n = Xc.shape[0]
    Z = Xc @ A.T
    sq = (Z * Z).sum(1)
    rs = Xc.new_empty(n)
    cs = Xc.new_zeros(n)
    cx = torch.empty_like(Xc)
    loss = Xc.new_zeros(())
    bq = _rows_per_block(n)
    for q0 in range(0, n, bq):
        q1 = min(n, q0 + bq)
        rows = torch.arange(q1 - q0, device=Xc.device)
        S = (2.0 * Z[q0:q1]) @ Z.T - sq
        S[rows, rows + q0] = -torch.inf
        S -= S.amax(1, keepdim=True)
        E = torch.exp_(S)
        W = E.sum(1, keepdim=True)
        Yh = (E @ Y) / W
        R = Yh - Y[q0:q1]
        loss += (R * R).sum()
        RW = R / W
        E *= RW @ Y.T - (RW * Yh).sum(1, keepdim=True)  # now C, the pair terms
        rs[q0:q1] = E.sum(1)
        cs += E.sum(0)
        cx[q0:q1] = E @ Xc
    xcx = Xc.T @ cx
    M = (Xc * (rs + cs)[:, None]).T @ Xc - xcx - xcx.T
    return loss / n, (-4.0 / n) * (A @ M)


def torch_evaluator(
    Xs: NDArray[np.float64], Y: NDArray[np.float64], device: Any
) -> Callable[[NDArray[np.float64]], tuple[float, NDArray[np.float64]]]:
    """``A -> (loss, grad)`` as NumPy, the data moved to ``device`` once."""
    dev = torch.device(device)
    Xc = torch.as_tensor(Xs - Xs.mean(axis=0), dtype=torch.float64, device=dev)
    Yt = torch.as_tensor(Y, dtype=torch.float64, device=dev)

    def evaluate(A: NDArray[np.float64]) -> tuple[float, NDArray[np.float64]]:
        At = torch.as_tensor(A, dtype=torch.float64, device=dev)
        with torch.no_grad():
            loss, grad = loo_loss_grad_torch(At, Xc, Yt)
        return float(loss), grad.cpu().numpy()

    return evaluate
