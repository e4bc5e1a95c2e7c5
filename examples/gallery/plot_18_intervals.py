"""
Prediction intervals beside confidence bands
============================================

A confidence band covers the regression function ``E[y | x]``: where the *mean* of y lies.
A prediction interval covers the *next observation*: where a new y will fall, noise
included. This example draws both for one fit and counts what each covers, on fresh draws
from the same model: the band holds the true curve and few new points; the interval holds
about 90 % of new points. With ``adaptive=True`` the interval widens where the noise does, so
that it holds about 90 % in the quiet and the noisy parts alike.
"""

# %%
# One sample, both shades
# -----------------------
# ``y = 2 sin x + noise`` on 300 points of ``[0, 5]``, the noise growing with x. The band is
# :meth:`~nadaraya.NadarayaWatson.confidence_band`'s (pointwise, 90 %); the intervals are
# :meth:`~nadaraya.NadarayaWatson.prediction_interval`'s jackknife+ (90 %), computed from the
# exact leave-one-out models, not refitted.
import matplotlib.pyplot as plt
import numpy as np

from nadaraya import NadarayaWatson, plot


def truth(x):
    return 2 * np.sin(x)


def noise_sd(x):
    return 0.1 + 0.25 * x


rng = np.random.default_rng(0)
n = 300
x = rng.uniform(0.0, 5.0, n)
y = truth(x) + rng.normal(0.0, noise_sd(x))
model = NadarayaWatson(degree=1).fit(x[:, None], y)  # bandwidth by leave-one-out CV
grid = np.linspace(0.0, 5.0, 101)
band = model.confidence_band(grid[:, None], level=0.9)
plain = model.prediction_interval(grid[:, None], level=0.9)
adaptive = model.prediction_interval(grid[:, None], level=0.9, adaptive=True)

fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), layout="constrained", sharey=True)
for ax, interval, title in ((axes[0], plain, "jackknife+"), (axes[1], adaptive, "jackknife+, adaptive=True")):
    plot.fit(x, y, grid, model.predict(grid[:, None]), truth=truth(grid), band=band, interval=interval, ax=ax,
             legend=ax is axes[0])
    ax.set_title(title)
plt.show()

# %%
# What each covers
# ----------------
# 2000 new points from the same model, at new x: the share inside the band, inside each
# interval, and in the quiet (x < 2.5) and noisy halves. The band's share of the true curve
# is the share of the grid where ``truth`` lies inside it.
xt = rng.uniform(0.0, 5.0, 2000)
yt = truth(xt) + rng.normal(0.0, noise_sd(xt))
b = model.confidence_band(xt[:, None], level=0.9)
quiet = xt < 2.5
rows = {"band": (b.lower, b.upper)}
rows["interval"] = model.prediction_interval(xt[:, None], level=0.9)
rows["interval, adaptive"] = model.prediction_interval(xt[:, None], level=0.9, adaptive=True)
inside_truth = np.mean((band.lower <= truth(grid)) & (truth(grid) <= band.upper))
print(f"the band holds the true curve on {inside_truth:.0%} of the grid")
print(f"{'':<20}{'new y inside':>14}{'quiet half':>12}{'noisy half':>12}")
for name, (lo, hi) in rows.items():
    hit = (lo <= yt) & (yt <= hi)
    print(f"{name:<20}{hit.mean():>14.1%}{hit[quiet].mean():>12.1%}{hit[~quiet].mean():>12.1%}")

# %%
# The band is narrow: it is about the curve, and most new points fall outside it. The
# plain interval holds about 90 % of new points overall, but too many in the quiet half and
# too few in the noisy one, because it has one width everywhere. The adaptive interval
# divides each residual by a smoothed spread and multiplies back at the query: it holds
# close to 90 % in both halves.
