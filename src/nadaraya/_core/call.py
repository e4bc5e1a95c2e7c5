"""A validated call of the primitive: its inputs checked once, and its partial sums from a backend."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from nadaraya import backends
from nadaraya._support.validation import (
    as_bandwidth,
    as_points,
    as_sample_weight,
    as_values,
    pick_dtype,
    relative_weights,
)
from nadaraya.kernels import Kernel
from nadaraya.kernels import get as get_kernel
from nadaraya.partials import Partials


@dataclass
class Call:
    """A validated call of the primitive: 2-D arrays of one dtype, a kernel, a bandwidth."""

    queries: NDArray[np.floating]
    keys: NDArray[np.floating]
    values: NDArray[np.floating]
    one_d: bool
    kernel: Kernel
    bandwidth: NDArray[np.floating]
    sample_weight: NDArray[np.floating] | None
    #: the values were multiplied by ``2**-value_exp`` (exact) to keep their sums in range;
    #: :func:`finish` multiplies the predictions back
    value_exp: int = 0

    @property
    def shape(self) -> tuple[int, int, int, int]:
        """(m, n, d, p)."""
        return (self.queries.shape[0], *self.keys.shape, self.values.shape[1])


@dataclass(frozen=True)
class Trusted:
    """Training data validated once (by ``fit``) and reused by every later call on it: keys
    ``(n, d)``, values ``(n, p)`` multiplied by ``2**-value_exp``, whether the values were 1-D,
    and the relative sample weights."""

    keys: NDArray[np.floating]
    values: NDArray[np.floating]
    one_d: bool
    sample_weight: NDArray[np.floating] | None
    value_exp: int


def trust(keys: ArrayLike, values: ArrayLike, sample_weight: ArrayLike | None = None, *,
          checked: bool = False) -> Trusted:
    """Validate training data once, as :func:`prepare` does, for calls that pass ``trusted=``
    (``checked``: the caller has validated them already, finite float64 of matching rows and
    non-negative weights, as ``fit`` does; they are then only laid out and scaled).

    Examples
    --------
    >>> t = trust([[0.0], [1.0]], [2.0, 4.0])
    >>> t.values.ravel().tolist(), t.one_d, t.value_exp
    ([2.0, 4.0], True, 0)
    """
    if checked:
        kk = np.ascontiguousarray(keys, dtype=np.float64)
        v = np.asarray(values, dtype=np.float64)
        vv, one_d = np.ascontiguousarray(v.reshape(kk.shape[0], -1)), v.ndim == 1
        sw = None if sample_weight is None else relative_weights(np.asarray(sample_weight), kk.dtype)
    else:
        dtype = pick_dtype(keys, values, keys)
        kk = as_points("keys", keys, dtype)
        vv, one_d = as_values(values, kk.shape[0], dtype)
        sw = as_sample_weight(sample_weight, kk.shape[0], dtype, relative=True)
    vv, value_exp = _in_range(vv)
    return Trusted(kk, vv, one_d, sw, value_exp)


def prepare(
    queries: ArrayLike | None,
    keys: ArrayLike,
    values: ArrayLike,
    *,
    kernel: str | Kernel,
    bandwidth: ArrayLike,
    sample_weight: ArrayLike | None = None,
    trusted: Trusted | None = None,
) -> Call:
    """Validate the arguments of :func:`pool` (``queries=None`` means the keys themselves).

    With ``trusted`` (training data validated once by :func:`trust`), ``keys``, ``values`` and
    ``sample_weight`` are ignored and not checked again, and ``queries`` are taken as validated
    by the caller (finite, of the training data's width): a fitted model's ``predict`` checks
    only ``X``, once.
    """
    k = get_kernel(kernel)
    if trusted is not None:
        kk = trusted.keys
        qq = kk if queries is None else np.ascontiguousarray(queries, dtype=kk.dtype)
        h = as_bandwidth(bandwidth, kk.shape[1])
        return Call(qq, kk, trusted.values, trusted.one_d, k, h, trusted.sample_weight, trusted.value_exp)
    dtype = pick_dtype(keys, values, keys if queries is None else queries)
    kk = as_points("keys", keys, dtype)
    n, d = kk.shape
    qq = kk if queries is None else as_points("queries", queries, dtype, d=d)
    vv, one_d = as_values(values, n, dtype)
    h = as_bandwidth(bandwidth, d)
    sw = as_sample_weight(sample_weight, n, dtype, relative=True)
    vv, value_exp = _in_range(vv)
    return Call(qq, kk, vv, one_d, k, h, sw, value_exp)


def _in_range(values: NDArray[np.floating]) -> tuple[NDArray[np.floating], int]:
    """Values multiplied by a power of two (exact) when their largest magnitude lies outside
    ``2**(-e/2) .. 2**(e/2)`` of their dtype's exponent range ``e``, so that sums of n
    weighted values neither overflow nor sink into subnormals; the exponent to undo it."""
    top = float(np.max(np.abs(values))) if values.size else 0.0
    info = np.finfo(values.dtype)
    if top == 0.0 or 2.0 ** (info.minexp // 2) <= top <= 2.0 ** (info.maxexp // 2):
        return values, 0
    exp = int(np.frexp(top)[1])
    return np.ldexp(values, -exp).astype(values.dtype), exp


def choose_backend(
    call: Call, *, exclude: NDArray[np.integer] | None = None, backend: str = "auto", moments: int = 0,
    device: str | None = None, tol: float | None = None, merged: bool = False,
) -> backends.Choice:
    """The backend :func:`compute_partials` runs for these arguments."""
    m, n, d, _ = call.shape
    if device is not None and backend == "auto":
        backend = "torch"  # a device names the torch backend
    choice = None
    if backend == "auto":
        choice = backends.choose_for_data(call.kernel, call.queries, call.keys, call.bandwidth,
                                          moments=moments, tol=tol, loo=exclude is not None, merged=merged,
                                          sample_weight=call.sample_weight)
    if choice is None:
        choice = backends.choose(call.kernel, n=n, m=m, d=d, backend=backend, moments=moments,
                                 loo=exclude is not None, tol=tol)
    return choice


def compute_partials(
    call: Call, *, exclude: NDArray[np.integer] | None = None, backend: str = "auto", moments: int = 0,
    device: str | None = None, tol: float | None = None, merged: bool = False,
) -> tuple[Partials, backends.Choice]:
    """The partial sums of a validated call on the chosen backend (with the moment sums of a
    local polynomial of degree ``moments``; within ``tol`` where a faster method allows it, by
    a bound per sum when the partials will be ``merged`` with others)."""
    choice = choose_backend(call, exclude=exclude, backend=backend, moments=moments, device=device, tol=tol,
                            merged=merged)
    parts = backends.compute(
        choice.name,
        call.queries,
        call.keys,
        call.values,
        kernel=call.kernel,
        bandwidth=call.bandwidth,
        sample_weight=call.sample_weight,
        exclude=exclude,
        moments=moments,
        device=device,
        tol=tol,
    )
    return parts, choice
