"""The metrics of KernelPooling beyond its default: linear maps, heads and learned categorical lambdas."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from nadaraya.kernels import Kernel
from nadaraya.local.mixed import as_var_types
from nadaraya.nn._far import _far_query_limit
from nadaraya.nn._inputs import _check_sizes
from nadaraya.nn._scores import Scorer, _kernel_scorer, _Mask

METRICS: tuple[str, ...] = ("diagonal", "low_rank", "full")
COMBINES: tuple[str, ...] = ("concat", "mean")


@dataclass(frozen=True)
class MetricSpec:
    """How a :class:`KernelPooling` maps ``q - k`` to ``u``: the options of the layer, checked.

    ``cont`` are the continuous columns (the metric acts on them), ``ordered`` and ``unordered``
    the categorical ones (one learned lambda each, Li-Racine factors); ``features`` the number of
    input columns when known (``None``: the default diagonal metric, any number).
    """

    metric: str
    heads: int
    combine: str
    features: int | None
    cont: tuple[int, ...]
    ordered: tuple[int, ...]
    unordered: tuple[int, ...]
    var_types: str | None

    @property
    def categorical(self) -> tuple[int, ...]:
        """The categorical columns in the order of ``var_types`` (that of ``logit_lambda``)."""
        return tuple(sorted(self.ordered + self.unordered))

    @property
    def is_default(self) -> bool:
        """The layer as it was before metrics: one shared or per-feature bandwidth, one head."""
        return self.metric == "diagonal" and self.heads == 1 and not self.categorical


def check_spec(
    metric: str,
    n_components: int | None,
    in_features: int | None,
    heads: int,
    combine: str,
    var_types: str | None,
    components: Tensor | None,
) -> tuple[MetricSpec, int | None]:
    """The checked options and the number of components (None for the diagonal metric)."""
    if metric not in METRICS:
        raise ValueError(f"metric={metric!r} is not valid; use one of {', '.join(map(repr, METRICS))}")
    if combine not in COMBINES:
        raise ValueError(f"combine={combine!r} is not valid; use one of {', '.join(map(repr, COMBINES))}")
    _check_sizes(heads=heads, in_features=in_features)
    if var_types is not None:
        if not isinstance(var_types, str):
            raise ValueError(f"var_types must be a string of 'c', 'o' and 'u' per column; got {var_types!r}")
        if in_features is not None and len(var_types) != in_features:
            raise ValueError(
                f"var_types={var_types!r} has {len(var_types)} letters but in_features={in_features}"
            )
        in_features = len(var_types)
        var_types = as_var_types(var_types, in_features)
    given = None if components is None else tuple(torch.as_tensor(components).shape)
    if given and metric != "diagonal":  # sizes from the starting map
        in_features = in_features if in_features is not None or var_types is not None else given[-1]
        n_components = n_components if n_components is not None or len(given) < 2 else given[-2]
    if metric != "diagonal" and in_features is None:
        raise ValueError(f"metric={metric!r} needs in_features (or var_types, or components) to size its map")
    vt = var_types or ("c" * in_features if in_features is not None else "")
    cont = tuple(j for j, c in enumerate(vt) if c == "c")
    if var_types is not None and not cont:
        raise ValueError(f"var_types={var_types!r} has no continuous column 'c' for the metric to act on")
    spec = MetricSpec(
        metric, heads, combine, in_features, cont,
        tuple(j for j, c in enumerate(vt) if c == "o"), tuple(j for j, c in enumerate(vt) if c == "u"),
        var_types,
    )
    d = len(cont)
    if metric == "diagonal":
        if n_components is not None:
            raise ValueError(
                f"n_components={n_components!r} is for metric='low_rank'; the diagonal metric has none"
            )
        if components is not None:
            raise ValueError("components is for metric='low_rank' or 'full', not the diagonal metric")
        return spec, None
    if metric == "full":
        if n_components is not None and n_components != d:
            raise ValueError(
                f"n_components={n_components!r}: metric='full' maps the {d} continuous features to "
                f"{d}; use metric='low_rank' for fewer"
            )
        return spec, d
    if n_components is None or isinstance(n_components, bool) or not isinstance(n_components, int) \
            or not 1 <= n_components <= d:
        raise ValueError(
            f"metric='low_rank' needs n_components, an int in [1, {d}] (the continuous features); "
            f"got {n_components!r}"
        )
    return spec, n_components


def initial_tensors(
    spec: MetricSpec, n_rows: int | None, h: Tensor, components: Tensor | None,
    lambdas: float | Sequence[float] | Tensor,
) -> dict[str, Tensor]:
    """The layer's learned tensors by name, in float64: ``log_bandwidth`` (diagonal; for the
    default layer ``log h`` as given) or ``components``, and ``logit_lambda`` with categorical columns."""
    out: dict[str, Tensor] = {}
    if spec.metric == "diagonal":
        out["log_bandwidth"] = torch.log(h) if spec.is_default else initial_log_bandwidth(spec, h)
    else:
        assert n_rows is not None
        out["components"] = initial_components(spec, n_rows, h, components)
    if spec.categorical:
        out["logit_lambda"] = initial_logit_lambda(spec, lambdas)
    return out


def initial_components(
    spec: MetricSpec, k: int, h: Tensor, components: Tensor | Sequence[float] | None
) -> Tensor:
    """The starting map in float64: ``components`` when given (shape (k, d), or (heads, k, d)),
    else orthonormal rows (:func:`torch.nn.init.orthogonal_`, one draw per head) times ``1 / h``
    per feature, so that ``metric="full"`` starts at the diagonal metric's distances."""
    d, heads = len(spec.cont), spec.heads
    shape = (k, d) if heads == 1 else (heads, k, d)
    if components is not None:
        a = torch.as_tensor(components, dtype=torch.float64).detach().clone()
        if a.shape == (k, d) and heads > 1:
            a = a.expand(heads, k, d).clone()
        if tuple(a.shape) != shape or not bool(torch.isfinite(a).all()):
            raise ValueError(
                f"components must be finite, of shape {shape} (or {(k, d)}); got {tuple(a.shape)}"
            )
        return a
    if h.numel() not in (1, d):
        raise ValueError(f"bandwidth has {h.numel()} entries but the metric acts on {d} continuous features")
    a = torch.empty(heads, k, d, dtype=torch.float64)
    for i in range(heads):
        torch.nn.init.orthogonal_(a[i])
    return (a / h.reshape(-1)).reshape(shape)


