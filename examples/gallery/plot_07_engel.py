"""
Real data: Engel's food expenditure
===================================

Engel's data (Koenker and Bassett, 1982): the yearly income and food expenditure of 235
Belgian working-class households in 1857, a classic one-feature example for kernel
regression. It ships with statsmodels, so :func:`nadaraya.datasets.engel` needs no download.

:class:`nadaraya.NadarayaWatson` is a scikit-learn regressor; with the default
``bandwidth="cv"`` it chooses the bandwidth by exact leave-one-out cross-validation when it
is fitted, and ``bandwidth="aicc"`` by the corrected AIC of Hurvich, Simonoff and Tsai.
"""

# %%
# Fit with the bandwidth chosen by CV and by AICc
# -----------------------------------------------
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer

from nadaraya import NadarayaWatson, plot
from nadaraya.datasets import engel

data = engel()
print(data.description, "|", data.X.shape[0], "households")
cv = NadarayaWatson(bandwidth="cv").fit(data.X, data.y)
aicc = NadarayaWatson(bandwidth="aicc").fit(data.X, data.y)
print(
    f"CV:   h = {cv.bandwidth_[0]:.1f}, R^2 on the data {cv.score(data.X, data.y):.3f}"
)
print(
    f"AICc: h = {aicc.bandwidth_[0]:.1f}, R^2 on the data {aicc.score(data.X, data.y):.3f}"
)

# %%
# The search, as a table
# ----------------------
# ``cv_results_`` keeps every bandwidth the search evaluated, as scikit-learn's searches keep
# theirs: a dict of arrays that pandas reads directly.
table = pd.DataFrame(cv.cv_results_).sort_values("rank")
print(table.head().to_string(index=False))

# %%
# The fits and the CV curve
# -------------------------
# Food spending grows with income, more slowly than income itself. A few households earn far
# more than the rest, and there a local average has little to average: above an income of
# about 2800 francs each fitted curve is flat at the nearest household's spending, and jumps
# halfway between two of them. AICc prefers a smaller bandwidth than CV here, so its curve
# is wigglier.
grid = np.linspace(data.X.min(), data.X.max(), 400)[:, None]
fig, (left, right) = plt.subplots(
    1, 2, figsize=(10, 3.8), layout="constrained"
)
left.scatter(data.X[:, 0], data.y, s=12, color="0.6", label="households")
left.plot(
    grid[:, 0],
    cv.predict(grid),
    color="C3",
    lw=2,
    label=f"CV, h = {cv.bandwidth_[0]:.0f}",
)
left.plot(
    grid[:, 0],
    aicc.predict(grid),
    color="C0",
    lw=1.2,
    label=f"AICc, h = {aicc.bandwidth_[0]:.0f}",
)
left.set(
    xlabel="household income (Belgian francs per year)",
    ylabel="food expenditure (francs per year)",
    title="Fitted on income",
)
left.grid(alpha=0.3)
left.legend(frameon=False, loc="upper left")

plot.bandwidth_curve(
    table["bandwidth"],
    table["score"],
    chosen=cv.bandwidth_[0],
    ax=right,
    method="cv",
    label="CV(h), Gaussian kernel",
)
right.set_title("Leave-one-out CV over the bandwidth (income)")
right.get_legend().remove()
right.legend(frameon=False, loc="upper left")
plt.show()

# %%
# Fitted on log income
# --------------------
# Income is skewed; on a log scale the households are spread more evenly, so one bandwidth
# suits the whole range. A scikit-learn ``Pipeline`` takes the log before the estimator,
# and CV then chooses the bandwidth in log units.
logfit = make_pipeline(
    FunctionTransformer(np.log), NadarayaWatson(bandwidth="cv")
).fit(data.X, data.y)
h_log = logfit[-1].bandwidth_[0]
print(
    f"CV on log income: h = {h_log:.3f} (a factor of {np.exp(h_log):.2f} in income)"
)

fig, ax = plt.subplots(figsize=(6.4, 3.8), layout="constrained")
ax.scatter(data.X[:, 0], data.y, s=12, color="0.6", label="households")
ax.plot(
    grid[:, 0],
    logfit.predict(grid),
    color="C3",
    lw=2,
    label=f"CV on log income, h = {h_log:.2f}",
)
ax.set(
    xscale="log",
    xlabel="household income (francs per year, log scale)",
    ylabel="food expenditure (francs per year)",
    title="Fitted on log income",
)
ticks = [500, 1000, 2000, 4000]
ax.set_xticks(ticks, [str(t) for t in ticks])
ax.set_xticks([], minor=True)
ax.grid(alpha=0.3)
ax.legend(frameon=False, loc="upper left")
plt.show()
