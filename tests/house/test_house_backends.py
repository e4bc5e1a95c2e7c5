"""The backend door: every registered backend provides what the Backend protocol names."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from nadaraya import backends
from nadaraya.kernels import get as kernel


@pytest.mark.parametrize("name", backends.available())
def test_every_available_backend_is_a_backend(name):
    module = backends.get(name)
    assert isinstance(module, backends.Backend)
    assert module.supports(kernel("gaussian"), 1) in (True, False)
    wanted = inspect.signature(backends.Backend.partials).parameters
    got = inspect.signature(module.partials).parameters
    for arg in ("kernel", "bandwidth", "sample_weight", "exclude"):
        assert got[arg].kind is inspect.Parameter.KEYWORD_ONLY, (name, arg)
    assert [a for a in wanted if a != "self"][:3] == list(got)[:3]


def test_the_reference_backend_supports_everything_and_choose_asks_it():
    ref = backends.get("reference")
    assert all(ref.supports(kernel(k), d) for k in ("gaussian", "tricube", "constant") for d in (1, 9))
    assert backends.choose(kernel("tricube"), n=10, m=10, d=9, backend="reference").name == "reference"
    x = np.arange(4.0)[:, None]
    p = backends.compute("reference", x, x, x, kernel=kernel("boxcar"), bandwidth=np.ones(1))
    assert p.finalize()[:, 0].tolist() == [0.5, 1.0, 2.0, 2.5]


def test_choose_has_no_dead_bandwidth_parameter():
    assert "bandwidth" not in inspect.signature(backends.choose).parameters
    with pytest.raises(TypeError):
        backends.choose(kernel("gaussian"), n=1, m=1, d=1, bandwidth=np.ones(1))  # type: ignore[call-arg]
