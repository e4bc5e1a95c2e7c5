"""The estimator's view of its attention weights: :meth:`NadarayaWatson.attention_weights`."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.utils.validation import check_is_fitted, validate_data

from nadaraya._support.validation import as_real, is_dask

__all__ = ["WeightsMixin"]


class WeightsMixin:
    """:meth:`attention_weights` of :class:`nadaraya.NadarayaWatson`."""

    degree: int
    var_types_: str
    bandwidth_type: str
    kernel: str
    empty: str
    X_fit_: Any
    sample_weight_: Any
    bandwidth_: Any

    def attention_weights(
        self, X: ArrayLike, *, sparse: bool = False, max_bytes: float | None = None
    ) -> Any:
        """The attention weights of each row of ``X`` over the training points, with the fitted
        settings: :func:`nadaraya.attention_weights` with the kernel, ``bandwidth_``, the sample
        weights and ``empty`` of this model.

        The columns follow the training rows in the order given to ``fit`` (as scikit-learn's
        neighbour graphs do), so that ``model.attention_weights(X) @ y`` equals
        ``model.predict(X)`` for the ``y`` given to ``fit``. (Where ``fit_order_`` is None, the
        order is that of ``X_fit_``.) Each row sums to one (an empty window follows ``empty``).

        Models with ``degree >= 1``, categorical columns or nearest-neighbour bandwidths raise
        NotImplementedError.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
        sparse : bool, default False
            Return a ``scipy.sparse.csr_array`` of the positive weights (cheap for compact
            kernels).
        max_bytes : float, optional
            The largest result allowed; see :func:`nadaraya.attention_weights`.

        Returns
        -------
        ndarray of shape (n_queries, n_samples_fit), or scipy.sparse.csr_array

        Examples
        --------
        >>> import numpy as np
        >>> from nadaraya import NadarayaWatson
        >>> y = np.array([4.0, 0.0, 1.0])
        >>> model = NadarayaWatson(bandwidth=0.5).fit([[2.0], [0.0], [1.0]], y)
        >>> W = model.attention_weights([[0.5], [1.5]])
        >>> W.shape, np.allclose(W.sum(axis=1), 1.0)
        ((2, 3), True)
        >>> bool(np.allclose(W @ y, model.predict([[0.5], [1.5]])))
        True
        """
        from nadaraya._core.attention import attention_weights
        from nadaraya.inference.neighbours import uses_neighbours

        check_is_fitted(self)
        if not self._plain() or uses_neighbours(self):  # type: ignore[attr-defined]
            raise NotImplementedError(
                f"attention_weights are computed for degree 0, continuous columns and a fixed bandwidth; got "
                f"degree={self.degree!r}, var_types={self.var_types_!r}, "
                f"bandwidth_type={self.bandwidth_type!r}")
        if is_dask(X):
            X = X.compute()  # type: ignore[union-attr]
        if np.asarray(X).dtype.kind in "cmMUS":  # complex, dates, durations, text, as in predict
            as_real("X", X)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        keys, sw = self.X_fit_, self.sample_weight_
        if is_dask(keys, sw):  # the matrix is dense in memory anyway: gather the training points
            keys, _, sw = self._training_data()  # type: ignore[attr-defined]
        order = getattr(self, "fit_order_", None)
        if order is not None:  # the training rows back in the order given to fit
            keys = _given_order(keys, order)
            sw = None if sw is None else _given_order(sw, order)
        return attention_weights(X, keys, kernel=self.kernel, bandwidth=self.bandwidth_, sample_weight=sw,
                                 empty=self.empty, sparse=sparse, max_bytes=max_bytes)


def _given_order(a: NDArray[Any], order: NDArray[np.integer]) -> NDArray[Any]:
    """Rows stored sorted (row ``i`` is row ``order[i]`` as given) back in the given order."""
    out = np.empty_like(a)
    out[order] = a
    return out
