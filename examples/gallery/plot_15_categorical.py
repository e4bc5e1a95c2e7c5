"""
Categorical regressors: ``var_types``
=====================================

Kernel regression is not only for continuous inputs. ``var_types`` gives one letter per
column: ``"c"`` continuous, ``"o"`` ordered categorical, ``"u"`` unordered categorical, as in
statsmodels' ``KernelReg`` and R's np. A categorical column gets its own kernel (Aitchison-Aitken
for unordered columns, Wang-van Ryzin for ordered ones, or Li-Racine's for both) whose
bandwidth ``lambda`` is chosen by the same cross-validation as the continuous bandwidths:
``lambda = 0`` fits each category on its own, the top of its range ignores the column (for
the unordered kernels and Li-Racine's ordered one), and in between a category borrows strength
from the others.
"""

# %%
# Data with a continuous, an unordered and an ordered column
# ----------------------------------------------------------
# Years of experience (continuous), one of four sectors (unordered: the codes 0-3 are labels,
# not distances) and an education level 0 < 1 < 2 < 3 (ordered). One sector is small.
import matplotlib.pyplot as plt
import numpy as np

from nadaraya import NadarayaWatson

rng = np.random.default_rng(0)
SECTOR = np.array([0.0, 0.8, -0.5, 0.4])  # each sector's effect
EDUCATION = np.array([0.0, 0.5, 0.6, 1.2])  # each education level's effect


def sample(n):
    experience = rng.uniform(0.0, 40.0, n)
    sector = rng.choice(4, n, p=[0.4, 0.3, 0.25, 0.05])
    education = rng.integers(0, 4, n)
    mean = np.log1p(experience) + SECTOR[sector] + EDUCATION[education]
    return np.column_stack([experience, sector, education]), mean


X, mean = sample(400)
y = mean + rng.normal(0.0, 0.3, mean.size)
X_test, mean_test = sample(2000)

# %%
# Declared, ignored, or read as numbers
# -------------------------------------
# The same local linear regression, each with its bandwidths chosen by cross-validation: with
# the columns declared (``"cuo"``), with the continuous column alone, and with every column read
# as a number (``"ccc"``). The error is against the true mean on 2000 fresh points. Then the
# sectors' labels are shuffled (0, 1, 2, 3 become 2, 0, 3, 1), which changes nothing about the
# data: the declared fit does not move, while the fit that reads the codes as numbers does,
# since it measures distances between labels.
relabel = np.array([2, 0, 3, 1])


def shuffled(A):
    return np.column_stack([A[:, 0], relabel[A[:, 1].astype(int)], A[:, 2]])


fits = {
    'var_types="cuo"': (lambda: NadarayaWatson(degree=1, var_types="cuo"), [0, 1, 2]),
    "experience alone": (lambda: NadarayaWatson(degree=1), [0]),
    'var_types="ccc"': (lambda: NadarayaWatson(degree=1), [0, 1, 2]),
}
models = {}
for name, (make, cols) in fits.items():
    for labels, A, A_test in (("", X, X_test), (", labels shuffled", shuffled(X), shuffled(X_test))):
        if name == "experience alone" and labels:
            continue
        model = make().fit(A[:, cols], y)
        models[name + labels] = model
        rmse = np.sqrt(np.mean((model.predict(A_test[:, cols]) - mean_test) ** 2))
        print(f"{name + labels:<38} bandwidths {np.round(model.bandwidth_, 3)}; "
              f"RMSE against the truth {rmse:.3f}")

# %%
# Reading the codes as numbers gives a different fit for each labelling of the sectors: here
# the shuffled labels happen to order the sectors by their effect (0.8, 0.4, 0, -0.5), and the
# local line's slope across the codes then helps; another labelling would hurt. The declared
# fit is the same for every labelling: an unordered column's kernel only asks "same category
# or not", and the local polynomial terms use the continuous columns only. Ignoring the
# categorical columns costs most. The fit's summary lists each column's type, bandwidth or
# lambda, and levels.
model = models['var_types="cuo"']
print(model.summary())

# %%
# The chosen ``lambda`` of the sector column is small but not zero: each sector is fitted
# mostly from its own points, with a little from the others. For the Aitchison-Aitken kernel
# with four categories the other sectors' weight, relative to the own sector's, is
# ``lambda / 3 / (1 - lambda)``. The ordered column's Wang-van Ryzin weight of a level ``k``
# steps away, relative to the own level, is ``lambda ** k / 2``, so neighbouring education
# levels share more than distant ones.
lam_sector, lam_edu = model.bandwidth_[1], model.bandwidth_[2]
print(f"sector: another sector's points weigh {lam_sector / 3 / (1 - lam_sector):.3f} of the own sector's")
print(f"education: one level apart {lam_edu / 2:.3f}, two levels {lam_edu**2 / 2:.3f}, "
      f"three {lam_edu**3 / 2:.4f} (relative to the same level)")

# %%
# The fitted curves, per sector
# -----------------------------
# At education level 1: four curves of experience, one per sector (dots: that sector's points
# at that level). With ``lambda`` this small the small sector borrows little from the others:
# its curve follows its own few points, and is the noisiest of the four.
grid = np.linspace(0.0, 40.0, 201)
fig, ax = plt.subplots(figsize=(7.5, 4), layout="constrained")
for sector in range(4):
    here = (X[:, 1] == sector) & (X[:, 2] == 1)
    Q = np.column_stack([grid, np.full_like(grid, sector), np.ones_like(grid)])
    colour = f"C{sector}"
    ax.scatter(X[here, 0], y[here], s=10, color=colour, alpha=0.5)
    ax.plot(grid, model.predict(Q), color=colour, lw=2,
            label=f"sector {sector} ({np.sum(X[:, 1] == sector)} points)")
    ax.plot(grid, np.log1p(grid) + SECTOR[sector] + EDUCATION[1], "--", color=colour, lw=1)
ax.set(xlabel="experience (years)", ylabel="y", title="local linear fit, education level 1 (dashed: truth)")
ax.grid(alpha=0.3)
ax.legend(frameon=False, fontsize="small", loc="lower right")
plt.show()

# %%
# Li-Racine's kernels
# -------------------
# ``categorical_kernel="li-racine"`` gives every other category the weight ``lambda`` (unordered)
# or ``lambda ** |difference|`` (ordered) against 1 for the own category, with ``lambda`` in
# ``[0, 1]``: the same family with a different scale. The cross-validated fits are close.
li = NadarayaWatson(degree=1, var_types="cuo", categorical_kernel="li-racine").fit(X, y)
rmse = np.sqrt(np.mean((li.predict(X_test) - mean_test) ** 2))
print(f"li-racine: bandwidths {np.round(li.bandwidth_, 3)}; RMSE against the truth {rmse:.3f}")
