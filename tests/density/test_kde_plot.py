"""plot.density: the 1-D curve is the model's density over a rug of the data; 2-D contours."""

from __future__ import annotations

import numpy as np
import pytest

from nadaraya import KernelDensity

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")


def test_curve_is_the_density_and_the_rug_the_data():
    import matplotlib.pyplot as plt

    from nadaraya import plot

    x = np.random.default_rng(0).normal(size=(60, 1))
    model = KernelDensity(bandwidth=0.4).fit(x)
    ax = plot.density(model, grid=101)
    curve = next(line for line in ax.get_lines() if line.get_label() == "density")
    gx, gy = curve.get_data()
    np.testing.assert_allclose(gy, model.pdf(np.asarray(gx)[:, None]), rtol=1e-12)
    assert gx[0] == pytest.approx(x.min() - 1.2) and gx[-1] == pytest.approx(x.max() + 1.2)
    rug = next(line for line in ax.get_lines() if line.get_label() == "data")
    np.testing.assert_array_equal(rug.get_data()[0], x[:, 0])
    plt.close("all")


def test_contours_in_2d_and_refusals():
    import matplotlib.pyplot as plt

    from nadaraya import plot

    x = np.random.default_rng(1).normal(size=(50, 2))
    ax = plot.density(KernelDensity(bandwidth=[0.5, 0.5]).fit(x), grid=40, levels=5)
    assert len(ax.collections) >= 2  # the filled contours and the data points
    with pytest.raises(ValueError, match="fitted"):
        plot.density(KernelDensity())
    with pytest.raises(ValueError, match="continuous"):
        plot.density(KernelDensity(bandwidth=[0.5, 0.2], var_types="cu").fit(
            np.column_stack([x[:, 0], np.arange(50) % 3])))
    with pytest.raises(ValueError, match="grid"):
        plot.density(KernelDensity(bandwidth=0.5).fit(x[:, :1]), grid=1)
    plt.close("all")
