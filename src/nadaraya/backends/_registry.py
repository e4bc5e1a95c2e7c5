"""The backends' registry: names, modules, extras, the choice record, a backend imported by name."""

from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass
from typing import Literal, Protocol, cast, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from nadaraya.kernels import Kernel
from nadaraya.partials import Partials

#: the values ``backend=`` accepts
BackendName = Literal[
    "auto", "reference", "fused", "windowed", "dask", "laplace", "torch", "truncated", "taylor", "binned",
    "constant",
    "logistic",
]


#: backend name -> (module, the extra that provides its dependencies, modules it needs)
_REGISTRY: dict[str, tuple[str, str | None, tuple[str, ...]]] = {
    "reference": ("nadaraya.backends.reference", None, ()),
    "fused": ("nadaraya.backends.fused", None, ()),
    "windowed": ("nadaraya.backends.windowed", None, ()),
    "dask": ("nadaraya.distributed.backend", "dask", ("dask", "distributed")),
    "laplace": ("nadaraya.backends.laplace", None, ()),
    "torch": ("nadaraya.backends.torch_sums", "torch", ("torch",)),
    "truncated": ("nadaraya.backends.truncated", None, ()),
    "taylor": ("nadaraya.backends.taylor", None, ()),
    "binned": ("nadaraya.backends.binned", None, ()),
    "constant": ("nadaraya.backends.constant", None, ()),
    "logistic": ("nadaraya.backends.logistic", None, ()),
}


#: the backend names, ``"auto"`` first
NAMES: tuple[str, ...] = ("auto", *_REGISTRY)


#: the backends whose sums are within a tolerance, never exact: they need a ``tol``
WITHIN_TOL: tuple[str, ...] = ("taylor", "binned")


#: below this many (query, key) pairs ``auto`` keeps the NumPy reference: loading numba and the
#: cached machine code (about 0.5 s once per process) costs more than the sums themselves.
SMALL_PAIRS = 200_000


@dataclass(frozen=True)
class Choice:
    """A backend chosen for one call, and why.

    Examples
    --------
    >>> Choice("reference", "the only backend").name
    'reference'
    """

    name: str
    reason: str

    def __str__(self) -> str:
        return f"{self.name}: {self.reason}"


@functools.cache
def _importable(modules: tuple[str, ...]) -> bool:
    """Whether every module can be imported (asked once per process: finding a module's spec
    costs about 0.1 ms, which added up in the many small passes of a bandwidth search)."""
    from importlib.util import find_spec

    return all(find_spec(mod) is not None for mod in modules)


def available() -> list[str]:
    """Names of the backends whose dependencies are installed.

    Examples
    --------
    >>> from nadaraya.backends import available
    >>> available()[0]
    'reference'
    """
    return [name for name, (module, _, needs) in _REGISTRY.items() if _importable((module, *needs))]


def get(name: str) -> Backend:
    """Import a backend's module by name.

    Raises
    ------
    ValueError
        For an unknown name (the message lists the valid ones).
    ImportError
        When the backend's dependencies are missing (the message names the extra).

    Examples
    --------
    >>> from nadaraya.backends import get
    >>> get("reference").__name__
    'nadaraya.backends.reference'
    """
    if name not in _REGISTRY:
        raise ValueError(f"backend={name!r} is not known; valid names are: {', '.join(NAMES)}")
    module, extra, needs = _REGISTRY[name]
    if not _importable((module,)):
        raise ImportError(f"backend={name!r} is not built in this version of nadaraya")
    if not _importable(needs):
        raise ImportError(
            f"backend={name!r} needs {', '.join(needs)}; install it with `pip install nadaraya[{extra}]`"
        )
    return cast(Backend, importlib.import_module(module))


@runtime_checkable
class Backend(Protocol):
    """What a backend module provides (each module under ``nadaraya.backends`` in the registry).

    Examples
    --------
    >>> from nadaraya import backends
    >>> isinstance(backends.get("reference"), backends.Backend)
    True
    """

    def supports(self, kernel: Kernel, d: int) -> bool:
        """Whether the backend computes ``kernel`` in ``d`` features."""

    def partials(
        self,
        queries: NDArray[np.floating],
        keys: NDArray[np.floating],
        values: NDArray[np.floating],
        *,
        kernel: Kernel,
        bandwidth: NDArray[np.floating],
        sample_weight: NDArray[np.floating] | None = None,
        exclude: NDArray[np.integer] | None = None,
        moments: int = 0,
    ) -> Partials:
        """The partial sums of validated arrays (see ``nadaraya.backends.reference.partials``)."""


