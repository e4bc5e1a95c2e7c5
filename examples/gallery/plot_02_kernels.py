"""
Kernels: how a query weighs the keys
====================================

Nadaraya-Watson regression predicts at a query ``q`` a weighted mean of the training targets,

.. math:: f(q) = \\sum_i \\alpha(q, x_i)\\, y_i, \\qquad
          \\alpha(q, x_i) = \\frac{K((q - x_i) / h)}{\\sum_j K((q - x_j) / h)},

where the kernel ``K`` says how much a key at scaled distance ``u = (q - x_i) / h`` counts.
nadaraya has twelve kernels (:mod:`nadaraya.kernels`); their normalising constants cancel
in the weights, so only their shapes matter.
"""

# %%
# Every kernel
# ------------
# :func:`nadaraya.kernels.names` lists them; :func:`nadaraya.plot.kernel_grid` draws each
# profile ``K(u) / K(0)`` in its own panel. Three have unbounded support (gaussian,
# laplacian, logistic) and ``constant`` is average pooling; the other eight are zero for
# ``|u| > 1``, so a query only sees keys within ``h`` of it.
import matplotlib.pyplot as plt
import numpy as np

import nadaraya
from nadaraya import kernels, plot
from nadaraya.datasets import textbook

print(kernels.names())
for name in kernels.names():
    k = kernels.get(name)
    print(
        f"{k.name:<13} support {k.support:<4} aliases {', '.join(k.aliases) or '-'}"
    )

fig = plot.kernel_grid(ncols=4)
fig.suptitle("The twelve kernels, K(u) / K(0)")
plt.show()

# %%
# .. note::
#    The textbook's function called ``epanechikov``, ``max(1 - |u|, 0)``, is the
#    *triangular* kernel; the Epanechnikov kernel is ``3/4 (1 - u^2)`` on ``|u| <= 1``.
#
# Predictions with several kernels
# --------------------------------
# The same bandwidth ``h = 0.5`` with four kernels on the textbook data. Compact kernels
# average over a window of half-width ``h``, so the boxcar (a moving average) is the
# roughest; smooth kernels give smooth curves.
data = textbook(n=50, noise=1.0, seed=0)
h = 0.5
chosen = ["gaussian", "boxcar", "triangular", "epanechnikov"]
fig, axes = plt.subplots(
    2, 2, figsize=(8, 5.6), sharex=True, sharey=True, layout="constrained"
)
for ax, name in zip(axes.flat, chosen):
    pred = nadaraya.pool(
        data.x_val, data.x_train, data.y_train, kernel=name, bandwidth=h
    )
    mse = np.mean((pred - data.y_val) ** 2)
    ax.scatter(
        data.x_train, data.y_train, s=12, color="0.6", label="training data"
    )
    ax.plot(data.x_val, data.y_val, "--", color="k", lw=1.2, label="truth")
    ax.plot(data.x_val, pred, color="C3", lw=2, label="prediction")
    ax.set_title(
        f"{name}, h = {h}: validation MSE {mse:.3f}", fontsize="medium"
    )
    ax.grid(alpha=0.3)
for ax in axes[-1]:
    ax.set_xlabel("x")
for ax in axes[:, 0]:
    ax.set_ylabel("y")
fig.legend(
    *axes[0, 0].get_legend_handles_labels(),
    loc="outside lower center",
    ncols=3,
    frameon=False,
)
plt.show()

# %%
# The weights themselves
# ----------------------
# :func:`nadaraya.attention_weights` returns the weights ``alpha(q, x_i)``, one row per query,
# summing to one. At the query ``q = 2.5`` the Gaussian spreads its weight over every key; the
# boxcar gives each key within ``h`` the same weight and the rest nothing.
q = np.array([2.5])
fig, ax = plt.subplots(figsize=(6.4, 3.4), layout="constrained")
for name in chosen:
    w = nadaraya.attention_weights(q, data.x_train, kernel=name, bandwidth=h)[
        0
    ]
    print(
        f"{name:<13} weights sum to {w.sum():.6f}; keys with weight > 0: {(w > 0).sum()}"
    )
    ax.plot(data.x_train, w, "o-", ms=3, label=name)
ax.axvline(q[0], color="0.4", lw=1, ls=":")
ax.set(
    xlabel="training input x_i",
    ylabel="attention weight at q = 2.5",
    title=f"Attention weights of one query, h = {h}",
)
ax.grid(alpha=0.3)
ax.legend(frameon=False)
plt.show()
