"""The textbook's training loop for the pooling modules: every training point attends to the others."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import torch
from numpy.typing import ArrayLike
from torch import Tensor, nn

from nadaraya._support.validation import as_real

__all__ = ["check_finite", "fit"]

OPTIMIZERS: dict[str, Callable[..., torch.optim.Optimizer]] = {
    "sgd": torch.optim.SGD,
    "adam": torch.optim.Adam,
}


def _module_place(module: nn.Module) -> tuple[torch.device, torch.dtype]:
    """The device and floating dtype of a module's first parameter or buffer."""
    for t in (*module.parameters(), *module.buffers()):
        if t.is_floating_point():
            return t.device, t.dtype
    return torch.device("cpu"), torch.get_default_dtype()


def _as_tensor(name: str, a: ArrayLike | Tensor, dtype: torch.dtype, device: torch.device) -> Tensor:
    """``a`` as a real tensor of the module's dtype; a ValueError naming ``name`` for complex,
    dates, text, missing values, NaN or inf (a TypeError for other non-numeric tensors)."""
    if isinstance(a, Tensor):
        if a.is_complex():
            raise ValueError(f"{name} must be real numbers; got a complex tensor ({a.dtype})")
        if not a.is_floating_point() and a.dtype not in (torch.int32, torch.int64, torch.bool):
            raise TypeError(f"{name} must hold numbers; got dtype {a.dtype}")
        t = a
    else:
        t = torch.from_numpy(np.asarray(as_real(name, a), dtype=np.float64))
    check_finite(name, t, dtype if t.is_floating_point() else None)
    return t.to(device=device, dtype=dtype)


def check_finite(name: str, t: Tensor | np.ndarray, dtype: torch.dtype | None = None) -> None:
    """A ValueError naming ``name``, how many entries and the first position, if ``t`` holds
    NaN or inf, or (``dtype``) values that overflow to inf in it.

    Examples
    --------
    >>> import numpy as np
    >>> check_finite("y", np.array([0.0, np.inf]))
    Traceback (most recent call last):
    ...
    ValueError: y contains NaN or inf (1 entries; the first at row 1: inf); drop or impute them first
    """
    t = torch.as_tensor(t)
    if not t.is_floating_point():
        return
    bad = ~torch.isfinite(t)
    what, fix = "NaN or inf", "drop or impute them first"
    if not bool(bad.any()) and dtype is not None and dtype != t.dtype:
        bad = ~torch.isfinite(t.to(dtype))
        what = f"values too large for {str(dtype).replace('torch.', '')}"
        fix = "rescale them or train in float64"
    if not bool(bad.any()):
        return
    first = [int(i) for i in torch.nonzero(bad)[0]]
    where = f"row {first[0]}" + (f", column {first[1]}" if len(first) > 1 else "")
    value = float(t[tuple(first)])
    raise ValueError(
        f"{name} contains {what} ({int(bad.sum())} entries; the first at {where}: {value!r}); {fix}"
    )


def _make_optimizer(
    optimizer: str | Callable[..., torch.optim.Optimizer], params: Iterable[Tensor], lr: float
) -> torch.optim.Optimizer:
    if callable(optimizer):
        return optimizer(params, lr=lr)
    if optimizer not in OPTIMIZERS:
        raise ValueError(
            f"optimizer={optimizer!r} is not known; use one of {', '.join(map(repr, OPTIMIZERS))} "
            "or a callable (params, lr=...) -> torch.optim.Optimizer"
        )
    return OPTIMIZERS[optimizer](params, lr=lr)


def _training_data(
    X: ArrayLike | Tensor, y: ArrayLike | Tensor, dtype: torch.dtype, device: torch.device, loo: bool
) -> tuple[Tensor, Tensor]:
    """X as an (n, d) and y as an (n,) or (n, p) tensor of the module's dtype on ``device``; a
    ValueError naming the argument for any other shape, for no rows or columns, or for a single
    row with ``loo`` (the point would attend to nothing)."""
    xt = _as_tensor("X", X, dtype, device)
    yt = _as_tensor("y", y, dtype, device)
    if xt.ndim == 1:
        xt = xt[:, None]
    if xt.ndim != 2:
        raise ValueError(f"X must have shape (n, d) or (n,); got shape {tuple(xt.shape)}")
    if xt.shape[0] == 0:
        raise ValueError(f"X is empty (shape {tuple(xt.shape)}); at least one row is needed")
    if xt.shape[1] == 0:
        raise ValueError(f"X has no features (shape {tuple(xt.shape)})")
    n = xt.shape[0]
    if yt.ndim not in (1, 2) or yt.shape[0] != n:
        raise ValueError(f"y must have shape ({n},) or ({n}, p), one row per row of X; got {tuple(yt.shape)}")
    if yt.ndim == 2 and yt.shape[1] == 0:
        raise ValueError(f"y has no columns (shape {tuple(yt.shape)}); at least one output is needed")
    if loo and n < 2:
        raise ValueError(
            f"with loo=True each point attends to the others, so X needs at least 2 rows; got {n}"
        )
    return xt, yt


