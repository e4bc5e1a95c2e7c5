"""Shared test set-up: hypothesis profiles (deterministic in CI) and seeded global random state.

Profiles, chosen with the environment variable ``HYPOTHESIS_PROFILE``:

- ``ci`` (the default, and what CI runs with ``CI=true``): derandomised, so every run draws the
  same examples; no example database (nothing carried between runs); no deadline (a shared
  machine's timing must not fail a test); a fixed number of examples; a failing example is
  printed with its reproduction blob.
- ``dev``: random examples, saved to the local database so that a failure found once is replayed
  first, and more of them: ``HYPOTHESIS_PROFILE=dev pytest tests/core/test_pooling.py``.

Tests may still set ``max_examples`` themselves (to keep a slow property affordable).
"""

from __future__ import annotations

import contextlib
import os
import random
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.database import DirectoryBasedExampleDatabase

#: the tests are filed by wing (tests/core, tests/local, ... tests/house); the shared helpers
#: (naive.py, _search_cases.py, this file) stay here, and a wing's test may read another's oracle
#: (``from test_local import local_fit``): every folder is on the path
_HERE = Path(__file__).resolve().parent
for _folder in [_HERE, *sorted(p for p in _HERE.iterdir() if p.is_dir() and p.name.isidentifier())]:
    if str(_folder) not in sys.path:
        sys.path.insert(0, str(_folder))

_SLOW = [HealthCheck.too_slow]

settings.register_profile(
    "ci",
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=100,
    print_blob=True,
    suppress_health_check=_SLOW,
)
settings.register_profile(
    "dev",
    derandomize=False,
    database=DirectoryBasedExampleDatabase(".hypothesis/examples"),
    deadline=None,
    max_examples=500,
    print_blob=True,
    suppress_health_check=_SLOW,
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or "ci")


#: test files that each hold a long test (the documentation site with its gallery, the benchmark
#: scripts' smoke runs, the capability table's every cell): collected first, so that under
#: ``make test``'s two pytest-xdist workers they start early rather than leave one worker running
#: alone at the end
_LONG_FIRST = (
    "tests/shell/test_docs.py",
    "tests/shell/test_benchmarks.py",
    "tests/house/test_house_shell.py",
    "tests/backends/test_capabilities.py",
    "tests/backends/test_moments_windowed.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The files of :data:`_LONG_FIRST` first, in that order; every other test keeps its place."""

    def rank(item: pytest.Item) -> int:
        path = item.nodeid.split("::", 1)[0]
        return _LONG_FIRST.index(path) if path in _LONG_FIRST else len(_LONG_FIRST)

    items.sort(key=rank)  # stable: the order within each file and among the rest is kept


@pytest.fixture(autouse=True)
def _seeded_global_random_state() -> None:
    """The legacy global generators (``random``, ``np.random.*``) start each test from the same
    state, so that any code that draws from them (ours or a library's) is repeatable. Tests
    draw their own data from ``np.random.default_rng(seed)``."""
    random.seed(0)
    np.random.seed(0)  # noqa: NPY002 - seeding the legacy global state is the point


CHROMIUM = Path("/usr/bin/chromium")


@contextlib.contextmanager
def offline_tab() -> Iterator[tuple[Any, list[str], list[str]]]:
    """A headless Chromium tab, with the console errors and page errors it meets and every
    request that is not to a local file or a data URL; skips the test, saying why, where
    Chromium or playwright is missing."""
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is missing (install Debian's chromium: apt-get install -y chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    errors: list[str] = []
    requests: list[str] = []
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=str(CHROMIUM),
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"],
        )
        try:
            tab = browser.new_page()
            tab.on("console", lambda m: errors.append(f"{m.type}: {m.text}") if m.type == "error" else None)
            tab.on("pageerror", lambda e: errors.append(str(e)))
            local = ("file://", "data:")
            tab.on("request", lambda r: None if r.url.startswith(local) else requests.append(r.url))
            yield tab, errors, requests
        finally:
            browser.close()
