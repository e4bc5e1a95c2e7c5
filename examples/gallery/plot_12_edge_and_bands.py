"""
Local linear at the edge, and confidence bands
==============================================

Near the edge of the data every point in the kernel's window lies on one side of the query.
Where the function slopes there, Nadaraya-Watson's weighted mean (``degree=0``) is pulled
towards the inside: a bias of the order of the slope times the bandwidth. A local line
(``degree=1``) removes it, at the price of some variance at the edge. This example measures
both by simulation, with the same design and 400 fresh noise draws, and then draws the
confidence bands that :meth:`~nadaraya.NadarayaWatson.confidence_band` offers for a fit.
"""

# %%
# Bias and noise of each degree, by simulation
# --------------------------------------------
# ``y = 2 sin x + x + noise`` on 200 points of ``[0, 5]``, the bandwidth held at 0.4. Every
# replicate shares the design, so the 400 replicates are 400 value columns of one
# :func:`nadaraya.pool` call per degree: the bias and the standard deviation of each degree's
# prediction at every query come from one pass each.
import matplotlib.pyplot as plt
import numpy as np

import nadaraya
from nadaraya import NadarayaWatson


def truth(x):
    return 2 * np.sin(x) + x


rng = np.random.default_rng(0)
n, reps, h = 200, 400, 0.4
x = np.sort(rng.uniform(0.0, 5.0, n))
Y = truth(x)[:, None] + rng.normal(0.0, 0.5, (n, reps))  # one column per replicate
grid = np.linspace(0.0, 5.0, 101)

fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), layout="constrained", sharex=True)
names = {0: "Nadaraya-Watson", 1: "local linear", 2: "local quadratic"}
for degree, colour in ((0, "C3"), (1, "C0"), (2, "C2")):
    name = names[degree]
    pred = nadaraya.pool(grid, x, Y, bandwidth=h, degree=degree)  # (101, 400)
    bias = pred.mean(axis=1) - truth(grid)
    sd = pred.std(axis=1)
    axes[0].plot(grid, bias, color=colour, lw=2, label=f"{name} (degree {degree})")
    axes[1].plot(grid, sd, color=colour, lw=2, label=name)
    print(f"degree {degree}: at x = 0 bias {bias[0]:+.3f}, sd {sd[0]:.3f}; "
          f"at x = 2.5 bias {bias[50]:+.3f}, sd {sd[50]:.3f}")
axes[0].axhline(0.0, color="k", lw=0.8)
axes[0].set(xlabel="x", ylabel="mean prediction - truth", title=f"bias, h = {h}")
axes[1].set(xlabel="x", ylabel="standard deviation", title="noise of the prediction", ylim=(0, None))
for ax in axes:
    ax.grid(alpha=0.3)
axes[1].legend(*axes[0].get_legend_handles_labels(), frameon=False, fontsize="small", loc="upper center")
plt.show()

# %%
# Nadaraya-Watson's bias at ``x = 0`` is of the order of the slope (3) times ``h``; the local
# line's is near zero everywhere, and its noise at the very edge is larger (its slope there is
# decided by the points on one side). Inside the range, where the design is symmetric around
# the query, degree 0 and 1 give the same fit to first order, with the same bias where
# ``2 sin x`` curves; the quadratic also follows the curvature (its bias is near zero
# throughout) and pays for it with more noise.
#
# Confidence bands
# ----------------
# One sample, a local linear fit with its bandwidth chosen by leave-one-out CV. Three methods
# (``method=``) and two kinds (``kind=``):
#
# - ``"asymptotic"``: estimate -+ z times the exact standard error given the design;
# - ``"bootstrap"``: the wild bootstrap, all replicates one matrix product with the smoother;
# - ``"rbc"``: robust bias correction, centred on the degree ``p + 1`` fit and studentised by
#   its standard error, so that it covers the *true* function, not only the smoothed one;
# - ``kind="simultaneous"`` widens a band to cover the whole curve at once.
y = Y[:, 0]
model = NadarayaWatson(degree=1).fit(x[:, None], y)
G = grid[:, None]
bands = {
    "asymptotic, pointwise": model.confidence_band(G),
    "bootstrap, pointwise": model.confidence_band(G, method="bootstrap", n_boot=499, random_state=0),
    "rbc, pointwise": model.confidence_band(G, method="rbc"),
    "asymptotic, simultaneous": model.confidence_band(G, kind="simultaneous", n_boot=499, random_state=0),
}
print(f"CV bandwidth {model.bandwidth_[0]:.3f}")
for name, band in bands.items():
    width = band.upper - band.lower
    covered = np.mean((band.lower <= truth(grid)) & (truth(grid) <= band.upper))
    print(f"{name:<26} width at x = 0: {width[0]:.3f}, at x = 2.5: {width[50]:.3f}; "
          f"covers the truth at {covered:.0%} of the grid")

fig, axes = plt.subplots(1, 2, figsize=(10, 4.4), layout="constrained", width_ratios=[1.6, 1])
for ax, xlim in zip(axes, [(0, 5), (0, 1)]):
    ax.scatter(x, y, s=8, color="0.65", label="data")
    ax.plot(grid, truth(grid), "--", color="k", lw=1.2, label="truth")
    ax.plot(grid, bands["asymptotic, pointwise"].estimate, color="C0", lw=2, label="local linear fit")
    ax.fill_between(grid, bands["asymptotic, pointwise"].lower, bands["asymptotic, pointwise"].upper,
                    color="C0", alpha=0.25, lw=0, label="asymptotic, pointwise")
    ax.fill_between(grid, bands["rbc, pointwise"].lower, bands["rbc, pointwise"].upper,
                    color="C1", alpha=0.2, lw=0, label="rbc, pointwise")
    for name, ls in (("bootstrap, pointwise", "-"), ("asymptotic, simultaneous", ":")):
        band = bands[name]
        ax.plot(grid, band.lower, ls, color="C4", lw=1.2, label=name)
        ax.plot(grid, band.upper, ls, color="C4", lw=1.2)
    ax.set(xlim=xlim, xlabel="x")
    ax.grid(alpha=0.3)
axes[0].set(ylabel="y", title="95 % bands of one local linear fit")
axes[1].set(ylim=(-1.0, 3.5), title="the edge at x = 0, enlarged")
fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncols=4, frameon=False,
           fontsize="small")
plt.show()

# %%
# The asymptotic and bootstrap bands cover the same target (the smoothed curve) and differ
# only in how they get its spread; the simultaneous band is wider everywhere, the price of
# covering all 101 points at once; the rbc band is centred on the local quadratic at the same
# bandwidth and studentised by its larger standard error, so it also covers where the local
# line is biased (near the peak and the trough). The next example measures how often each
# covers the truth.