def fit(
    module: nn.Module,
    X: ArrayLike | Tensor,
    y: ArrayLike | Tensor,
    *,
    epochs: int,
    lr: float,
    optimizer: str | Callable[..., torch.optim.Optimizer] = "sgd",
    batch_size: int | None = None,
    loo: bool = True,
    device: torch.device | str | None = None,
    seed: int | None = None,
    callback: Callable[[int, dict[str, list[Any]]], bool | None] | None = None,
) -> dict[str, list[Any]]:
    """Train a pooling module by gradient descent on the leave-one-out squared error.

    The textbook's training: each training point is a query that attends to all the
    training points as keys and values, *its own key left out* (``exclude=``), and the loss is
    the mean squared error of these predictions. For :class:`~nadaraya.nn.KernelPooling` that
    loss is exactly the leave-one-out cross-validation criterion of the core, so training
    ``log h`` to convergence finds the cross-validated bandwidth.

    Parameters
    ----------
    module : nn.Module
        One of the :mod:`nadaraya.nn` pooling modules (called as ``module(queries, keys,
        values, exclude=...)``). Moved to ``device`` and trained in place.
    X : array-like or Tensor of shape (n, d) or (n,)
    y : array-like or Tensor of shape (n,) or (n, p)
    epochs : int
        Passes over the training points.
    lr : float
        Learning rate.
    optimizer : {"sgd", "adam"} or callable, default "sgd"
        A name, or ``factory(params, lr=lr) -> torch.optim.Optimizer``.
    batch_size : int, optional
        Queries per step (each still attends to all n keys); default all n (full batch).
    loo : bool, default True
        Leave each query's own key out. Without it a kernel model is rewarded for ``h -> 0``
        (each point predicts itself).
    device : torch.device or str, optional
        Where to train; default the module's device.
    seed : int, optional
        Seeds the order of the mini-batches, so runs repeat exactly.
    callback : callable, optional
        ``callback(epoch, history)`` after each epoch; returning True stops the training.

    Returns
    -------
    dict
        ``"loss"``: per epoch, the mean training loss over its steps (each computed before its
        step). ``"bandwidth"`` (modules with a ``bandwidth``): per epoch, after its steps, a
        float or a list per feature.

    Examples
    --------
    >>> import numpy as np
    >>> from nadaraya.nn import KernelPooling, fit
    >>> rng = np.random.default_rng(0)
    >>> x = rng.uniform(0, 5, 50); y = 2 * np.sin(x) + x + rng.normal(0, 0.5, 50)
    >>> layer = KernelPooling("gaussian", bandwidth=1.0)
    >>> history = fit(layer, x, y, epochs=5, lr=0.5)
    >>> history["loss"][-1] < history["loss"][0], history["bandwidth"][-1] < 1.0
    (True, True)
    """
    if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 0:
        raise ValueError(f"epochs must be a non-negative int; got {epochs!r}")
    if not (isinstance(lr, (int, float)) and lr > 0):
        raise ValueError(f"lr must be a positive number; got {lr!r}")
    here, dtype = _module_place(module)
    dev = torch.device(device) if device is not None else here
    module.to(dev)
    xt, yt = _training_data(X, y, dtype, dev, loo)
    n = xt.shape[0]
    if batch_size is None:
        batch_size = n
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int or None; got {batch_size!r}")
    params = [p for p in module.parameters() if p.requires_grad]
    opt = _make_optimizer(optimizer, params, lr) if params else None
    gen = torch.Generator().manual_seed(seed) if seed is not None else None
    history: dict[str, list[Any]] = {"loss": []}
    has_bandwidth = isinstance(getattr(module, "bandwidth", None), Tensor)
    if has_bandwidth:
        history["bandwidth"] = []
    module.train()
    for epoch in range(epochs):
        order = torch.arange(n) if batch_size >= n else torch.randperm(n, generator=gen)
        total = 0.0
        for start in range(0, n, batch_size):
            idx = order[start : start + batch_size].to(dev)
            pred = module(xt[idx], xt, yt, exclude=idx if loo else None)
            loss = torch.mean((pred - yt[idx]) ** 2)
            if opt is not None:
                opt.zero_grad()
                loss.backward()
                opt.step()
            total += float(loss.detach()) * idx.numel()
        history["loss"].append(total / n)
        if has_bandwidth:
            h = module.bandwidth.detach().cpu()  # type: ignore[union-attr]
            history["bandwidth"].append(h.item() if h.numel() == 1 else h.tolist())
        if callback is not None and callback(epoch, history):
            break
    module.eval()
    return history
