"""The torch backend: exact log-domain partial sums over key blocks on a torch device (CPU or CUDA).

The sums of :mod:`nadaraya.backends.reference`, computed with torch operations on ``device``:
each (query block, key block) pair builds its block of weights feature by feature (product
kernels; the kernels' profiles take the array namespace, so the maths is the registry's), in the
log domain with a running maximum for log-domain kernels, and merges it into one partial per
query block with the one :func:`nadaraya.partials.merge` (``xp=torch``). Blocks have the
reference's sizes (:func:`nadaraya.backends.reference.block_sizes`, the working memory), and the
moments of local polynomial fits are the reference's formulas in torch. In float64 on the CPU
the results equal the reference's to rounding (1e-12 relative in the tests).

Why not ``scaled_dot_product_attention``: its score is a dot product, so the Gaussian's log
weight ``-|q - k|^2 / 2`` would come from ``|q|^2 - 2 q.k + |k|^2``, which cancels
catastrophically for nearby keys far from the origin (a relative error of ``|q|^2 / |q - k|^2``
ulps), and only the Gaussian and the constant kernel have that form. Exactness comes first, so
the scores here are formed from the differences ``q - k`` as the reference does; the per-block
work is two matrix products (``w @ values``) plus elementwise profiles, which suits a GPU.

Inputs and outputs are NumPy arrays, as for every backend: the whole queries, keys and values
are copied to the device once, the sums come back as NumPy :class:`~nadaraya.partials.Partials`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray

from nadaraya.backends.reference import block_sizes, moment_shapes
from nadaraya.kernels import Kernel
from nadaraya.partials import Partials, merge
from nadaraya.partials import empty as empty_partials

__all__ = ["partials", "resolve_device", "supports"]

_DTYPES = {np.dtype(np.float32): torch.float32, np.dtype(np.float64): torch.float64}
#: :class:`Partials` holding torch tensors on the device (the class is annotated for NumPy arrays)
_OnDevice: Any = Partials


def supports(kernel: Kernel, d: int) -> bool:
    """Every kernel in any number of features.

    Examples
    --------
    >>> from nadaraya.kernels import get
    >>> supports(get("logistic"), 4)
    True
    """
    return True


def resolve_device(device: str | torch.device | None = None) -> torch.device:
    """The torch device named by ``device`` (default CPU), checked to be usable here.

    Raises
    ------
    ValueError
        For a name torch does not know, or a device it cannot use (``"cuda"`` without CUDA,
        a device index beyond those present); the message names the device.

    Examples
    --------
    >>> resolve_device().type
    'cpu'
    >>> resolve_device("cpu:0").type
    'cpu'
    """
    if device is None:
        return torch.device("cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError, ValueError) as err:
        raise ValueError(
            f"device={device!r} is not a torch device name (use 'cpu', 'cuda' or 'cuda:<index>'): {err}"
        ) from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            f"device={device!r} cannot be used: torch {torch.__version__} sees no CUDA device here "
            "(torch.cuda.is_available() is False); use device='cpu'"
        )
    try:
        torch.empty(1, device=dev)
    except (RuntimeError, AssertionError, TypeError, ValueError) as err:
        raise ValueError(f"device={device!r} cannot be used by torch here: {err}") from None
    return dev


def _to(a: NDArray[Any], dev: torch.device, device: object) -> torch.Tensor:
    """A NumPy array as a tensor on ``dev`` (same dtype); a dtype the device lacks names both."""
    try:
        return torch.from_numpy(np.ascontiguousarray(a)).to(dev)
    except (RuntimeError, TypeError) as err:
        raise ValueError(f"device={device!r} cannot hold {a.dtype} arrays: {err}") from None


def _block_weights(
    q: torch.Tensor, k: torch.Tensor, kernel: Kernel, inv_h: list[float], log_sw: torch.Tensor | None,
    sw: torch.Tensor | None,
) -> torch.Tensor:
    """``log w`` (log-domain kernels) or ``w`` of a block, as ``reference.block_weights``.

    In place where the tensor is this function's own (as the reference's ``+=``): a CPU block
    allocated afresh per operation costs its page faults each time."""
    log_domain = kernel.log_profile is not None
    acc: torch.Tensor | None = None
    for j in range(q.shape[1]):
        u = torch.sub(q[:, j, None], k[None, :, j]).mul_(inv_h[j])
        # u = inf (overflow) is outside any support: the profiles' where() gives 0 there
        term = kernel.log_profile(u, torch) if kernel.log_profile is not None else kernel.profile(u, torch)
        if acc is None:  # a profile's own result (contiguous, so writable in place)
            acc = term.to(q.dtype).contiguous()
        elif log_domain:
            acc.add_(term)
        else:
            acc.mul_(term)
    assert acc is not None
    if log_domain:
        if log_sw is not None:
            acc.add_(log_sw[None, :])
    elif sw is not None:
        acc.mul_(sw[None, :])
    return acc


def _moment_sums(
    w: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, degree: int
) -> list[torch.Tensor]:
    """The moment sums of one block in the order of ``reference.moment_shapes`` (the reference's
    formulas: ``sum w u^(x)j`` for ``j = 1 .. 2 degree``, then ``sum w u^(x)j (x) v``)."""
    u = k[None, :, :] - q[:, None, :]  # (bq, bk, d)
    term, sums, with_values = w, [], []
    for j in range(1, 2 * degree + 1):
        term = term[..., None] * u.reshape(u.shape[:2] + (1,) * (j - 1) + u.shape[2:])
        sums.append(term.sum(dim=1))
        if j <= degree:
            with_values.append(torch.einsum("qk...,kp->q...p", term, v))
    return [*sums, *with_values]


def partials(
    queries: NDArray[np.floating],
    keys: NDArray[np.floating],
    values: NDArray[np.floating],
    *,
    kernel: Kernel,
    bandwidth: NDArray[np.floating],
    sample_weight: NDArray[np.floating] | None = None,
    exclude: NDArray[np.integer] | None = None,
    moments: int = 0,
    device: str | torch.device | None = None,
) -> Partials:
    """Exact partial sums of every query over every key, computed on a torch device.

    Parameters
    ----------
    queries : ndarray of shape (m, d)
    keys : ndarray of shape (n, d)
    values : ndarray of shape (n, p)
    kernel : Kernel
    bandwidth : ndarray of shape (d,)
    sample_weight : ndarray of shape (n,), optional
    exclude : ndarray of shape (m,), optional
        For each query, the index of one key left out of its sums (``-1`` for none).
    moments : int, default 0
        The degree of a local polynomial fit whose moment sums to carry as well (see
        :func:`nadaraya.backends.reference.partials`).
    device : str or torch.device, optional
        Where the blocks are computed: ``"cpu"`` (default), ``"cuda"``, ``"cuda:1"``, ...

    Returns
    -------
    Partials
        NumPy arrays of the inputs' dtype (float32 stays float32).

    Raises
    ------
    ValueError
        For a negative or non-integer ``moments``, or a ``device`` torch cannot use here.

    Examples
    --------
    >>> import numpy as np
    >>> from nadaraya.kernels import get
    >>> x = np.array([[1.0], [2.0], [3.0]]); v = np.array([[3.0], [5.0], [4.0]])
    >>> p = partials(np.array([[2.5]]), x, v, kernel=get("gaussian"), bandwidth=np.ones(1))
    >>> round(float(p.finalize()[0, 0]), 2)
    4.27
    >>> p = partials(np.array([[2.5]]), x, v, kernel=get("gaussian"), bandwidth=np.ones(1), moments=1)
    >>> [s.shape for s in p.moments]
    [(1, 1), (1, 1, 1), (1, 1, 1)]
    """
    moments = int(moments)  # checked against CAPABILITIES by nadaraya.backends.compute
    dev = resolve_device(device)
    dtype = np.dtype(queries.dtype)
    if dtype not in _DTYPES:
        raise ValueError(f"the torch backend computes float32 or float64 arrays; got queries of {dtype}")
    m, d = queries.shape
    n, p = keys.shape[0], values.shape[1]
    shapes = moment_shapes(moments, d, p)
    log_domain = kernel.log_profile is not None
    if m == 0:
        return empty_partials(0, p, dtype, log_domain, shapes)
    inv_h = [float(x) for x in (1.0 / np.asarray(bandwidth, dtype=np.float64)).astype(dtype)]
    qs, ks, vs = (_to(a.astype(dtype, copy=False), dev, device) for a in (queries, keys, values))
    log_sw = sw = None
    if sample_weight is not None:
        if log_domain:  # the log as the reference takes it (in the weights' own dtype)
            with np.errstate(divide="ignore"):
                log_sw = _to(np.log(sample_weight).astype(dtype, copy=False), dev, device)
        else:
            sw = _to(np.asarray(sample_weight).astype(dtype, copy=False), dev, device)
    ex = None if exclude is None else _to(np.asarray(exclude, dtype=np.int64), dev, device)
    bq, bk = block_sizes(m, n, dtype.itemsize, per_pair=d ** (2 * moments))
    # the results, allocated once: each query block's partials are copied in and freed, so no
    # small tensor outlives its block (kept ones pinned the heap: glibc's RSS grew to 0.7 GB)
    res = empty_partials(m, p, dtype, log_domain, shapes)
    fields = [res.shift, res.weight, res.value, *res.moments]
    with torch.no_grad():
        for q0 in range(0, m, bq):
            q1 = min(m, q0 + bq)
            part = _query_block(qs, ks, vs, q0, q1, bk, kernel, inv_h, log_sw, sw, ex, moments, shapes)
            for dst, src in zip(fields, [part.shift, part.weight, part.value, *part.moments]):
                dst[q0:q1] = src.cpu().numpy()
    return res


def _query_block(
    qs: torch.Tensor, ks: torch.Tensor, vs: torch.Tensor, q0: int, q1: int, bk: int, kernel: Kernel,
    inv_h: list[float], log_sw: torch.Tensor | None, sw: torch.Tensor | None, ex: torch.Tensor | None,
    moments: int, shapes: list[tuple[int, ...]],
) -> Any:
    """The partials of queries ``q0:q1`` over every key block, merged on the device (tensors)."""
    log_domain = kernel.log_profile is not None
    n, p = ks.shape[0], vs.shape[1]
    q = qs[q0:q1]
    acc = _OnDevice(
        q.new_full((q1 - q0,), -np.inf if log_domain else 0.0), q.new_zeros(q1 - q0), q.new_zeros(q1 - q0, p),
        tuple(q.new_zeros(q1 - q0, *shape) for shape in shapes),
    )
    exq = None if ex is None else ex[q0:q1]
    for k0 in range(0, n, bk):
        k1 = min(n, k0 + bk)
        w = _block_weights(q, ks[k0:k1], kernel, inv_h, None if log_sw is None else log_sw[k0:k1],
                           None if sw is None else sw[k0:k1])
        if exq is not None:
            rows = torch.nonzero((exq >= k0) & (exq < k1)).flatten()
            if rows.numel():
                w[rows, exq[rows] - k0] = -torch.inf if log_domain else 0.0
        if log_domain:
            shift = w.amax(dim=1)
            w = w.sub_(torch.where(torch.isfinite(shift), shift, 0.0)[:, None]).exp_()
        else:
            shift = q.new_zeros(q1 - q0)
        v = vs[k0:k1]
        extra = tuple(_moment_sums(w, q, ks[k0:k1], v, moments)) if moments else ()
        acc = merge(acc, _OnDevice(shift, w.sum(dim=1), w @ v, extra), xp=torch)
    return acc
