"""AttentionPoolingRegressor: a scikit-learn regressor around a learnable pooling module and its training."""

from __future__ import annotations

import copy
from numbers import Integral, Real
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, RegressorMixin, _fit_context
from sklearn.utils.validation import check_is_fitted, validate_data

from nadaraya._support.params import Names, Number, Torch, fold_case
from nadaraya.kernels import Kernel, names

__all__ = ["AttentionPoolingRegressor"]

MODULES: tuple[str, ...] = ("kernel", "additive", "dot", "average")
DTYPES: tuple[str, ...] = ("float32", "float64")
#: the named optimizers of :func:`nadaraya.nn.fit` (its ``OPTIMIZERS``, read here without torch)
OPTIMIZERS: tuple[str, ...] = ("sgd", "adam")


def _refuse_complex(name: str, a: Any) -> None:
    """A ValueError naming ``name`` for complex input (scikit-learn's own says only "Complex data
    not supported", which its estimator checks look for, so the message keeps those words)."""
    dtypes = getattr(a, "dtypes", None)  # a DataFrame's columns (a Series has one dtype)
    if dtypes is not None and not isinstance(dtypes, np.dtype):
        kinds = [t.kind for t in dtypes if isinstance(t, np.dtype)]
        dtype = None
    else:
        dtype = getattr(a, "dtype", None)
        if dtype is None:
            try:
                dtype = np.asarray(a).dtype
            except (TypeError, ValueError):
                return  # ragged and the like: scikit-learn's validation says what is wrong
        kinds = [dtype.kind] if isinstance(dtype, np.dtype) else []
    if "c" in kinds:
        got = dtype or "a complex column"
        raise ValueError(f"{name} must be real numbers; got {got}: Complex data not supported")


