"""
Attention weights as heatmaps
=============================

Each prediction is a weighted mean of the training targets; the weights
``alpha(q, x_i)`` form a matrix with one row per validation input (query) and one column
per training input (key). :func:`nadaraya.attention_weights` returns it. With queries and
keys both sorted, attention to nearby keys shows as a diagonal band, and the band narrows
as the bandwidth shrinks.
"""

# %%
# One colour scale for every panel
# --------------------------------
# The panels share the colour scale (``vmax``, the largest weight in any of them) and one
# colour bar, so a darker cell means a larger weight in every panel: at ``h = 1`` each query
# spreads its attention thinly over many keys; at ``h = 0.1`` a few keys take almost all of it.
# The scale is a square root (``PowerNorm(0.5)``), so that the thin weights of the wide
# bandwidths stay visible next to the near-one weights of the narrow ones.
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import PowerNorm

import nadaraya
from nadaraya import plot
from nadaraya.datasets import textbook

data = textbook(n=50, noise=1.0, seed=0)
bandwidths = [1.0, 0.5, 0.2, 0.1]
weights = {
    h: nadaraya.attention_weights(data.x_val, data.x_train, bandwidth=h)
    for h in bandwidths
}
vmax = max(float(w.max()) for w in weights.values())
for h, w in weights.items():
    print(
        f"h = {h}: rows sum to 1: {np.allclose(w.sum(axis=1), 1)}; largest weight {w.max():.3f}"
    )

fig, axes = plt.subplots(
    1, 4, figsize=(11, 3.4), sharey=True, layout="constrained"
)
for ax, h in zip(axes, bandwidths):
    plot.attention(
        weights[h], data.x_val, data.x_train, ax=ax, colorbar=False, vmax=vmax
    )
    ax.images[0].set_norm(PowerNorm(0.5, vmin=0.0, vmax=vmax))
    ax.set_title(f"Gaussian kernel, h = {h}", fontsize="medium")
    ax.set_xlabel("training inputs x_i (sorted)")
    ax.set_ylabel("")
axes[0].set_ylabel("validation inputs q (sorted)")
fig.colorbar(
    axes[0].images[0],
    ax=axes,
    label="attention weight (square-root scale)",
    shrink=0.9,
)
plt.show()

# %%
# A compact kernel
# ----------------
# The Epanechnikov kernel gives no weight to keys farther than ``h``: outside the band the
# weights are exactly zero, and the band's width is ``2 h`` in ``x``.
h = 0.5
w = nadaraya.attention_weights(
    data.x_val, data.x_train, kernel="epanechnikov", bandwidth=h
)
print(
    f"Epanechnikov, h = {h}: {np.mean(w == 0):.0%} of the weights are exactly zero"
)
fig, ax = plt.subplots(figsize=(5.2, 4.0), layout="constrained")
plot.attention(w, data.x_val, data.x_train, ax=ax)
ax.set(
    title=f"Epanechnikov kernel, h = {h}",
    xlabel="training inputs x_i (sorted)",
    ylabel="validation inputs q (sorted)",
)
plt.show()
