"""Density constants: each kernel's normalising constant, the categorical probabilities, log-domain helpers.

The engine sums each key's weight as ``exp(log_profile(u))`` (log-domain kernels, whose
log-profile drops the kernel's constant) or ``profile(u)`` (the others, already normalised):
:func:`log_kernel_constant` is what turns those sums into kernel densities. Categorical columns
weigh a key by a probability of the query's category given the key's (:class:`Categories`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray

from nadaraya._core import call as _call
from nadaraya._core.nearest import FAR_LOG_WEIGHT
from nadaraya.kernels import Kernel
from nadaraya.kernels import get as get_kernel
from nadaraya.local import fit as _fit
from nadaraya.local import job as _job
from nadaraya.local.mixed import Categorical
from nadaraya.partials import Partials

__all__ = ["Categories", "log_density", "log_kde", "log_kernel_constant", "log_probability"]


def log_kernel_constant(kernel: Kernel, d: int) -> float:
    """``log`` of the factor that turns the engine's sum of a product kernel over ``d``
    continuous columns into the sum of the normalised kernel (before the ``1 / prod h``).

    Raises
    ------
    ValueError
        For a kernel that is not a density (the constant kernel).

    Examples
    --------
    >>> from nadaraya.kernels import get
    >>> round(log_kernel_constant(get("gaussian"), 2), 6) == round(-math.log(2 * math.pi), 6)
    True
    >>> log_kernel_constant(get("epanechnikov"), 3)
    0.0
    """
    if not math.isfinite(kernel.integral):
        raise ValueError(f"kernel={kernel.name!r} does not integrate to 1; a density needs a kernel "
                         "that does (e.g. 'gaussian', 'epanechnikov')")
    if kernel.log_profile is None:
        return 0.0
    zero = np.zeros(1)
    one = math.log(float(kernel.profile(zero)[0])) - float(kernel.log_profile(zero)[0])
    return d * one


def log_probability(
    kind: str, kernel: str, lam: float, levels: NDArray[np.float64], a: NDArray[np.float64],
    b: NDArray[np.float64],
) -> NDArray[np.float64]:
    """``log L(a | b)``, the probability of category ``a`` (queries, shape (m,)) given a key's
    ``b`` (shape (G,)), shape (m, G), for one column with the training levels ``levels``.

    ``classic``: Aitchison-Aitken (``u``: ``1 - lambda`` equal, ``lambda / (c - 1)`` else) and
    Wang-van Ryzin (``o``: ``1 - lambda`` equal, ``(1 - lambda) / 2 lambda^|a - b|`` else), as
    statsmodels defines them. ``li-racine``: ``1`` equal, ``lambda`` (``u``) or
    ``lambda^|a - b|`` (``o``) else, divided by their sum over the training levels so that
    they are probabilities.

    Examples
    --------
    >>> lv = np.array([0.0, 1.0, 2.0])
    >>> np.exp(log_probability("u", "classic", 0.3, lv, np.array([0.0]), lv)).round(3).tolist()
    [[0.7, 0.15, 0.15]]
    >>> np.exp(log_probability("u", "li-racine", 0.5, lv, lv, lv)).sum(axis=0).round(12).tolist()
    [1.0, 1.0, 1.0]
    """
    diff = np.abs(a[:, None] - b[None, :])
    equal = diff == 0
    c = levels.size
    with np.errstate(divide="ignore", invalid="ignore"):
        if kernel == "li-racine":
            log_lam = math.log(lam) if lam > 0 else -math.inf
            raw = np.where(equal, 0.0, log_lam * (diff if kind == "o" else 1.0))
            if kind == "o":
                dl = np.abs(levels[:, None] - b[None, :])
                norm = np.log(np.where(dl == 0, 1.0, lam**dl).sum(axis=0))
            else:
                norm = np.full(b.shape, math.log1p((c - 1) * lam))
            return raw - norm[None, :]  # type: ignore[no-any-return]
        same = math.log1p(-lam)
        if kind == "o":
            other = math.log((1.0 - lam) / 2.0) + diff * (math.log(lam) if lam > 0 else -math.inf)
        else:
            other = np.full(diff.shape, math.log(lam / (c - 1)) if c > 1 and lam > 0 else -math.inf)
        return np.where(equal, same, other)  # type: ignore[no-any-return]


@dataclass
class Categories(Categorical):
    """The categorical columns of a density: :meth:`log_factor` is the log probability of the
    query's categories given a key group's (``convolved``: ``log sum_l L(l | a) L(l | b)``,
    the categorical part of ``integral f^2`` in least-squares cross-validation)."""

    values: list[NDArray[np.float64]] = field(default_factory=list)  # training levels per column
    convolved: bool = False

    @classmethod
    def of(cls, base: Categorical, convolved: bool = False) -> Categories:
        """The density's view of validated categorical columns."""
        values = [np.unique(base.keys[:, j]) for j in range(base.keys.shape[1])]
        return cls(base.kinds, base.keys, base.queries, base.lambdas, base.levels, base.kernel,
                   values, convolved)

    def log_factor(self, queries: NDArray[np.float64], cats: NDArray[np.float64]) -> NDArray[np.float64]:
        """Queries (m, dk) by key tuples (G, dk): the log of the product of the probabilities."""
        out = np.zeros((queries.shape[0], cats.shape[0]))
        for j, kind in enumerate(self.kinds):
            lam, lv = float(self.lambdas[j]), self.values[j]
            if self.convolved:
                la = log_probability(kind, self.kernel, lam, lv, lv, queries[:, j])  # (L, m)
                lb = log_probability(kind, self.kernel, lam, lv, lv, cats[:, j])  # (L, G)
                with np.errstate(divide="ignore"):  # probabilities: no overflow; 0 gives -inf
                    out += np.log(np.exp(la).T @ np.exp(lb))
            else:
                out += log_probability(kind, self.kernel, lam, lv, queries[:, j], cats[:, j])
        return out


