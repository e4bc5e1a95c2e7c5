"""Data sets: the textbook's synthetic function and real data that ships inside installed packages."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

__all__ = ["TEXTBOOK_VARIANTS", "Dataset", "Split", "diabetes", "engel", "textbook", "textbook_function"]


def _two_sin_plus_x(x: NDArray[np.float64]) -> NDArray[np.float64]:
    return 2.0 * np.sin(x) + x


def _two_sin_plus_x08(x: NDArray[np.float64]) -> NDArray[np.float64]:
    return 2.0 * np.sin(x) + x**0.8


#: The textbook's functions by variant name.
TEXTBOOK_VARIANTS: dict[str, Callable[[NDArray[np.float64]], NDArray[np.float64]]] = {
    "2sin+x": _two_sin_plus_x,
    "2sin+x^0.8": _two_sin_plus_x08,
}


@dataclass(frozen=True)
class Split:
    """Training and validation sets of a one-feature regression problem with a known truth.

    Attributes
    ----------
    x_train, y_train : ndarray of shape (n,)
        Training inputs (sorted) and noisy targets.
    x_val, y_val : ndarray of shape (m,)
        Validation inputs on a grid and the noise-free targets ``truth(x_val)``.
    truth : callable
        The function the data come from.
    name : str
        A short description, e.g. ``"f(x) = 2 sin x + x"``.

    Examples
    --------
    >>> from nadaraya.datasets import textbook
    >>> s = textbook(n=10)
    >>> s.x_train.shape, s.x_val.shape
    ((10,), (50,))
    >>> s
    Split('f(x) = 2 sin x + x', n_train=10, n_val=50)
    """

    x_train: NDArray[np.float64]
    y_train: NDArray[np.float64]
    x_val: NDArray[np.float64]
    y_val: NDArray[np.float64]
    truth: Callable[[NDArray[np.float64]], NDArray[np.float64]] = field(repr=False)
    name: str = ""

    def __repr__(self) -> str:
        return f"Split({self.name!r}, n_train={self.x_train.size}, n_val={self.x_val.size})"


@dataclass(frozen=True)
class Dataset:
    """A real data set: features, target and their names.

    Attributes
    ----------
    X : ndarray of shape (n, d)
    y : ndarray of shape (n,)
    feature_names : list of str
    target_name : str
    description : str
        Where the data come from.

    Examples
    --------
    >>> from nadaraya.datasets import diabetes
    >>> diabetes().X.shape
    (442, 10)
    >>> diabetes()  # the shapes and names, not the arrays
    Dataset(X: (442, 10), y: (442,), features=['age', 'sex', 'bmi', 'bp', ...], target='progression')
    """

    X: NDArray[np.float64]
    y: NDArray[np.float64]
    feature_names: list[str]
    target_name: str
    description: str = ""

    def __repr__(self) -> str:
        names = self.feature_names if len(self.feature_names) <= 5 else [*self.feature_names[:4], "..."]
        shown = "[" + ", ".join(n if n == "..." else repr(n) for n in names) + "]"
        return (f"Dataset(X: {self.X.shape}, y: {self.y.shape}, features={shown}, "
                f"target={self.target_name!r})")


def textbook_function(variant: str = "2sin+x") -> Callable[[NDArray[np.float64]], NDArray[np.float64]]:
    """The textbook's true function: ``2 sin x + x`` or ``2 sin x + x^0.8``.

    Parameters
    ----------
    variant : {"2sin+x", "2sin+x^0.8"}

    Returns
    -------
    callable

    Examples
    --------
    >>> from nadaraya.datasets import textbook_function
    >>> f = textbook_function("2sin+x^0.8")
    >>> float(f(0.0)), round(float(f(1.0)), 4)
    (0.0, 2.6829)
    """
    try:
        return TEXTBOOK_VARIANTS[variant]
    except KeyError:
        raise ValueError(
            f"variant={variant!r} is not known; choose one of {', '.join(map(repr, TEXTBOOK_VARIANTS))}"
        ) from None


def textbook(n: int = 50, noise: float = 1.0, seed: int = 0, variant: str = "2sin+x") -> Split:
    """The data of the textbook chapter on attention pooling by similarity (Dive into Deep Learning).

    ``n`` training inputs drawn uniformly on [0, 5) and sorted, targets ``f(x) + noise * N(0, 1)``;
    validation inputs ``0, 0.1, ..., 4.9`` with the noise-free ``f``. ``f`` is ``2 sin x + x``
    (``variant="2sin+x"``) or ``2 sin x + x^0.8`` (``variant="2sin+x^0.8"``, the earlier edition).

    Parameters
    ----------
    n : int, default 50
        Number of training points (at least 1).
    noise : float, default 1.0
        Standard deviation of the Gaussian noise on the training targets (at least 0).
    seed : int, default 0
        Seed of :func:`numpy.random.default_rng`; the same seed gives the same data.
    variant : {"2sin+x", "2sin+x^0.8"}, default "2sin+x"

    Returns
    -------
    Split

    Examples
    --------
    >>> from nadaraya.datasets import textbook
    >>> s = textbook(n=50, noise=0.0)
    >>> bool(abs(s.y_train - (2 * np.sin(s.x_train) + s.x_train)).max() == 0)
    True
    """
    f = textbook_function(variant)
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be a positive integer; got {n!r}")
    if not np.isfinite(noise) or noise < 0:
        raise ValueError(f"noise must be a finite number >= 0; got {noise!r}")
    rng = np.random.default_rng(seed)
    x_train = np.sort(rng.uniform(0.0, 5.0, int(n)))
    y_train = f(x_train) + noise * rng.standard_normal(int(n))
    x_val = np.arange(0.0, 5.0, 0.1)
    label = "f(x) = 2 sin x + x" if variant == "2sin+x" else "f(x) = 2 sin x + x^0.8"
    return Split(x_train, y_train, x_val, f(x_val), f, label)


def diabetes() -> Dataset:
    """scikit-learn's diabetes data (442 patients, 10 standardised features), read from local files.

    Returns
    -------
    Dataset
        ``y`` is a quantitative measure of disease progression one year after baseline.

    Examples
    --------
    >>> from nadaraya.datasets import diabetes
    >>> d = diabetes()
    >>> d.feature_names[:3], d.target_name
    (['age', 'sex', 'bmi'], 'progression')
    """
    from sklearn.datasets import load_diabetes

    b = load_diabetes()
    return Dataset(
        np.ascontiguousarray(b.data, dtype=np.float64),
        np.asarray(b.target, dtype=np.float64),
        list(b.feature_names),
        "progression",
        "Diabetes data of Efron et al. (2004), as shipped with scikit-learn",
    )


def engel() -> Dataset:
    """Engel's food expenditure data (235 Belgian households, 1857): food spending against income.

    A classic one-feature kernel-regression example; it ships with statsmodels (a test
    dependency of nadaraya), so loading it needs ``statsmodels`` but no download.

    Returns
    -------
    Dataset

    Raises
    ------
    ImportError
        When statsmodels is not installed (``pip install statsmodels``).

    Examples
    --------
    >>> from nadaraya.datasets import engel
    >>> e = engel()
    >>> e.X.shape, e.feature_names, e.target_name
    ((235, 1), ['income'], 'foodexp')
    """
    try:
        from statsmodels.datasets import engel as _engel
    except ImportError as exc:  # pragma: no cover - statsmodels is a dev dependency
        raise ImportError("nadaraya.datasets.engel() needs statsmodels: pip install statsmodels") from exc
    frame = _engel.load_pandas().data
    return Dataset(
        np.ascontiguousarray(frame[["income"]].to_numpy(dtype=np.float64)),
        frame["foodexp"].to_numpy(dtype=np.float64),
        ["income"],
        "foodexp",
        "Engel food expenditure data (Koenker and Bassett, 1982), as shipped with statsmodels",
    )
