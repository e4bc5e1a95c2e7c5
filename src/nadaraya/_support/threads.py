"""numba's thread pool, set up at first use so that it shares the cores with torch's.

The problem: after numba's parallel loops ran, torch's own thread pool in the same process
became very slow (measured on 2 cores: ``torch.exp`` of 200 000 floats 29x slower after a
fused pool with numba's ``workqueue`` layer; the issue reports 1000x). Two pools of busy
threads fight for the cores: OpenMP runtimes spin-wait after each parallel region
(``OMP_WAIT_POLICY`` unset means "spin for a while"), and numba's workqueue keeps its workers
polling. torch ships its own ``libgomp``; numba's ``omp`` layer loads the system's, so each
pool has its own runtime and neither yields to the other while spinning.

The fix, applied once before numba's first parallel launch, each part only where the user has
not chosen already (their environment variables win):

- ``NUMBA_THREADING_LAYER``: ``omp`` when numba's OpenMP pool can load (it is also safe when
  several Python threads call in at once, which ``workqueue`` is not), else ``tbb``, else
  ``workqueue``;
- ``OMP_WAIT_POLICY=PASSIVE``: idle OpenMP workers sleep instead of spinning. It is read when
  an OpenMP runtime starts, so it reaches numba's runtime (started at the first fused call)
  and torch's if torch is imported afterwards.

tests/core/test_threads.py checks, in a fresh process, which threading layer and wait policy were
picked, that the fused loops run on nadaraya's own pool and leave torch's untouched, with one
coarse 10x guard on time.

:func:`one_blas_thread` holds BLAS to one thread where an optimiser does linear algebra on a
few numbers (L-BFGS-B's ``setulb`` calls OpenBLAS on vectors of length d): OpenBLAS's threads
there only wake, spin and fight numba's passes and other processes for the cores (measured on 2
shared cores: 3-7 ms per ``setulb`` call with two BLAS threads, a few microseconds with one).

Examples
--------
>>> from nadaraya._support import threads as _threads
>>> _threads.configure()
>>> _threads.configure()  # idempotent
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from typing import Any

__all__ = ["configure", "one_blas_thread", "threading_layer"]

_lock = threading.Lock()
_done = False
_controller: list[Any] = []  # threadpoolctl's controller, made once (inspecting the libraries costs ms)
_blas_limit: list[Any] = []  # the limiter of the main thread's open blocks of one_blas_thread
_blas_depth = [0]  # how many of them are open (nested)


def _pick_layer() -> str:
    """The first of omp, tbb, workqueue whose numba pool module loads here."""
    import importlib

    for layer, module in (("omp", "omppool"), ("tbb", "tbbpool"), ("workqueue", "workqueue")):
        try:
            importlib.import_module(f"numba.np.ufunc.{module}")
        except (ImportError, OSError):
            continue
        return layer
    return "workqueue"


def configure() -> None:
    """Choose numba's threading layer and OpenMP's wait policy, once, before the first launch.

    Does nothing after the first call, nor for settings the user made in the environment.

    Examples
    --------
    >>> from nadaraya._support.threads import configure
    >>> configure()
    """
    global _done
    if _done:
        return
    with _lock:
        if _done:
            return
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        import numba

        if "NUMBA_THREADING_LAYER" not in os.environ and numba.config.THREADING_LAYER == "default":
            numba.config.THREADING_LAYER = _pick_layer()
        _done = True


def threading_layer() -> str:
    """The threading layer numba uses (``"unstarted"`` before its first parallel loop).

    Examples
    --------
    >>> threading_layer() in ("omp", "tbb", "workqueue", "unstarted")
    True
    """
    import numba

    try:
        return str(numba.threading_layer())
    except ValueError:
        return "unstarted"


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """Run the enclosed block with BLAS (OpenBLAS, MKL, BLIS) limited to one thread.

    In the main thread only: OpenBLAS ignores a new thread count set from another thread, so
    there the block runs as it would without it (and can never leave the process limited).

    The libraries are inspected once, at the first call, after SciPy's linear algebra is loaded
    (it brings its own OpenBLAS); entering the block afterwards costs microseconds, where
    ``threadpoolctl.threadpool_limits`` inspects them again each time (milliseconds).

    Examples
    --------
    >>> from threadpoolctl import threadpool_info
    >>> with one_blas_thread():
    ...     all(i["num_threads"] == 1 for i in threadpool_info() if i["user_api"] == "blas")
    True
    """
    if not _controller:
        import scipy.linalg  # noqa: F401  (loads SciPy's OpenBLAS, which the controller must see)
        from threadpoolctl import ThreadpoolController

        with _lock:
            if not _controller:
                _controller.append(ThreadpoolController())
    if threading.current_thread() is not threading.main_thread():
        yield  # OpenBLAS takes a new thread count from the main thread only: nothing to set here
        return
    if not _blas_depth[0]:  # nested blocks: the outermost one sets the limit and restores it
        _blas_limit.append(_controller[0].limit(limits=1, user_api="blas"))
    _blas_depth[0] += 1
    try:
        yield
    finally:
        _blas_depth[0] -= 1
        if not _blas_depth[0]:
            _blas_limit.pop().restore_original_limits()