def initial_log_bandwidth(spec: MetricSpec, h: Tensor) -> Tensor:
    """``log h`` for the diagonal metric; several heads start at scales a factor 2 apart
    around ``h`` (identical heads would stay identical under ``combine="mean"``)."""
    if h.ndim == 1 and spec.var_types is not None and h.numel() not in (1, len(spec.cont)):
        raise ValueError(
            f"bandwidth has {h.numel()} entries but var_types has {len(spec.cont)} continuous columns"
        )
    log_h = torch.log(h)
    if spec.heads == 1:
        return log_h
    spread = (torch.arange(spec.heads, dtype=torch.float64) - (spec.heads - 1) / 2) * math.log(2.0)
    return log_h[None] + spread.reshape(-1, *([1] * log_h.ndim))


def initial_logit_lambda(spec: MetricSpec, lambdas: float | Sequence[float] | Tensor) -> Tensor:
    """``logit(lambda)`` per categorical column (and head), lambdas in (0, 1)."""
    c = len(spec.categorical)
    try:
        lam = torch.as_tensor(lambdas, dtype=torch.float64).detach().clone().reshape(-1)
    except (TypeError, ValueError, RuntimeError) as exc:
        raise ValueError(f"lambdas must be numbers in (0, 1); got {lambdas!r:.80} ({exc})") from None
    if lam.numel() not in (1, c) or not bool(((lam > 0) & (lam < 1)).all()):
        raise ValueError(
            f"lambdas must be one number in (0, 1) or one per categorical column ({c}); got {lambdas!r}"
        )
    logit = torch.logit(lam.expand(c).clone())
    return logit if spec.heads == 1 else logit.expand(spec.heads, c).clone()


