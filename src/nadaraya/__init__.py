"""nadaraya: attention pooling by similarity (Nadaraya-Watson kernel regression)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import kernels
from ._attention import attention_weights
from ._config import config_context, get_config, set_config
from .pooling import EmptyWindowWarning, loo_pool, pool

if TYPE_CHECKING:
    from ._fit import SingularFitWarning
    from ._inference import Band
    from ._sigtest import SignificanceTest
    from ._summary import FitSummary
    from .density import ConditionalDensity, KernelDensity
    from .estimator import NadarayaWatson
    from .local.lowess import lowess
    from .nn import AttentionPoolingRegressor

from ._version import __version__

__all__ = [
    "AttentionPoolingRegressor",
    "Band",
    "ConditionalDensity",
    "EmptyWindowWarning",
    "FitSummary",
    "KernelDensity",
    "NadarayaWatson",
    "SignificanceTest",
    "SingularFitWarning",
    "__version__",
    "attention_weights",
    "config_context",
    "get_config",
    "kernels",
    "load",
    "loo_pool",
    "lowess",
    "pool",
    "select_bandwidth",
    "set_config",
]

# Names whose modules pull in optional or heavy dependencies: imported on first access, so
# that `import nadaraya` stays light (no numba, torch, dask, matplotlib or pandas).
# scikit-learn itself imports pandas when it is installed, so the estimator is lazy too.
_LAZY: dict[str, tuple[str, str]] = {
    "NadarayaWatson": ("nadaraya.estimator", "NadarayaWatson"),
    "KernelDensity": ("nadaraya.density", "KernelDensity"),
    "ConditionalDensity": ("nadaraya.density", "ConditionalDensity"),
    "AttentionPoolingRegressor": ("nadaraya.nn._regressor", "AttentionPoolingRegressor"),
    "load": ("nadaraya.persist", "load"),
    "select_bandwidth": ("nadaraya.bandwidth", "select_bandwidth"),
    "lowess": ("nadaraya.local.lowess", "lowess"),
    "SingularFitWarning": ("nadaraya._fit", "SingularFitWarning"),
    "FitSummary": ("nadaraya._summary", "FitSummary"),
    "Band": ("nadaraya._inference", "Band"),
    "SignificanceTest": ("nadaraya._sigtest", "SignificanceTest"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'nadaraya' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
