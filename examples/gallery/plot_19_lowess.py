"""
LOWESS with confidence bands, and its span chosen by cross-validation
=====================================================================

The annual flow of the Nile at Aswan, 1871-1970 (statsmodels' ``nile`` data set, shipped with
statsmodels): a drop around 1898, when the first Aswan dam was built, and years of flood and
drought far from the trend. :func:`nadaraya.lowess` is statsmodels' ``lowess`` (same arguments,
same result to rounding, much faster at size); ``return_band=`` adds a pointwise confidence band,
which statsmodels does not offer. The same smoother is an estimator,
``NadarayaWatson(kernel="tricube", degree=1, bandwidth_type="generalized_nn",
robust_iterations=3)``, whose span can be chosen by leave-one-out cross-validation.
"""

# %%
# LOWESS beside statsmodels'
# --------------------------
import matplotlib.pyplot as plt
import numpy as np
import statsmodels.api as sm

import nadaraya
from nadaraya import NadarayaWatson

nile = sm.datasets.nile.load_pandas().data
year, flow = nile["year"].to_numpy(), nile["volume"].to_numpy()
frac, it = 0.3, 3
ours = nadaraya.lowess(flow, year, frac=frac, it=it, return_band=0.95)  # x, fit, lower, upper
theirs = sm.nonparametric.lowess(flow, year, frac=frac, it=it)
print(f"largest difference from statsmodels: {np.max(np.abs(ours[:, 1] - theirs[:, 1])):.1e} "
      f"(flows of about {flow.mean():.0f})")

# %%
# The span by cross-validation
# ----------------------------
# ``bandwidth="cv"`` scores every number of neighbours ``k`` from 1 to n - 1 by leave-one-out
# CV in one pass (the robustness iterations then start from that span).
model = NadarayaWatson(kernel="tricube", degree=1, bandwidth_type="generalized_nn", bandwidth="cv",
                       robust_iterations=it).fit(year[:, None], flow)
k = int(model.bandwidth_[0])
grid = np.linspace(year.min(), year.max(), 300)
band = model.confidence_band(grid[:, None], variance="homoscedastic")
print(f"CV chose k = {k} neighbours (span {k / year.size:.2f})")

fig, axes = plt.subplots(1, 2, figsize=(11, 4), layout="constrained", sharey=True)
ax = axes[0]
ax.scatter(year, flow, s=12, color="0.5", label="annual flow")
ax.fill_between(ours[:, 0], ours[:, 2], ours[:, 3], color="C0", alpha=0.25, label="95% band")
ax.plot(ours[:, 0], ours[:, 1], color="C0", lw=2.5, label=f"nadaraya.lowess (frac={frac}, it={it})")
ax.plot(theirs[:, 0], theirs[:, 1], color="C3", lw=1, ls="--", label="statsmodels' lowess")
ax.set(xlabel="year", ylabel="flow (1e8 m^3)", title="LOWESS with a band")
ax.legend(frameon=False, fontsize="small")
ax = axes[1]
ax.scatter(year, flow, s=12, color="0.5")
weights = np.empty_like(flow)
weights[model.fit_order_] = model.robustness_weights_
low = weights < 0.5
ax.scatter(year[low], flow[low], s=30, facecolor="none", edgecolor="C3", label="robustness weight < 0.5")
ax.fill_between(grid, band.lower, band.upper, color="C2", alpha=0.25, label="95% band")
ax.plot(grid, band.estimate, color="C2", lw=2.5, label=f"span by CV: k = {k}")
ax.set(xlabel="year", title="the span chosen by cross-validation")
ax.legend(frameon=False, fontsize="small")
plt.show()

# %%
# The two curves on the left coincide: the fit is statsmodels', computed exactly. The band
# covers the *smoothed* curve (the fit's bias is not in it); it is wider at the ends of the
# record, where the window has points on one side only. The points circled on the right got
# small robustness weights: the floods and droughts the fit does not follow.