class AttentionPoolingRegressor(RegressorMixin, BaseEstimator):  # type: ignore[misc]
    """Learnable attention pooling as a scikit-learn regressor.

    ``fit`` builds a :mod:`nadaraya.nn` module and trains it with :func:`nadaraya.nn.fit`
    (each training point attending to all the others, its own key left out); ``predict``
    pools the training targets at the new points with the trained module. With
    ``module="kernel"`` this is :class:`~nadaraya.NadarayaWatson` whose bandwidth is learnt
    by gradient descent on the leave-one-out error; the other modules learn their own
    similarity. torch is imported at ``fit``, not before.

    Parameters
    ----------
    module : {"kernel", "additive", "dot", "average"} or torch.nn.Module, default "kernel"
        :class:`~nadaraya.nn.KernelPooling`, :class:`~nadaraya.nn.AdditiveAttentionPooling`,
        :class:`~nadaraya.nn.DotProductAttentionPooling`, :class:`~nadaraya.nn.AveragePooling`,
        or a module of your own (copied at each ``fit``; it must take ``n_features_in_``
        features).
    kernel : str, default "gaussian"
        For ``module="kernel"``.
    bandwidth : float, default 1.0
        Initial bandwidth for ``module="kernel"``.
    per_feature : bool, default False
        One learnable bandwidth per feature (``module="kernel"``).
    hidden : int, default 16
        Hidden width of the additive scorer.
    dim : int, default 16
        Projection size of the dot-product scorer.
    epochs : int, default 100
    lr : float, default 0.5
    optimizer : {"sgd", "adam"}, default "sgd"
    batch_size : int, optional
        Queries per step; default all training points.
    dtype : {"float64", "float32"}, default "float64"
    device : str, optional
        ``"cpu"``, ``"cuda"``, ...; default CPU.
    random_state : int, optional
        Seeds the module's initial weights and the order of the mini-batches.

    Attributes
    ----------
    module_ : torch.nn.Module
        The trained module.
    history_ : dict
        What :func:`nadaraya.nn.fit` returned (loss per epoch, bandwidth per epoch).
    bandwidth_ : ndarray of shape (n_features,)
        The learnt bandwidth (``module="kernel"`` only).
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> from nadaraya import AttentionPoolingRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(0, 5, (50, 1)); y = 2 * np.sin(X[:, 0]) + X[:, 0] + rng.normal(0, 0.5, 50)
    >>> model = AttentionPoolingRegressor(epochs=50).fit(X, y)
    >>> bool(0.1 < model.bandwidth_[0] < 0.5), model.predict(X[:2]).shape
    (True, (2,))
    """

    #: what each parameter accepts, checked once per ``fit`` by scikit-learn (InvalidParameterError)
    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "module": [Names(MODULES), Torch("nn.Module")],
        "kernel": [Names(names(aliases=True), fold=fold_case), Kernel],
        "bandwidth": [Number(Real, 0, np.inf, closed="neither"), "array-like"],
        "per_feature": ["boolean"],
        "hidden": [Number(Integral, 1, None, closed="left")],
        "dim": [Number(Integral, 1, None, closed="left")],
        "epochs": [Number(Integral, 0, None, closed="left")],
        "lr": [Number(Real, 0, np.inf, closed="neither")],
        "optimizer": [Names(OPTIMIZERS), callable],
        "batch_size": [Number(Integral, 1, None, closed="left"), None],
        "dtype": [Names(DTYPES)],
        "device": [str, Number(Integral, 0, None, closed="left"), Torch("device"), None],
        "random_state": [Number(Integral, None, None, closed="neither"), None],
    }

    def __init__(
        self,
        module: Any = "kernel",
        *,
        kernel: str = "gaussian",
        bandwidth: float = 1.0,
        per_feature: bool = False,
        hidden: int = 16,
        dim: int = 16,
        epochs: int = 100,
        lr: float = 0.5,
        optimizer: str = "sgd",
        batch_size: int | None = None,
        dtype: str = "float64",
        device: str | None = None,
        random_state: int | None = None,
    ) -> None:
        self.module = module
        self.kernel = kernel
        self.bandwidth = bandwidth
        self.per_feature = per_feature
        self.hidden = hidden
        self.dim = dim
        self.epochs = epochs
        self.lr = lr
        self.optimizer = optimizer
        self.batch_size = batch_size
        self.dtype = dtype
        self.device = device
        self.random_state = random_state

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        tags.non_deterministic = self.random_state is None and self.module in ("additive", "dot")
        return tags

    def _build(self, d: Any) -> Any:
        import torch

        from nadaraya.nn import _pooling as layers

        if isinstance(self.module, torch.nn.Module):
            return copy.deepcopy(self.module)
        if self.module == "kernel":
            per_feature = d if self.per_feature else None
            return layers.KernelPooling(self.kernel, self.bandwidth, per_feature=per_feature)
        if self.module == "additive":
            return layers.AdditiveAttentionPooling(d, self.hidden)
        if self.module == "dot":
            return layers.DotProductAttentionPooling(d, self.dim)
        return layers.AveragePooling()  # "average", the last of MODULES (_parameter_constraints)

    def _checked(self, X: ArrayLike, y: ArrayLike | None = None, *, fitting: bool) -> tuple[Any, Any]:
        """X (and, to fit, y) validated as float64 arrays: a ValueError naming the argument for
        complex input or NaN/inf (the first bad entry), else scikit-learn's own checks."""
        from nadaraya.nn._training import check_finite

        _refuse_complex("X", X)
        if not fitting:
            X = validate_data(self, X, reset=False, dtype=np.float64, ensure_all_finite=False)
            check_finite("X", X)
            return X, None
        _refuse_complex("y", y)
        try:
            y_arr = np.asarray(y)
        except (TypeError, ValueError):
            y_arr = None  # scikit-learn's validation below says what is wrong
        if y_arr is not None and y_arr.dtype.kind == "f":
            check_finite("y", y_arr)  # names the first bad entry, which scikit-learn's check does not
        X, y = validate_data(
            self, X, y, multi_output=True, y_numeric=True, dtype=np.float64, ensure_all_finite=False
        )
        check_finite("X", X)  # names the first bad entry, which scikit-learn's check does not
        check_finite("y", y)
        return X, y

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: ArrayLike, y: ArrayLike) -> AttentionPoolingRegressor:
        """Build the module and train it on (X, y).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)

        Returns
        -------
        self

        Examples
        --------
        >>> from nadaraya import AttentionPoolingRegressor
        >>> AttentionPoolingRegressor(epochs=1).fit([[0.0], [1.0], [2.0]], [0.0, 1.0, 2.0]).n_features_in_
        1
        """
        import torch

        from nadaraya.nn._training import fit as train

        X, y = self._checked(X, y, fitting=True)
        if X.shape[0] < 2:
            raise ValueError(
                "AttentionPoolingRegressor needs at least 2 samples (each attends to the others); "
                f"got n_samples = {X.shape[0]}"
            )
        device = torch.device("cpu" if self.device is None else self.device)  # 0 is cuda:0
        dtype = getattr(torch, self.dtype)
        seed = None if self.random_state is None else int(self.random_state)  # NumPy integers too
        with torch.random.fork_rng(devices=[]):
            if seed is not None:
                torch.manual_seed(seed)
            module = self._build(X.shape[1]).to(device=device, dtype=dtype)
        self.history_ = train(
            module,
            X,
            y,
            epochs=self.epochs,
            lr=self.lr,
            optimizer=self.optimizer,
            batch_size=self.batch_size,
            device=device,
            seed=seed,
        )
        self.module_ = module
        self.keys_ = torch.tensor(X, dtype=dtype, device=device)
        self.values_ = torch.tensor(y, dtype=dtype, device=device)
        bw = getattr(module, "bandwidth", None)
        if isinstance(bw, torch.Tensor):
            self.bandwidth_ = np.broadcast_to(bw.detach().cpu().double().numpy(), (X.shape[1],)).copy()
        return self

    def predict(self, X: ArrayLike) -> NDArray[np.floating]:
        """Pool the training targets at each row of X with the trained module.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            The queries; the training points are the keys.

        Returns
        -------
        ndarray of shape (n_queries,) or (n_queries, n_outputs)
            The module's output, pooled; NaN where a compact kernel's window holds no
            training point.

        Examples
        --------
        >>> from nadaraya import AttentionPoolingRegressor
        >>> model = AttentionPoolingRegressor(module="average", epochs=0).fit([[0.0], [1.0]], [0.0, 1.0])
        >>> model.predict([[5.0]]).tolist()
        [0.5]
        """
        import torch

        check_is_fitted(self, "module_")
        X, _ = self._checked(X, fitting=False)
        queries = torch.tensor(X, dtype=self.keys_.dtype, device=self.keys_.device)
        with torch.no_grad():
            out = self.module_(queries, self.keys_, self.values_)
        return out.cpu().double().numpy()  # type: ignore[no-any-return]
