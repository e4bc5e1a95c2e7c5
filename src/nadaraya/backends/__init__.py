"""Backends: the ways to compute partial sums, and the chooser behind ``backend="auto"``.

Each backend is a module under ``nadaraya.backends`` imported on first use that provides what
:class:`Backend` names: ``supports(kernel, d) -> bool`` and ``partials(queries, keys, values, *,
kernel, bandwidth, sample_weight, exclude) -> Partials``. All of them compute the same sums;
they differ in speed, memory and the dependencies they need.

Examples
--------
>>> from nadaraya import backends
>>> "reference" in backends.available()
True
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from nadaraya._support.validation import as_moments
from nadaraya.backends._capabilities import CAPABILITIES, WINDOWED_MAX_D, Capability, cost, table, why_not
from nadaraya.backends._choose import (
    BINNED_NS,
    EXACT_NS_PER_PAIR,
    TAYLOR_NS,
    TRUNCATED_NS,
    choose,
    choose_for_data,
    choose_window,
    choose_within,
)
from nadaraya.backends._registry import (
    NAMES,
    SMALL_PAIRS,
    WITHIN_TOL,
    Backend,
    BackendName,
    Choice,
    available,
    get,
)
from nadaraya.kernels import Kernel
from nadaraya.partials import Partials

__all__ = [
    "BINNED_NS",
    "CAPABILITIES",
    "EXACT_NS_PER_PAIR",
    "NAMES",
    "SMALL_PAIRS",
    "TAYLOR_NS",
    "TRUNCATED_NS",
    "WINDOWED_MAX_D",
    "WITHIN_TOL",
    "Backend",
    "BackendName",
    "Capability",
    "Choice",
    "available",
    "choose",
    "choose_for_data",
    "choose_window",
    "choose_within",
    "compute",
    "cost",
    "explain",
    "get",
    "table",
    "why_not",
]




def explain(
    kernel: str | Kernel = "gaussian",
    *,
    n: int,
    m: int,
    d: int = 1,
    bandwidth: float | NDArray[np.floating] | None = None,
    tol: float | None = None,
    span: float | None = None,
    queries: NDArray[np.floating] | None = None,
    keys: NDArray[np.floating] | None = None,
) -> str:
    """Say which backend ``backend="auto"`` would use for such a call, and why.

    Parameters
    ----------
    kernel : str or Kernel, default "gaussian"
    n, m, d : int
        Keys, queries and features.
    bandwidth : float or ndarray, optional
        With ``queries`` and ``keys`` (below); the choice from the sizes alone does not depend on it.
    tol : float, optional
        The error allowed (see :func:`nadaraya.pool`); with ``span`` it may pick a faster
        method (:func:`choose_within`).
    span : float, optional
        The extent of the queries and keys together, in bandwidths (with ``tol``).
    queries, keys : ndarray, optional
        The points themselves, ``(m, d)`` and ``(n, d)``, with ``bandwidth``: then the choice
        that looks at the data (:func:`choose_for_data`: the truncated sums, the series or the
        binned sums in 2-3 features) is said too.

    Examples
    --------
    >>> from nadaraya.backends import explain
    >>> explain("gaussian", n=100, m=100)
    'reference: 10000 pairs: too few to pay for loading compiled code'
    >>> explain("gaussian", n=10**5, m=10**5).split(":")[0] in ("fused", "reference")
    True
    >>> explain("gaussian", n=10**6, m=10**6, tol=1e-10, span=5000.0).split(":")[0]
    'taylor'
    >>> import numpy as np
    >>> x = np.random.default_rng(0).uniform(0, 5, (50000, 2))
    >>> explain("gaussian", n=50000, m=50000, d=2, bandwidth=np.array([1.0, 1.0]), tol=1e-10,
    ...         queries=x, keys=x).split(":")[0]
    'taylor'
    """
    from nadaraya.kernels import get as get_kernel

    k = get_kernel(kernel)
    if queries is not None and keys is not None and bandwidth is not None:
        h = np.broadcast_to(np.asarray(bandwidth, dtype=np.float64), (np.shape(keys)[1],))
        fast = choose_for_data(k, np.asarray(queries, dtype=np.float64), np.asarray(keys, dtype=np.float64),
                               h, tol=tol)
        if fast is not None:
            return str(fast)
    fast = None if span is None else choose_within(k, n=n, m=m, d=d, tol=tol, span=span)
    return str(fast if fast is not None else choose(k, n=n, m=m, d=d))


def compute(
    name: str,
    queries: NDArray[np.floating],
    keys: NDArray[np.floating],
    values: NDArray[np.floating],
    *,
    kernel: Kernel,
    bandwidth: NDArray[np.floating],
    sample_weight: NDArray[np.floating] | None = None,
    exclude: NDArray[np.integer] | None = None,
    moments: int = 0,
    device: str | None = None,
    tol: float | None = None,
) -> Partials:
    """Run one backend on validated arrays (see ``nadaraya.backends.reference.partials``).

    ``moments`` (a local polynomial degree) is passed on only when positive, so that a backend
    computes plain pooling exactly as it always did; ``device`` (a torch device, for
    ``backend="torch"``) only when given; ``tol`` only to ``backend="taylor"``, ``"binned"`` and to
    ``backend="dask"`` (whose tasks choose within it; the others are exact, within any tolerance).
    The backends of :data:`WITHIN_TOL` refuse ``tol=None``, which means exact sums everywhere.

    Examples
    --------
    >>> import numpy as np
    >>> from nadaraya.kernels import get as kernel
    >>> x = np.arange(3.0)[:, None]
    >>> p = compute("reference", x, x, x, kernel=kernel("boxcar"), bandwidth=np.ones(1))
    >>> p.finalize()[:, 0].tolist()
    [0.5, 1.0, 1.5]
    """
    if device is not None and name != "torch":
        raise ValueError(f"device={device!r} is for backend='torch'; got backend={name!r}")
    moments = as_moments(moments)
    why = why_not(name, kernel, d=queries.shape[1], degree=moments, loo=exclude is not None, tol=tol,
                  dtype=str(queries.dtype))
    if why is not None:
        raise ValueError(f"backend={name!r} {why}")
    return get(name).partials(
        queries,
        keys,
        values,
        kernel=kernel,
        bandwidth=bandwidth,
        sample_weight=sample_weight,
        exclude=exclude,
        **({"moments": moments} if moments else {}),
        **({"device": device} if device is not None else {}),
        **({"tol": tol} if tol is not None and name in ("taylor", "binned", "dask") else {}),
    )


def check_device(device: Any, backend: str) -> None:
    """A torch device for ``backend="auto"`` or ``"torch"``, usable here (or ``None``).

    Examples
    --------
    >>> check_device(None, "fused")
    >>> check_device("cpu", "fused")
    Traceback (most recent call last):
    ...
    ValueError: device='cpu' is for backend='torch' (or 'auto'); got backend='fused'
    """
    if device is None:
        return
    if backend not in ("auto", "torch"):
        raise ValueError(f"device={device!r} is for backend='torch' (or 'auto'); got backend={backend!r}")
    from nadaraya.backends.torch_sums import resolve_device

    resolve_device(device)


