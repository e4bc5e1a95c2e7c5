"""Checks of the pooling modules' arguments, and their flattening to one batch axis."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from nadaraya.nn._chunked import _Mask


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


def _same_dtype(weight: Tensor, queries: Tensor, keys: Tensor) -> None:
    """A projection needs inputs of its parameters' dtype: say so, naming the argument, instead
    of torch's "mat1 and mat2 must have the same dtype"."""
    for name, t in (("queries", queries), ("keys", keys)):
        if t.dtype != weight.dtype:
            raise TypeError(
                f"{name} has dtype {t.dtype}, but the module's parameters are {weight.dtype}; "
                f"convert one to the other (e.g. module.to({t.dtype}) or {name}.to({weight.dtype}))"
            )

