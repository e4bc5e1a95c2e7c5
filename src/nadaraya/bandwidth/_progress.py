"""Progress reports of bandwidth searches: the callback type and the block that sets it."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator

__all__ = ["Progress", "reporting"]

#: ``progress(stage, n_evaluated, n_passes)``: called after each bandwidth a search evaluates
Progress = Callable[[str, int, int], None]
_PROGRESS: contextvars.ContextVar[Progress | None] = contextvars.ContextVar("nadaraya_progress", default=None)


@contextlib.contextmanager
def reporting(progress: Progress) -> Iterator[None]:
    """Report the steps of every bandwidth search run in the block to ``progress``.

    For a shell that shows progress of a search it does not call itself, such as the one
    ``NadarayaWatson(bandwidth="cv").fit`` runs; :func:`select_bandwidth` also takes
    ``progress=`` directly.

    Parameters
    ----------
    progress : callable
        Called as ``progress(stage, n_evaluated, n_passes)`` after each bandwidth evaluated:
        ``stage`` is ``"grid"``, ``"refine"`` or ``"per_feature"``, ``n_evaluated`` the
        bandwidths evaluated so far, ``n_passes`` the passes over the pairs so far.

    Examples
    --------
    >>> import numpy as np
    >>> from nadaraya import NadarayaWatson
    >>> from nadaraya.bandwidth.search import reporting
    >>> stages = set()
    >>> x = np.linspace(0, 5, 40)[:, None]
    >>> y = np.sin(x[:, 0]) + np.random.default_rng(0).normal(0, 0.3, 40)
    >>> with reporting(lambda stage, k, passes: stages.add(stage)):
    ...     _ = NadarayaWatson().fit(x, y)
    >>> sorted(stages)
    ['grid', 'refine']
    """
    token = _PROGRESS.set(progress)
    try:
        yield
    finally:
        _PROGRESS.reset(token)