def log_density(parts: Partials, log_const: float) -> NDArray[np.float64]:
    """``shift + log(weight) + log_const`` of partials with unit values (float64): the log of
    the represented sum of weights times ``exp(log_const)``; ``-inf`` where no key weighs.

    Examples
    --------
    >>> p = Partials(np.array([-800.0, 0.0]), np.array([2.0, 0.0]), np.ones((2, 1)))
    >>> log_density(p, 0.0).round(4).tolist()
    [-799.3069, -inf]
    """
    shift = np.asarray(parts.shift, dtype=np.float64)
    weight = np.asarray(parts.weight, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(weight > 0, shift + np.log(np.where(weight > 0, weight, 1.0)), -np.inf)
    return out + log_const  # type: ignore[no-any-return]


def _continuous_partials(job: _job.Job, exclude: NDArray[np.intp] | None, backend: str) -> Partials:
    """The partials of a job without categorical columns, each sum (not only each ratio)
    within ``job.tol``; queries far from every key exact in the log domain."""
    call = job.call
    parts, choice = _call.compute_partials(call, exclude=exclude, backend=backend, tol=job.tol, merged=True)
    if call.kernel.log_domain and choice.name != "reference":
        far = np.nonzero(~(parts.shift >= FAR_LOG_WEIGHT))[0]
        if far.size:
            sub = _call.Call(call.queries[far], call.keys, call.values, False, call.kernel, call.bandwidth,
                               call.sample_weight)
            fix, _ = _call.compute_partials(sub, exclude=None if exclude is None else exclude[far],
                                              backend="reference")
            for name in ("shift", "weight", "value"):
                getattr(parts, name)[far] = getattr(fix, name)
    return parts


def log_kde(
    queries: ArrayLike | None,
    keys: ArrayLike,
    *,
    kernel: str | Kernel = "gaussian",
    bandwidth: ArrayLike = 1.0,
    var_types: str | None = None,
    categorical_kernel: str = "classic",
    sample_weight: ArrayLike | None = None,
    backend: str = "auto",
    tol: float | None = None,
    convolved: bool = False,
) -> NDArray[np.float64]:
    r"""The log kernel density of ``keys`` at each query, from pool's partial sums with unit values.

    .. math::

        \log \hat f(q) = \log \frac{\sum_i s_i \prod_{c} h_c^{-1} K((q_c - k_{ic}) / h_c)
                                 \prod_{o,u} L(q_j \mid k_{ij}, \lambda_j)}{\sum_i s_i}

    ``queries=None`` leaves each key out of its own sum (leave-one-out, masked inside the sums;
    the total weight is then ``sum_i s_i - s_i``). ``convolved=True`` gives the sum of the
    convolved kernel (``K * K`` at the keys themselves, the Gaussian kernel only: its
    convolution is the Gaussian at ``sqrt(2) h``), so that ``integral f^2 = sum_i s_i
    exp(log_kde(keys, keys, convolved=True))_i / sum_i s_i``. ``tol``: each sum within a
    relative ``tol / 2.1`` (so the log density within ``log(1 + tol)``) where a faster method
    allows it. Returns float64 of shape (m,); ``-inf`` where no key weighs (a compact kernel).

    Examples
    --------
    >>> import numpy as np
    >>> bool(np.exp(log_kde([0.0], [0.0], bandwidth=1.0))[0] == 1 / np.sqrt(2 * np.pi))
    True
    """
    k = get_kernel(kernel)
    if backend == "binned":
        raise ValueError("backend='binned' certifies each ratio of sums (a prediction), not each sum: a "
                         "density needs its sums within tol; leave backend='auto' (which takes the Taylor "
                         "series where it pays) or name an exact backend")
    dtype = np.result_type(getattr(keys, "dtype", np.float64), np.float32)
    keys_arr = np.asarray(keys)
    n = keys_arr.shape[0]
    if convolved and k.name != "gaussian":
        raise ValueError(f"convolved sums need the gaussian kernel; got kernel={k.name!r}")
    job = _job.prepare(queries, keys_arr, np.ones(n, dtype=dtype), kernel=k, bandwidth=bandwidth,
                       sample_weight=sample_weight, degree=0, var_types=var_types,
                       categorical_kernel=categorical_kernel)
    h = job.call.bandwidth.astype(np.float64)
    if job.x_exp is not None:  # the engine's columns were rescaled by powers of two (exact)
        h = np.ldexp(h, job.x_exp)
    if convolved:
        job.call.bandwidth = job.call.bandwidth * math.sqrt(2.0)
        h = h * math.sqrt(2.0)
    job.tol = tol
    exclude = np.arange(n) if queries is None else None
    if job.cat is None:
        parts = _continuous_partials(job, exclude, backend)
    else:
        job.cat = Categories.of(job.cat, convolved)
        parts = _fit.partials(job, exclude, backend)
    sw = job.call.sample_weight
    w = np.ones(n) if sw is None else sw.astype(np.float64)
    total = w.sum() - (w if exclude is not None else 0.0)
    with np.errstate(divide="ignore"):
        log_total = np.log(total)
    const = log_kernel_constant(k, h.size) - float(np.log(h).sum())
    return log_density(parts, const) - log_total  # type: ignore[no-any-return]
