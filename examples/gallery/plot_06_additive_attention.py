"""
Additive attention: a learned scoring function
==============================================

A kernel scores a key by its distance to the query alone. Additive (Bahdanau) attention
learns the score instead: ``v^T tanh(W_q q + W_k k)``, then a softmax over the keys.
:class:`nadaraya.nn.AdditiveAttentionPooling` is that layer; it never builds the
(queries x keys x hidden) tensor, and :func:`nadaraya.nn.fit` trains it on the same
leave-one-out loss as the learnable ``w`` of the previous example. Needs the ``torch`` extra.
"""

# %%
# Train a small scorer
# --------------------
# Eight hidden units and 60 full-batch Adam steps on the textbook's 50 points.
import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.colors import PowerNorm
from matplotlib.ticker import MaxNLocator

import nadaraya
from nadaraya import plot
from nadaraya.datasets import textbook
from nadaraya.nn import AdditiveAttentionPooling, fit

data = textbook(n=50, noise=1.0, seed=0)
torch.manual_seed(0)
layer = AdditiveAttentionPooling(1, hidden=8, dtype=torch.float64)
history = fit(
    layer, data.x_train, data.y_train, epochs=60, lr=0.1, optimizer="adam"
)
print(
    f"leave-one-out loss: {history['loss'][0]:.3f} at the start, {history['loss'][-1]:.3f} after 60 epochs"
)

fig, ax = plt.subplots(figsize=(6.4, 3.2), layout="constrained")
plot.training(history, ax=ax, label="leave-one-out training loss")
ax.xaxis.set_major_locator(MaxNLocator(integer=True))
ax.set_title("Additive attention: loss per epoch")
plt.show()

# %%
# Predictions and weights
# -----------------------
# ``return_weights=True`` returns the attention weights with the output. Next to them, the
# Gaussian kernel at the cross-validated bandwidth: the learned scorer also attends to nearby
# keys, with a band that need not have the same width everywhere.
q = torch.as_tensor(data.x_val[:, None])
k = torch.as_tensor(data.x_train[:, None])
v = torch.as_tensor(data.y_train)
with torch.no_grad():
    pred, weights = layer(q, k, v, return_weights=True)
pred, weights = pred.numpy(), weights.numpy()

h_cv = float(
    nadaraya.select_bandwidth(data.x_train, data.y_train).bandwidth[0]
)
gauss = nadaraya.pool(data.x_val, data.x_train, data.y_train, bandwidth=h_cv)
for name, p in [
    ("additive attention", pred),
    (f"Gaussian, CV h = {h_cv:.3f}", gauss),
]:
    print(f"{name:<24} validation MSE {np.mean((p - data.y_val) ** 2):.3f}")

fig, ax = plt.subplots(figsize=(6.4, 3.6), layout="constrained")
ax.scatter(
    data.x_train, data.y_train, s=16, color="0.6", label="training data"
)
ax.plot(data.x_val, data.y_val, "--", color="k", lw=1.2, label="truth")
ax.plot(data.x_val, pred, color="C3", lw=2, label="additive attention")
ax.plot(
    data.x_val,
    gauss,
    color="C0",
    lw=1.5,
    label=f"Gaussian kernel, CV h = {h_cv:.3f}",
)
ax.set(
    xlabel="x", ylabel="y", title="Additive attention and the Gaussian kernel"
)
ax.grid(alpha=0.3)
fig.legend(
    *ax.get_legend_handles_labels(),
    loc="outside lower center",
    ncols=2,
    frameon=False,
)
plt.show()

# %%
# Both weight matrices on one colour scale (square root, as in the heatmap example): the
# learned band is narrow near ``x = 0`` and widens to the right.
gauss_w = nadaraya.attention_weights(data.x_val, data.x_train, bandwidth=h_cv)
vmax = max(weights.max(), gauss_w.max())
fig, axes = plt.subplots(
    1, 2, figsize=(9, 3.6), sharey=True, layout="constrained"
)
for ax, w, title in [
    (axes[0], weights, "additive attention (learned)"),
    (axes[1], gauss_w, f"Gaussian kernel, h = {h_cv:.3f}"),
]:
    plot.attention(
        w, data.x_val, data.x_train, ax=ax, colorbar=False, vmax=vmax
    )
    ax.images[0].set_norm(PowerNorm(0.5, vmin=0.0, vmax=vmax))
    ax.set(title=title, xlabel="training inputs x_i (sorted)", ylabel="")
axes[0].set_ylabel("validation inputs q (sorted)")
fig.colorbar(
    axes[0].images[0], ax=axes, label="attention weight (square-root scale)"
)
plt.show()
