"""The textbook example: average pooling and each kernel on f(x) = 2 sin x + x."""

from __future__ import annotations

import numpy as np

import nadaraya
from nadaraya import NadarayaWatson


def main() -> None:
    rng = np.random.default_rng(0)
    n = 50
    x_train = np.sort(rng.uniform(0, 5, n))
    y_train = 2 * np.sin(x_train) + x_train + rng.normal(0.0, 0.5, n)
    x_val = np.arange(0, 5, 0.1)
    y_val = 2 * np.sin(x_val) + x_val
    print(f"Nadaraya-Watson on f(x) = 2 sin x + x, {n} noisy training points, {x_val.size} validation points")
    print(f"{'model':<16}{'bandwidth':>10}{'validation MSE':>16}")
    for name in nadaraya.kernels.names():
        model = NadarayaWatson(kernel=name, bandwidth="scott", empty="nearest").fit(x_train[:, None], y_train)
        mse = float(np.mean((model.predict(x_val[:, None]) - y_val) ** 2))
        label = "average pooling" if name == "constant" else name
        print(f"{label:<16}{model.bandwidth_[0]:>10.3f}{mse:>16.4f}")


if __name__ == "__main__":
    main()
