"""
Real data: diabetes, in a scikit-learn pipeline
===============================================

scikit-learn's diabetes data (:func:`nadaraya.datasets.diabetes`): ten baseline measurements
of 442 patients and a measure of disease progression one year later.
:class:`nadaraya.NadarayaWatson` is a scikit-learn regressor, so it goes into a ``Pipeline``
and through ``cross_val_score`` like any other. With several features the default
``bandwidth="cv"`` chooses *one bandwidth per feature*; a feature that does not help predict
ends with a bandwidth far larger than its spread, which smooths it out of the fit.
"""

# %%
# Cross-validated R²
# ------------------
# Each of the five training folds chooses its own ten bandwidths by leave-one-out CV. For
# comparison: the same estimator with Scott's rule of thumb for every feature, and a linear
# model. Warnings are recorded and printed after the scores.
import warnings

import matplotlib.pyplot as plt
from matplotlib.patches import Patch
from sklearn.linear_model import LinearRegression
from sklearn.model_selection import KFold, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from nadaraya import NadarayaWatson
from nadaraya.datasets import diabetes

data = diabetes()
print(data.description, "|", data.X.shape, "|", ", ".join(data.feature_names))
folds = KFold(5, shuffle=True, random_state=0)
models = {
    "Nadaraya-Watson, CV per feature": make_pipeline(
        StandardScaler(), NadarayaWatson(bandwidth="cv")
    ),
    "Nadaraya-Watson, Scott's rule": make_pipeline(
        StandardScaler(), NadarayaWatson(bandwidth="scott")
    ),
    "linear regression": make_pipeline(StandardScaler(), LinearRegression()),
}
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    scores = {
        name: cross_val_score(model, data.X, data.y, cv=folds)
        for name, model in models.items()
    }
for name, s in scores.items():
    print(f"{name:<33} R² {s.mean():.3f} +- {s.std():.3f}")
for w in caught:
    print(f"{w.category.__name__}: {w.message}")

# %%
# One fold warned: ``sex`` is a binary feature (two values, about two standard deviations
# apart once standardised). Its bandwidth either keeps the two groups apart (any ``h`` well
# below 1 does, down to the search's lower bound) or merges them (a large ``h``); in that fold
# CV preferred to keep them apart and stopped on the lower bound, which the
# ``BandwidthWarning`` reports. Nothing is wrong with that fit; kernels made for categorical
# features are planned.
#
# Which features the fit uses
# ---------------------------
# Fitted on all the data, the search keeps its record in ``selection_``; ``smoothed_out``
# names the features whose bandwidth is so large that the fit ignores them (a normal outcome,
# recorded rather than warned about). The features are standardised, so a bandwidth near 1
# is about one standard deviation.
pipe = make_pipeline(StandardScaler(), NadarayaWatson(bandwidth="cv")).fit(
    data.X, data.y
)
nw = pipe[-1]
print(nw.selection_)
for name, h, out in zip(
    data.feature_names, nw.bandwidth_, nw.selection_.smoothed_out
):
    print(f"{name:>4}: h = {h:9.3f}{'  (smoothed out)' if out else ''}")

fig, (left, right) = plt.subplots(
    1,
    2,
    figsize=(10, 3.8),
    layout="constrained",
    gridspec_kw={"width_ratios": [1.3, 1]},
)
colors = ["0.7" if out else "C0" for out in nw.selection_.smoothed_out]
left.bar(data.feature_names, nw.bandwidth_, color=colors)
left.set(
    yscale="log",
    xlabel="feature (standardised)",
    ylabel="bandwidth h (log scale)",
    title="Per-feature bandwidths chosen by CV",
)
left.axhline(1.0, color="k", lw=0.8, ls=":")
# room for the legend above the bars
left.set_ylim(top=30 * nw.bandwidth_.max())
left.legend(
    handles=[
        Patch(color="C0", label="used by the fit"),
        Patch(color="0.7", label="smoothed out (ignored by the fit)"),
    ],
    frameon=False,
    loc="upper left",
    ncols=2,
    fontsize="small",
)
left.grid(alpha=0.3, axis="y")

names = list(scores)
right.boxplot([scores[n] for n in names], orientation="horizontal", widths=0.5)
right.set_yticks(
    range(1, len(names) + 1), [n.replace(", ", ",\n") for n in names]
)
right.set(
    xlabel="R² on the held-out fold (5 folds)", title="Cross-validated R²"
)
right.grid(alpha=0.3, axis="x")
plt.show()

# %%
# Nadaraya-Watson is a local average: with ten features and 350 patients per training fold
# the neighbourhoods are thin, and a linear model, which pools all the data into eleven
# numbers, predicts this target a little better. Choosing a bandwidth per feature is what
# brings the kernel fit near it: it drops the features that only add noise to the distances,
# where one rule of thumb for every feature keeps them all.
