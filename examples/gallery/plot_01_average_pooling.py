"""
Average pooling: the problem
============================

The textbook chapter on attention pooling by similarity starts from a toy regression problem:
50 noisy training points of

.. math:: f(x) = 2 \\sin x + x + \\epsilon, \\qquad \\epsilon \\sim N(0, 1),

with ``x`` drawn uniformly on [0, 5), and a validation grid ``0, 0.1, ..., 4.9`` where the
noise-free ``f`` is known (:func:`nadaraya.datasets.textbook`).

The simplest estimator averages every training target, whatever the query: *average
pooling*. In nadaraya it is attention pooling with the ``constant`` kernel, so every key
gets the same weight ``1 / n``.
"""

# %%
# The data
# --------
# ``textbook()`` returns the sorted training inputs and noisy targets, and the validation
# inputs with the true function's values.
import matplotlib.pyplot as plt
import numpy as np

import nadaraya
from nadaraya.datasets import textbook

data = textbook(n=50, noise=1.0, seed=0)
print(
    data.name,
    "| training:",
    data.x_train.shape,
    "| validation:",
    data.x_val.shape,
)

# %%
# Average pooling
# ---------------
# :func:`nadaraya.pool` takes queries, keys and values. With the constant kernel the
# bandwidth plays no part: each query gets the mean of all the training targets.
average = nadaraya.pool(
    data.x_val, data.x_train, data.y_train, kernel="constant"
)
print(
    "every prediction equals the mean of y:",
    np.allclose(average, data.y_train.mean()),
)
print(
    f"validation MSE of average pooling: {np.mean((average - data.y_val) ** 2):.3f}"
)

# %%
# The picture
# -----------
# A flat line through a curve that climbs from 0 to 3.8 at x = 2.1 and dips to 2.5 at
# x = 4.2: average pooling ignores where the query is. The rest of the gallery lets each
# query weigh the training points by how close they are.
fig, ax = plt.subplots(figsize=(6.4, 3.8), layout="constrained")
ax.scatter(
    data.x_train, data.y_train, s=18, color="0.55", label="training data"
)
ax.plot(data.x_val, data.y_val, "--", color="k", lw=1.5, label="truth f(x)")
ax.plot(data.x_val, average, color="C3", lw=2, label="average pooling")
ax.set(
    xlabel="x",
    ylabel="y",
    title="Average pooling predicts the mean everywhere",
)
ax.grid(alpha=0.3)
ax.legend(frameon=False, loc="upper left")
plt.show()
