"""Plain dense formulas, written out independently of the library, that the tests compare against."""

from __future__ import annotations

import math

import numpy as np

# Each kernel written out from its textbook definition (not imported from nadaraya).
PLAIN_KERNELS = {
    "gaussian": lambda u: np.exp(-(u**2) / 2),
    "epanechnikov": lambda u: np.clip(1 - u**2, 0, None),
    "boxcar": lambda u: (np.abs(u) <= 1).astype(float),
    "triangular": lambda u: np.clip(1 - np.abs(u), 0, None),
    "biweight": lambda u: np.clip(1 - u**2, 0, None) ** 2,
    "triweight": lambda u: np.clip(1 - u**2, 0, None) ** 3,
    "tricube": lambda u: np.clip(1 - np.abs(u) ** 3, 0, None) ** 3,
    "cosine": lambda u: np.where(np.abs(u) <= 1, np.cos(math.pi * u / 2), 0.0),
    "parzen": lambda u: np.where(
        np.abs(u) <= 0.5,
        1 - 6 * u**2 + 6 * np.abs(u) ** 3,
        np.where(np.abs(u) <= 1, 2 * (1 - np.abs(u)) ** 3, 0.0),
    ),
    "constant": lambda u: np.ones_like(u),
    "laplacian": lambda u: np.exp(-np.abs(u)),
    "logistic": lambda u: 1 / (np.exp(u) + 2 + np.exp(-u)),
}


def naive_weights(queries, keys, kernel, bandwidth, sample_weight=None, exclude_self=False):
    """Dense (m, n) unnormalised product-kernel weights."""
    q = np.asarray(queries, float).reshape(len(queries), -1)
    k = np.asarray(keys, float).reshape(len(keys), -1)
    u = (q[:, None, :] - k[None, :, :]) / np.asarray(bandwidth, float)
    w = PLAIN_KERNELS[kernel](u).prod(axis=-1)
    if sample_weight is not None:
        w = w * np.asarray(sample_weight, float)[None, :]
    if exclude_self:
        np.fill_diagonal(w, 0.0)
    return w


def naive_pool(queries, keys, values, kernel, bandwidth, sample_weight=None, exclude_self=False):
    """f(q) = sum_i w_i v_i / sum_i w_i, dense; NaN where every weight is zero."""
    w = naive_weights(queries, keys, kernel, bandwidth, sample_weight, exclude_self)
    v = np.asarray(values, float)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (w @ v) / w.sum(axis=1).reshape((-1,) + (1,) * (v.ndim - 1))
