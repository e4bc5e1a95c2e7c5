"""
The bandwidth, and choosing it by cross-validation
==================================================

The bandwidth ``h`` sets how far a query looks: the weights depend on ``(q - x_i) / h``.
The textbook fits the Gaussian kernel at ``h = 0.1, 0.2, 0.5, 1`` side by side: a small
``h`` follows the noise, a large one flattens the curve towards average pooling.

:func:`nadaraya.select_bandwidth` chooses ``h`` by exact leave-one-out cross-validation:
each training point is predicted from all the *other* points and the mean squared error of
these predictions, ``CV(h)``, is minimised.
"""

# %%
# Fits at four bandwidths and at the CV choice
# --------------------------------------------
import matplotlib.pyplot as plt
import numpy as np

import nadaraya
from nadaraya import plot
from nadaraya.datasets import textbook

data = textbook(n=50, noise=1.0, seed=0)
selection = nadaraya.select_bandwidth(
    data.x_train, data.y_train, method="cv", kernel="gaussian"
)
h_cv = float(selection.bandwidth[0])
print(selection)

fig, axes = plt.subplots(
    2, 3, figsize=(10, 5.8), sharex=True, sharey=True, layout="constrained"
)
for ax, h in zip(axes.flat, [0.1, 0.2, 0.5, 1.0, h_cv]):
    pred = nadaraya.pool(data.x_val, data.x_train, data.y_train, bandwidth=h)
    mse = np.mean((pred - data.y_val) ** 2)
    name = f"CV choice h = {h:.3f}" if h == h_cv else f"h = {h}"
    print(f"{name:<22} validation MSE {mse:.3f}")
    ax.scatter(
        data.x_train, data.y_train, s=10, color="0.6", label="training data"
    )
    ax.plot(data.x_val, data.y_val, "--", color="k", lw=1.2, label="truth")
    ax.plot(
        data.x_val, pred, color="C3", lw=2, label="Gaussian kernel prediction"
    )
    ax.set_title(f"{name}: MSE {mse:.3f}", fontsize="medium")
    ax.grid(alpha=0.3)
for ax in axes[-1, :2]:
    ax.set_xlabel("x")
for ax in axes[:, 0]:
    ax.set_ylabel("y")
axes[0, 2].tick_params(labelbottom=True)
axes[0, 2].set_xlabel("x")
axes[-1, -1].axis("off")
axes[-1, -1].legend(
    *axes[0, 0].get_legend_handles_labels(), loc="center", frameon=False
)
plt.show()

# %%
# The CV curve
# ------------
# The search evaluates a log-spaced grid of bandwidths, then refines around the best one;
# ``selection.search`` keeps every bandwidth tried and its score, and
# :func:`nadaraya.plot.bandwidth_curve` draws them in bandwidth order. Below the optimum the
# fit chases the noise; above it, it smooths the signal away, and far above every prediction
# is the mean of the other points (average pooling, up to the left-out point).
fig, ax = plt.subplots(figsize=(6.4, 3.6), layout="constrained")
plot.bandwidth_curve(
    selection.search["bandwidths"][:, 0],
    selection.search["scores"],
    chosen=h_cv,
    ax=ax,
    method="cv",
    label="CV(h), Gaussian kernel",
)
ax.get_legend().remove()
fig.legend(
    *ax.get_legend_handles_labels(),
    loc="outside lower center",
    ncols=2,
    frameon=False,
)
ax.set_title("Leave-one-out cross-validation on the textbook data")
plt.show()

# %%
# The same curve without the search
# ---------------------------------
# The CV score is the mean squared error of :func:`nadaraya.loo_pool`, the leave-one-out
# predictions (each point's own term masked inside the sums, not refitted). Scoring the four
# textbook bandwidths this way reproduces the curve's values there.
for h in [0.1, 0.2, 0.5, 1.0, h_cv]:
    loo = nadaraya.loo_pool(data.x_train, data.y_train, bandwidth=h)
    print(f"h = {h:.3f}: CV(h) = {np.mean((loo - data.y_train) ** 2):.4f}")
print(f"selection.score at h = {h_cv:.3f}: {selection.score:.4f}")
