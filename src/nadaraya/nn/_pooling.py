"""The attention-pooling modules: how each projects and scores, and their shared forward."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import torch
from torch import Tensor, nn

from nadaraya.kernels import Kernel
from nadaraya.kernels import get as get_kernel
from nadaraya.nn._chunked import Plan, _ChunkedPool, _SdpaPool, _weights, block_sizes
from nadaraya.nn._far import _far_query_limit
from nadaraya.nn._heads import combine_outputs, fold, split_weights
from nadaraya.nn._inputs import _check_sizes, _flatten, _Inputs, _same_dtype
from nadaraya.nn._metric import MetricSpec, check_spec, far_limit, initial_tensors, project
from nadaraya.nn._scores import Scorer, _additive_fn, _dot_fn, _dot_identity, _kernel_scorer, _Mask

__all__ = [
    "AdditiveAttentionPooling",
    "AveragePooling",
    "DotProductAttentionPooling",
    "KernelPooling",
]

Method = Literal["auto", "sdpa", "chunked"]
METHODS: tuple[str, ...] = ("auto", "sdpa", "chunked")
#: the dtypes whose chunked path computes in float32
HALF = (torch.float16, torch.bfloat16)


# --------------------------------------------------------------------------------------------
# The shared forward: the choice of path, far queries, and the weights for inspection
# --------------------------------------------------------------------------------------------


class _Pooling(nn.Module):
    """Shared forward of the pooling modules: subclasses say how to project and score."""

    method: str

    def _check_method(self, method: str) -> str:
        if method not in METHODS:
            raise ValueError(f"method={method!r} is not valid; use one of {', '.join(map(repr, METHODS))}")
        return method

    def _project(self, q: Tensor, k: Tensor) -> tuple[Tensor, Tensor, Scorer, tuple[Tensor, ...]]:
        raise NotImplementedError

    def _fold(self, x: _Inputs) -> _Inputs:
        """The inputs with values and masks repeated per head, as ``_project`` folds heads."""
        return x

    def _combine(self, out: Tensor, weights: bool = False) -> Tensor:
        """Outputs (or weights) of the folded heads, combined (or split out per head)."""
        return out

    def path(self, queries: Tensor, keys: Tensor) -> str:
        """Which computation a call takes: ``"sdpa"`` (fused attention) or ``"chunked"``.

        Examples
        --------
        >>> import torch
        >>> from nadaraya.nn import KernelPooling
        >>> x = torch.zeros(4, 1)
        >>> KernelPooling("gaussian").path(x, x), KernelPooling("epanechnikov").path(x, x)
        ('sdpa', 'chunked')
        """
        x = _flatten(queries, keys, keys[..., :1], None, None)
        qa, ka, scorer, _ = self._project(x.q, x.k)
        return self._route(scorer, qa, ka)

    def _choose(self, scorer: Scorer) -> str:
        if self.method == "sdpa" and scorer.sdpa is None:
            raise ValueError(f"method='sdpa' is not available for {self!r}; use 'chunked' or 'auto'")
        if self.method == "chunked" or scorer.sdpa is None:
            return "chunked"
        return "sdpa"

    def forward(
        self,
        queries: Tensor,
        keys: Tensor,
        values: Tensor,
        mask: Tensor | None = None,
        *,
        exclude: Tensor | None = None,
        return_weights: bool = False,
    ) -> Tensor | tuple[Tensor, Tensor]:
        """Pool ``values`` at each query; see the class docstring for the shapes.

        Parameters
        ----------
        queries : Tensor of shape (..., m, d)
        keys : Tensor of shape (..., n, d)
        values : Tensor of shape (..., n, p) or (..., n)
        mask : bool Tensor of shape (..., m, n), optional
            True where a query may attend to a key (torch's ``attn_mask`` convention); a
            query left with no key gets NaN.
        exclude : int Tensor of shape (..., m), optional
            One key index per query to leave out (``-1``: none); ``arange(n)`` with the keys
            as queries gives leave-one-out predictions without an (m, n) mask on the chunked
            path (the fused path builds one).
        return_weights : bool, default False
            Also return the (..., m, n) attention weights (materialised: for inspection).

        Returns
        -------
        Tensor of shape (..., m, p) or (..., m)
            And the weights when ``return_weights``.
        """
        x = _flatten(queries, keys, values, mask, exclude)
        qa, ka, scorer, params = self._project(x.q, x.k)
        x = self._fold(x)
        batch, m, n = qa.shape[0], qa.shape[1], ka.shape[1]
        stat = None
        if self._route(scorer, qa, ka) == "sdpa":
            out = _SdpaPool.apply(scorer, x.allowed.dense(m, n), qa, ka, x.v)
        else:
            if qa.dtype in HALF:
                qa, ka, scorer, params = self._widened(x.q, x.k, qa, ka, scorer, params)
            plan = Plan(scorer, x.allowed, block_sizes(batch, m, n, scorer.width, qa.element_size()))
            out, stat = _ChunkedPool.apply(plan, qa, ka, x.v.to(qa.dtype), *params)
            out = out.to(x.v.dtype)
        far = None
        if stat is not None and self._has_limit(scorer) and not bool(torch.isfinite(stat).all()):
            # log weights that all overflowed to -inf (or inf - inf): the limit, not 0 / 0
            bad = ~torch.isfinite(stat) & x.allowed.has_key(batch, m, n, stat.device)
            bi, ii = torch.nonzero(bad, as_tuple=True)
            if bi.numel():
                far = (bi, ii, *self._far_limit(x.q, x.k, x.v, x.allowed, bi, ii))
                out = out.index_put((bi, ii), far[2])
        out = self._combine(out)
        out = out.reshape(*x.batch_shape, *out.shape[1:])
        if x.squeeze:
            out = out[..., 0]
        if not return_weights:
            return out
        w = _weights(scorer, qa, ka, params, x.allowed).to(x.v.dtype)
        if far is None and self._has_limit(scorer) and bool(torch.isnan(w).any()):
            # the fused path's output was right, but the weights' softmax overflowed
            bad = torch.isnan(w).any(-1) & x.allowed.has_key(batch, m, n, w.device)
            bi, ii = torch.nonzero(bad, as_tuple=True)
            if bi.numel():
                far = (bi, ii, *self._far_limit(x.q, x.k, x.v, x.allowed, bi, ii))
        if far is not None:
            w = w.index_put(far[:2], far[3].to(w.dtype))
        w = self._combine(w, weights=True)
        return out, w.reshape(*x.batch_shape, *w.shape[1:])

    def _widened(
        self, q: Tensor, k: Tensor, qa: Tensor, ka: Tensor, scorer: Scorer, params: tuple[Tensor, ...]
    ) -> tuple[Tensor, Tensor, Scorer, tuple[Tensor, ...]]:
        """The chunked path's inputs in float32 for half-precision data: its scores, their
        exponentials, sums and gradients are taken in float32 (rounded once, to the output),
        as flash attention accumulates; gradients reach the half-precision inputs and
        parameters through the casts. Modules that project with their own layers keep those
        projections (``qa``, ``ka``) in their dtype."""
        wide = torch.float32
        return qa.to(wide), ka.to(wide), scorer, tuple(t.to(wide) for t in params)

    def _route(self, scorer: Scorer, qa: Tensor, ka: Tensor) -> str:
        """The path for these (projected) inputs: the fused one unless the data are empty or so
        spread out that its dot products could overflow, where the chunked path (exact in the
        log domain, with the limit for far queries) serves."""
        path = self._choose(scorer)
        if path == "chunked":
            return path
        if qa.numel() == 0 or ka.numel() == 0:
            return "chunked"
        assert scorer.sdpa is not None
        with torch.no_grad():
            q1, k1 = scorer.sdpa(qa, ka)
            bound = float(q1.abs().amax()) * float(k1.abs().amax()) * q1.shape[-1]
        return "sdpa" if bound < torch.finfo(qa.dtype).max / 4 else "chunked"

    def _has_limit(self, scorer: Scorer) -> bool:
        """Whether a query whose log weights all overflow has a limit (:meth:`_far_limit`)."""
        return False

    def _far_limit(
        self, q: Tensor, k: Tensor, v: Tensor, allowed: _Mask, bi: Tensor, ii: Tensor
    ) -> tuple[Tensor, Tensor]:
        raise NotImplementedError


# --------------------------------------------------------------------------------------------
# The modules
# --------------------------------------------------------------------------------------------


class KernelPooling(_Pooling):
    r"""Nadaraya-Watson attention pooling with a kernel of ``(q - k) / h`` and a learnable ``h``.

    The weights are those of :func:`nadaraya.pool`: ``alpha(q, k_i)`` proportional to the
    product kernel ``prod_j K((q_j - k_ij) / h_j)`` from :mod:`nadaraya.kernels`. The textbook's
    learnable model ``exp(-((q - k) w)^2 / 2)`` is the Gaussian with ``w = 1 / h``; the
    parameter is ``log h`` so that ``h`` stays positive.

    Shapes: queries (..., m, d), keys (..., n, d), values (..., n, p) or (..., n), mask
    (..., m, n); the leading dimensions broadcast. Output (..., m, p) or (..., m).

    The Gaussian runs through :func:`torch.nn.functional.scaled_dot_product_attention` by the
    augmented-dimension identity ``-|q - k|^2 / 2 = [q, 1] . [k, -|k|^2 / 2] - |q|^2 / 2``
    (after centring on the keys' mean), so torch's fused kernels serve it: on CPU
    ``_scaled_dot_product_flash_attention_for_cpu`` (also with a mask, in torch 2.13), on CUDA
    flash or memory-efficient attention (float16/bfloat16/float32; in float64 CUDA has only
    the math path, which builds the (m, n) matrix: use ``method="chunked"`` there for large
    m n). Its precision: the log weights carry an absolute
    error of about ``eps * max |k - centre|^2 / h^2``; that is negligible in float64 and
    float32 for data within a few hundred bandwidths, but in float16/bfloat16 (eps 1e-3 and
    8e-3) it is already ~0.5 at ``|k - centre| / h = 10``: use float32, or ``method="chunked"``,
    for half precision. Every other kernel (and ``method="chunked"``) runs over blocks of
    keys with a running maximum (log-domain kernels) or plain sums (compact kernels), and
    backward recomputes the blocks: memory stays within ``nadaraya.get_config()
    ["working_memory"]``, never O(m n). In float16/bfloat16 the chunked path computes
    ``(q - k) / h``, the weights, their sums and the gradients in float32 and rounds the output
    once to the inputs' dtype (gradients reach half-precision inputs and parameters as such).

    A query with no key inside a compact kernel's window, or with every key masked, gets NaN
    (the core's ``empty="nan"``) and no gradient; no warning is raised, since checking would
    synchronise the device on every call. With zero keys every query is such a query (NaN
    rows of shape (..., m, p)); zero queries give an empty (..., 0, p) output.

    A query so far from every key that all its log weights overflow (``u^2`` beyond the
    dtype's range: ``|u| > 1.3e154`` in float64, ``1.8e19`` in float32, or ``q / h`` itself
    infinite) gets the limit of the weights, the nearest key's value (in ``u``; exact ties
    share equally), never NaN; no gradient reaches ``q``, ``k`` or ``h`` from such a query.
    Data spread so far that the fused path's dot products could overflow take the chunked
    path. Both checks read one scalar per call (on CUDA, a synchronisation; cheap next to
    the attention itself).

    Second derivatives (``create_graph=True``, e.g. a Hessian in ``log h``) are exact on
    every path: the first-order backward is the fast one above, and a double backward
    recomputes the forward with autograd (O(m n) memory, as any double backward through
    attention).

    Parameters
    ----------
    kernel : str or Kernel, default "gaussian"
        A name from :mod:`nadaraya.kernels`.
    bandwidth : float or sequence of float, default 1.0
        Initial (or fixed) ``h``, positive and finite; a sequence gives one per feature.
    learnable : bool, default True
        Whether ``log h`` is an ``nn.Parameter`` (else a buffer).
    per_feature : int, optional
        Number of features for one bandwidth per feature (feature weighting), each
        initialised from ``bandwidth``. By default, inferred from ``bandwidth``: a scalar
        gives one shared ``h``.
    method : {"auto", "sdpa", "chunked"}, default "auto"
        ``"auto"`` takes SDPA for the Gaussian and chunks otherwise.
    metric : {"diagonal", "low_rank", "full"}, default "diagonal"
        How ``u`` is formed from ``q - k``: ``(q - k) / h`` (diagonal), or ``A (q - k)`` with a
        learnable ``A`` of shape (n_components, d) (low_rank) or (d, d) (full), started at
        orthonormal rows times ``1 / h`` unless ``components`` is given. See :doc:`/api/nn`.
    n_components : int, optional
        Rows of ``A`` for ``metric="low_rank"`` (required, 1 to d); ``"full"`` has d.
    in_features : int, optional
        d, the number of input columns: required by ``"low_rank"`` and ``"full"`` unless
        ``var_types`` or ``components`` gives it.
    heads : int, default 1
        Independent metrics (diagonal heads start at bandwidths a factor 2 apart around
        ``bandwidth``), pooled in one chunked call.
    combine : {"concat", "mean"}, default "concat"
        How the heads' outputs meet: (..., m, heads * p) in head-major order, or their mean.
        With ``return_weights`` each head's weights come back, (..., heads, m, n).
    var_types : str, optional
        One letter per column, ``"c"`` continuous, ``"o"`` ordered, ``"u"`` unordered (as in
        :class:`nadaraya.NadarayaWatson`): the metric acts on the continuous columns, and each
        categorical column multiplies the weights by a learned Li-Racine factor ``lambda ** |q_j
        - k_j|`` (ordered) or ``lambda ** [q_j != k_j]`` (unordered), ``lambda`` in (0, 1).
    lambdas : float or sequence of float, default 0.5
        Initial (or fixed) lambdas of the categorical columns (per head when ``heads > 1``).
    components : Tensor or array-like, optional
        Initial ``A``, (n_components, d) or (heads, n_components, d) over the continuous columns
        (it gives n_components and in_features when they are not).
    device, dtype : optional
        Of the parameter, as for torch's layers; ``log h`` is computed in float64 and then
        cast, so ``dtype=torch.float64`` keeps the given bandwidth exactly.

    Attributes
    ----------
    log_bandwidth : Tensor of shape () or (d,)
        With ``heads > 1``, (heads,) or (heads, d); absent for ``"low_rank"`` and ``"full"``.
    components : Tensor of shape (n_components, d), or (heads, n_components, d)
        ``A`` of ``"low_rank"`` and ``"full"``.
    logit_lambda : Tensor of shape (c,), or (heads, c)
        ``logit(lambda)`` of the ``c`` categorical columns, when ``var_types`` has some.

    Examples
    --------
    >>> import torch
    >>> from nadaraya.nn import KernelPooling
    >>> layer = KernelPooling("gaussian", bandwidth=2.0)
    >>> round(layer.w.item(), 3), round(layer.bandwidth.item(), 3)
    (0.5, 2.0)
    >>> q = torch.tensor([[2.5]]); k = torch.tensor([[1.0], [2.0], [3.0]])
    >>> v = torch.tensor([3.0, 5.0, 4.0])
    >>> KernelPooling(bandwidth=1.0)(q, k, v).detach().round(decimals=2)
    tensor([4.2700])

    A learned map ``A`` (2, 5), three heads concatenated, and one unordered column:

    >>> layer = KernelPooling(metric="low_rank", n_components=2, var_types="cccccu", heads=3)
    >>> layer.components.shape, layer.logit_lambda.shape
    (torch.Size([3, 2, 5]), torch.Size([3, 1]))
    >>> layer(torch.randn(4, 6), torch.randn(9, 6), torch.randn(9, 2)).shape
    torch.Size([4, 6])
    """

    _spec: MetricSpec
    log_bandwidth: Tensor
    components: Tensor
    logit_lambda: Tensor

    def __init__(
        self,
        kernel: str | Kernel = "gaussian",
        bandwidth: float | Sequence[float] | Tensor = 1.0,
        learnable: bool = True,
        per_feature: int | None = None,
        *,
        method: Method = "auto",
        metric: str = "diagonal",
        n_components: int | None = None,
        in_features: int | None = None,
        heads: int = 1,
        combine: str = "concat",
        var_types: str | None = None,
        lambdas: float | Sequence[float] | Tensor = 0.5,
        components: Tensor | None = None,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self._spec, n_rows = check_spec(
            metric, n_components, in_features, heads, combine, var_types, components
        )
        self.kernel = get_kernel(kernel)
        self.method = self._check_method(method)
        allowed = "a positive, finite number or one per feature"
        if isinstance(bandwidth, str | bytes):
            raise ValueError(f"bandwidth must be {allowed}; got the string {bandwidth!r}")
        try:
            h = torch.as_tensor(bandwidth, dtype=torch.float64).detach().clone()
        except (TypeError, ValueError, RuntimeError) as exc:
            raise ValueError(f"bandwidth must be {allowed}; got {bandwidth!r:.80} ({exc})") from None
        if h.ndim > 1 or h.numel() == 0 or not bool(torch.all(torch.isfinite(h) & (h > 0))):
            raise ValueError(
                f"bandwidth must be positive and finite, a scalar or one per feature; got {bandwidth!r}"
            )
        if per_feature is not None:
            _check_sizes(per_feature=per_feature)
            if h.ndim == 1 and h.numel() not in (1, per_feature):
                raise ValueError(f"bandwidth has {h.numel()} entries but per_feature={per_feature}")
            h = h.reshape(-1).expand(per_feature).clone() if h.numel() == 1 else h
        for name, value in initial_tensors(self._spec, n_rows, h, components, lambdas).items():
            value = value.to(device=device, dtype=dtype or torch.get_default_dtype())
            if learnable:
                setattr(self, name, nn.Parameter(value))
            else:
                self.register_buffer(name, value)

    @property
    def metric(self) -> str:
        """``"diagonal"``, ``"low_rank"`` or ``"full"``."""
        return self._spec.metric

    @property
    def heads(self) -> int:
        """The number of heads."""
        return self._spec.heads

    @property
    def lambdas(self) -> Tensor:
        """The categorical columns' ``lambda = sigmoid(logit_lambda)`` (in the order of ``var_types``)."""
        return torch.sigmoid(self.logit_lambda)

    @property
    def bandwidth(self) -> Tensor:
        """``h = exp(log h)``: a scalar, or one per feature (per head with ``heads > 1``)."""
        return self._log_h().exp()

    @property
    def w(self) -> Tensor:
        """The textbook's parameter ``w = 1 / h``."""
        return (-self._log_h()).exp()

    def _log_h(self) -> Tensor:
        if self._spec.metric != "diagonal":
            raise AttributeError(f"metric={self._spec.metric!r} has no bandwidth; its map A is .components")
        return self.log_bandwidth

    def _scale(self) -> Tensor:
        return self.log_bandwidth if self._spec.metric == "diagonal" else self.components

    def _fold(self, x: _Inputs) -> _Inputs:
        return fold(x, self._spec.heads, self._spec.combine)

    def _combine(self, out: Tensor, weights: bool = False) -> Tensor:
        if weights:
            return split_weights(out, self._spec.heads)
        return combine_outputs(out, self._spec.heads, self._spec.combine)

    def _project(self, q: Tensor, k: Tensor) -> tuple[Tensor, Tensor, Scorer, tuple[Tensor, ...]]:
        if not self._spec.is_default:
            return project(self._spec, self.kernel, q, k, self._scale(), getattr(self, "logit_lambda", None))
        d = q.shape[-1]
        if k.shape[-1] != d:
            raise ValueError(
                f"queries and keys must have the same number of features; got {d} and {k.shape[-1]}"
            )
        lh = self.log_bandwidth
        if lh.ndim == 1 and lh.numel() not in (1, d):
            raise ValueError(
                f"this layer has {lh.numel()} bandwidths (per_feature) but the inputs have {d} features"
            )
        w = (-lh).exp().to(q.dtype)
        return q * w, k * w, _kernel_scorer(self.kernel, d), ()

    def _widened(
        self, q: Tensor, k: Tensor, qa: Tensor, ka: Tensor, scorer: Scorer, params: tuple[Tensor, ...]
    ) -> tuple[Tensor, Tensor, Scorer, tuple[Tensor, ...]]:
        """``(q - k) / h`` from the inputs in float32: in half precision ``q / h`` alone rounds
        away the differences between nearby points (bfloat16 keeps 8 bits: at ``q / h = 300``
        they come in steps of 2, so a compact window holds only ``u = 0`` and every gradient
        through it is zero)."""
        return self._project(q.to(torch.float32), k.to(torch.float32))

    def _has_limit(self, scorer: Scorer) -> bool:
        return self.kernel.log_profile is not None and self.kernel.name != "constant"

    def _far_limit(
        self, q: Tensor, k: Tensor, v: Tensor, allowed: _Mask, bi: Tensor, ii: Tensor
    ) -> tuple[Tensor, Tensor]:
        """Values (F, p) and weights (F, n) at far queries: :func:`._far._far_query_limit`."""
        if not self._spec.is_default:
            return far_limit(self._spec, self.kernel, q, k, v, allowed, bi, ii, self._scale(),
                             getattr(self, "logit_lambda", None))
        return _far_query_limit(self.kernel.name, self.log_bandwidth, q, k, v, allowed, bi, ii)

    def extra_repr(self) -> str:
        spec = self._spec
        if spec.is_default:
            h = self.bandwidth.detach()
            text = f"{h.item():.4g}" if h.numel() == 1 else f"{h.numel()} per feature"
            return f"kernel={self.kernel.name!r}, bandwidth={text}, method={self.method!r}"
        shape = tuple(self._scale().shape)
        text = f"kernel={self.kernel.name!r}, metric={spec.metric!r} {shape}, method={self.method!r}"
        if spec.heads > 1:
            text += f", heads={spec.heads}, combine={spec.combine!r}"
        return text + (f", var_types={spec.var_types!r}" if spec.var_types else "")


class AveragePooling(KernelPooling):
    """Average pooling: every (unmasked) key weighs the same, ``f(q) = mean(values)``.

    The ``constant`` kernel of :mod:`nadaraya.kernels`, without parameters. Shapes as for
    :class:`KernelPooling`.

    Examples
    --------
    >>> import torch
    >>> from nadaraya.nn import AveragePooling
    >>> k = torch.zeros(3, 1); v = torch.tensor([1.0, 2.0, 6.0])
    >>> AveragePooling()(torch.zeros(2, 1), k, v)
    tensor([3., 3.])
    """

    def __init__(self, *, device: torch.device | str | None = None, dtype: torch.dtype | None = None) -> None:
        super().__init__("constant", 1.0, learnable=False, method="chunked", device=device, dtype=dtype)

    def extra_repr(self) -> str:
        return ""


class AdditiveAttentionPooling(_Pooling):
    r"""Additive (Bahdanau) attention pooling: score ``v^T tanh(W_q q + W_k k)``, softmax over keys.

    Shapes: queries (..., m, in_features), keys (..., n, key_features), values (..., n, p) or
    (..., n), mask (..., m, n); output (..., m, p) or (..., m).

    ``W_q q`` and ``W_k k`` are computed once per point; the (m, n, hidden) tensor of their
    sums is never built: blocks of queries and keys are scored in turn with a running maximum
    (online softmax), and backward recomputes them, so memory stays within
    ``nadaraya.get_config()["working_memory"]`` (a small multiple of one block) whatever m and n.

    Parameters
    ----------
    in_features : int
        Features of a query.
    hidden : int
        Width of the scorer's hidden layer.
    key_features : int, optional
        Features of a key; default ``in_features``.
    bias : bool, default True
        A bias in ``W_q``: with it, two hidden units can form a bump ``tanh(a + b) - tanh(a - b)``
        around ``q = k``, which is what kernel-like attention on raw coordinates needs. The
        textbook's layer has none.
    device, dtype : optional
        Of the parameters, as for :class:`torch.nn.Linear`.

    Examples
    --------
    >>> import torch
    >>> from nadaraya.nn import AdditiveAttentionPooling
    >>> _ = torch.manual_seed(0)
    >>> layer = AdditiveAttentionPooling(2, hidden=8)
    >>> out, w = layer(torch.randn(5, 2), torch.randn(7, 2), torch.randn(7, 3), return_weights=True)
    >>> out.shape, w.shape, bool(torch.allclose(w.sum(-1), torch.ones(5)))
    (torch.Size([5, 3]), torch.Size([5, 7]), True)
    """

    def __init__(
        self,
        in_features: int,
        hidden: int,
        *,
        key_features: int | None = None,
        bias: bool = True,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        _check_sizes(in_features=in_features, hidden=hidden, key_features=key_features)
        self.method = "chunked"
        place = {"device": device, "dtype": dtype}
        self.W_q = nn.Linear(in_features, hidden, bias=bias, **place)
        self.W_k = nn.Linear(key_features or in_features, hidden, bias=False, **place)
        self.w_v = nn.Linear(hidden, 1, bias=False, **place)

    def _project(self, q: Tensor, k: Tensor) -> tuple[Tensor, Tensor, Scorer, tuple[Tensor, ...]]:
        _same_dtype(self.W_q.weight, q, k)
        scorer = Scorer(_additive_fn, True, 3 * self.w_v.in_features)
        return self.W_q(q), self.W_k(k), scorer, (self.w_v.weight[0],)


class DotProductAttentionPooling(_Pooling):
    r"""Dot-product attention pooling: score ``(W_q q)^T (W_k k) / sqrt(dim)``, softmax over keys.

    Shapes: queries (..., m, in_features), keys (..., n, key_features), values (..., n, p) or
    (..., n), mask (..., m, n); output (..., m, p) or (..., m). Runs through
    :func:`torch.nn.functional.scaled_dot_product_attention` (its fused kernels), or over
    key blocks with ``method="chunked"``.

    Parameters
    ----------
    in_features : int
    dim : int
        Size of the projected queries and keys.
    scaled : bool, default True
        Divide the scores by ``sqrt(dim)``.
    key_features : int, optional
        Features of a key; default ``in_features``.
    method : {"auto", "sdpa", "chunked"}, default "auto"
    device, dtype : optional
        Of the parameters, as for :class:`torch.nn.Linear`.

    Examples
    --------
    >>> import torch
    >>> from nadaraya.nn import DotProductAttentionPooling
    >>> layer = DotProductAttentionPooling(3, dim=4)
    >>> layer(torch.randn(2, 5, 3), torch.randn(2, 6, 3), torch.randn(2, 6, 2)).shape
    torch.Size([2, 5, 2])
    """

    def __init__(
        self,
        in_features: int,
        dim: int,
        scaled: bool = True,
        *,
        key_features: int | None = None,
        method: Method = "auto",
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        _check_sizes(in_features=in_features, dim=dim, key_features=key_features)
        self.method = self._check_method(method)
        self.scaled = scaled
        place = {"device": device, "dtype": dtype}
        self.W_q = nn.Linear(in_features, dim, bias=False, **place)
        self.W_k = nn.Linear(key_features or in_features, dim, bias=False, **place)

    def _project(self, q: Tensor, k: Tensor) -> tuple[Tensor, Tensor, Scorer, tuple[Tensor, ...]]:
        _same_dtype(self.W_q.weight, q, k)
        qa = self.W_q(q)
        if self.scaled:
            qa = qa / math.sqrt(self.W_q.out_features)
        return qa, self.W_k(k), Scorer(_dot_fn, True, 1, _dot_identity), ()