def _mixed_scorer(kernel: Kernel, a: int, n_ordered: int, n_unordered: int) -> Scorer:
    """The kernel of the first ``a`` coordinates (the mapped continuous columns) times one
    Li-Racine factor per categorical coordinate (``n_ordered`` ordered ones first):
    ``lambda ** |q_j - k_j|`` (ordered) or ``lambda ** [q_j != k_j]`` (unordered), with
    ``log lambda`` per batch row as the scorer's parameter."""
    inner = _kernel_scorer(kernel, a)

    def categorical(qb: Tensor, kb: Tensor, log_lam: Tensor) -> Tensor:
        diff = qb[:, :, None, a:] - kb[:, None, :, a:]
        dist = torch.cat([diff[..., :n_ordered].abs(), (diff[..., n_ordered:] != 0).to(diff.dtype)], -1)
        return (dist * log_lam[:, None, None, :]).sum(-1)

    def fn(qb: Tensor, kb: Tensor, log_lam: Tensor) -> Tensor:
        s = inner.fn(qb[..., :a], kb[..., :a])
        cat = categorical(qb, kb, log_lam)
        return s + cat if inner.log_domain else s * torch.exp(cat)

    return Scorer(fn, inner.log_domain, 2 * (a + n_ordered + n_unordered))


def project(
    spec: MetricSpec, kernel: Kernel, q: Tensor, k: Tensor, scale: Tensor, logit_lambda: Tensor | None
) -> tuple[Tensor, Tensor, Scorer, tuple[Tensor, ...]]:
    """``(qa, ka, scorer, params)`` for :meth:`KernelPooling._project`: the mapped continuous
    columns (then the categorical ones, untouched and without gradient), heads folded into the
    batch axis (row ``b * heads + h``). ``scale`` is ``log h`` (diagonal) or the map ``A``."""
    d = q.shape[-1]
    if k.shape[-1] != d:
        raise ValueError(f"queries and keys must have the same number of features; got {d} and {k.shape[-1]}")
    if spec.features is not None and d != spec.features:
        raise ValueError(
            f"this layer takes {spec.features} features (in_features / var_types); the inputs have {d}"
        )
    heads = spec.heads
    cat = spec.ordered + spec.unordered
    qc, kc = (q, k) if not cat else (q[..., list(spec.cont)], k[..., list(spec.cont)])
    if spec.metric == "diagonal":
        dc = qc.shape[-1]
        per_head = scale.shape[-1] if scale.ndim > (heads > 1) else 1
        if per_head not in (1, dc):
            raise ValueError(
                f"this layer has {per_head} bandwidths (per head) but the inputs have {dc} continuous columns"
            )
        w = (-scale).exp().to(q.dtype).reshape(heads, 1, -1)
        qa, ka = qc[:, None] * w, kc[:, None] * w
    else:
        a = scale.to(q.dtype).reshape(heads, -1, scale.shape[-1])
        qa, ka = torch.einsum("bmd,hkd->bhmk", qc, a), torch.einsum("bnd,hkd->bhnk", kc, a)
    width = qa.shape[-1]
    if cat:
        qa = torch.cat([qa, q[:, None, :, list(cat)].detach().expand(-1, heads, -1, -1)], -1)
        ka = torch.cat([ka, k[:, None, :, list(cat)].detach().expand(-1, heads, -1, -1)], -1)
    qa, ka = qa.flatten(0, 1), ka.flatten(0, 1)
    if not cat:
        return qa, ka, _kernel_scorer(kernel, width), ()
    assert logit_lambda is not None
    order = [spec.categorical.index(j) for j in cat]  # logit_lambda follows var_types
    log_lam = F.logsigmoid(logit_lambda).to(q.dtype).reshape(heads, -1)[:, order]
    params = (log_lam.repeat(q.shape[0], 1),)  # (B * heads, c): row b * heads + h has head h's
    return qa, ka, _mixed_scorer(kernel, width, len(spec.ordered), len(spec.unordered)), params


def far_limit(
    spec: MetricSpec, kernel: Kernel, q: Tensor, k: Tensor, v: Tensor, allowed: _Mask, bi: Tensor, ii: Tensor,
    scale: Tensor, logit_lambda: Tensor | None,
) -> tuple[Tensor, Tensor]:
    """The far-query limit (:func:`._far._far_query_limit`) in the mapped continuous coordinates
    (``v`` and ``allowed`` with the heads folded, as the forward has them)."""
    qa, ka, _, _ = project(spec, kernel, q, k, scale, logit_lambda)
    a = qa.shape[-1] - len(spec.ordered) - len(spec.unordered)
    zero = torch.zeros((), dtype=torch.float64, device=q.device)
    return _far_query_limit(kernel.name, zero, qa[..., :a], ka[..., :a], v, allowed, bi, ii)
