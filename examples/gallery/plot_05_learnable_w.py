"""
The learnable w: training the bandwidth with PyTorch
====================================================

The textbook makes the Gaussian kernel learnable: the weights are a softmax of
``-((q - x_i) w)^2 / 2`` with a parameter ``w``, trained by gradient descent. Each training
point is a query that attends to all the *other* training points, and the loss is the mean
squared error of these predictions.

That loss is exactly the leave-one-out cross-validation criterion ``CV(h)`` with
``h = 1 / |w|``, so the trained ``w`` should land on ``1 / h`` of
:func:`nadaraya.select_bandwidth`. :class:`nadaraya.nn.KernelPooling` is the layer (it
learns ``log h``, so ``h`` stays positive; ``layer.w`` is ``1 / h``) and
:func:`nadaraya.nn.fit` is the textbook's training loop. Needs the ``torch`` extra.
"""

# %%
# Train
# -----
# Start from ``w = 1`` (``h = 1``) and take full-batch SGD steps, as the textbook does.
import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.ticker import MaxNLocator

import nadaraya
from nadaraya import plot
from nadaraya.datasets import textbook
from nadaraya.nn import KernelPooling, fit

data = textbook(n=50, noise=1.0, seed=0)
torch.manual_seed(0)
layer = KernelPooling("gaussian", bandwidth=1.0, dtype=torch.float64)
history = fit(layer, data.x_train, data.y_train, epochs=20, lr=0.5)
print(
    f"after {len(history['loss'])} epochs: w = {layer.w.item():.3f}, "
    f"h = {layer.bandwidth.item():.3f}, loss {history['loss'][-1]:.4f}"
)

# %%
# Compare with cross-validation
# -----------------------------
# The exact search finds the same bandwidth, and its score is the loss the training reached.
selection = nadaraya.select_bandwidth(data.x_train, data.y_train)
h_cv = float(selection.bandwidth[0])
print(
    f"select_bandwidth: h = {h_cv:.3f} (w = {1 / h_cv:.3f}), CV score {selection.score:.4f}"
)

fig, (left, right) = plt.subplots(
    1, 2, figsize=(9.5, 3.4), layout="constrained"
)
plot.training(history, ax=left, label="leave-one-out training loss")
left.axhline(
    selection.score, color="C3", ls="--", label=f"CV score at h = {h_cv:.3f}"
)
left.set_title("Loss per epoch")
left.legend(frameon=False)
# epoch 0 is the starting h = 1
epochs = np.arange(len(history["bandwidth"]) + 1)
right.plot(
    epochs,
    [1.0, *history["bandwidth"]],
    "o-",
    ms=3,
    color="C0",
    lw=2,
    label="trained h = 1 / w",
)
right.axhline(h_cv, color="C3", ls="--", label="select_bandwidth (CV)")
right.set(xlabel="epoch", ylabel="bandwidth h", title="Bandwidth per epoch")
right.grid(alpha=0.3)
right.legend(frameon=False)
for ax in (left, right):
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
plt.show()

# %%
# The trained layer predicts like ``nadaraya.pool``
# -------------------------------------------------
# The layer takes queries (m, d), keys (n, d) and values (n,) as tensors. Its predictions on
# the validation inputs equal :func:`nadaraya.pool` at the trained bandwidth.
q = torch.as_tensor(data.x_val[:, None])
k = torch.as_tensor(data.x_train[:, None])
v = torch.as_tensor(data.y_train)
with torch.no_grad():
    from_torch = layer(q, k, v).numpy()
from_numpy = nadaraya.pool(
    data.x_val, data.x_train, data.y_train, bandwidth=layer.bandwidth.item()
)
print(
    "largest difference from nadaraya.pool:",
    float(np.abs(from_torch - from_numpy).max()),
)

fig, ax = plt.subplots(figsize=(6.4, 3.6), layout="constrained")
ax.scatter(
    data.x_train, data.y_train, s=16, color="0.6", label="training data"
)
ax.plot(data.x_val, data.y_val, "--", color="k", lw=1.2, label="truth")
ax.plot(
    data.x_val,
    from_torch,
    color="C3",
    lw=2,
    label=f"trained layer, h = {layer.bandwidth.item():.3f}",
)
ax.set(xlabel="x", ylabel="y", title="The learnable model after training")
ax.grid(alpha=0.3)
fig.legend(
    *ax.get_legend_handles_labels(),
    loc="outside lower center",
    ncols=3,
    frameon=False,
)
plt.show()
