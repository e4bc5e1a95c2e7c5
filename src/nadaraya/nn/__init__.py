"""Learnable attention pooling for PyTorch: pooling modules, their training loop and a regressor.

The modules compute the same attention pooling as :func:`nadaraya.pool` (product kernels of
``u = (q - k) / h`` from the kernel registry, log-domain kernels with a running maximum, NaN for
a query whose window is empty), on torch tensors of any leading batch shape, with gradients:

- :class:`AveragePooling`: every key weighs the same (the ``constant`` kernel);
- :class:`KernelPooling`: a kernel of ``(q - k) / h`` with a learnable ``log h``, or of ``A (q - k)``
  with a learned map ``A`` (``metric=``), several heads and categorical columns;
- :class:`AdditiveAttentionPooling`: the score ``v^T tanh(W_q q + W_k k)`` (Bahdanau);
- :class:`DotProductAttentionPooling`: the score ``(W_q q) . (W_k k) / sqrt(dim)``;
- :func:`fit`: the textbook training, each training point attending to all the others;
- :class:`AttentionPoolingRegressor`: a scikit-learn regressor around a module and :func:`fit`;
- :class:`MLKR`: a learned linear map of the features (metric learning for kernel regression),
  a scikit-learn transformer trained on the leave-one-out error (NumPy and numba; torch only
  when given a ``device``).

Importing ``nadaraya.nn`` is cheap: torch is imported when one of these names is first used
(and scikit-learn for the regressor), so ``import nadaraya`` never pulls torch in.

Examples
--------
>>> import torch
>>> from nadaraya.nn import KernelPooling
>>> x = torch.linspace(0, 5, 50, dtype=torch.float64)[:, None]
>>> layer = KernelPooling("gaussian", bandwidth=0.5, learnable=False)
>>> layer(x[:3], x, torch.sin(x)).shape
torch.Size([3, 1])
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nadaraya.nn._mlkr import MLKR
    from nadaraya.nn._pooling import (
        AdditiveAttentionPooling,
        AveragePooling,
        DotProductAttentionPooling,
        KernelPooling,
    )
    from nadaraya.nn._regressor import AttentionPoolingRegressor
    from nadaraya.nn._training import fit

__all__ = [
    "MLKR",
    "AdditiveAttentionPooling",
    "AttentionPoolingRegressor",
    "AveragePooling",
    "DotProductAttentionPooling",
    "KernelPooling",
    "fit",
]

_LAZY: dict[str, str] = {
    "AveragePooling": "._pooling",
    "KernelPooling": "._pooling",
    "AdditiveAttentionPooling": "._pooling",
    "DotProductAttentionPooling": "._pooling",
    "fit": "._training",
    "AttentionPoolingRegressor": "._regressor",
    "MLKR": "._mlkr",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'nadaraya.nn' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
