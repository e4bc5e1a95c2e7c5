"""The mixed CV's gradient pass counts every pass it makes: a spy on the compiled passes against
``n_passes``, for :meth:`LocalObjective.value_grad` called directly (no search before it)."""

from __future__ import annotations

import numpy as np
import pytest


def _objective(n: int = 90, seed: int = 11):
    from nadaraya.bandwidth.local import LocalObjective
    from nadaraya.kernels import get

    rng = np.random.default_rng(seed)
    X = np.column_stack([rng.uniform(0, 5, n), rng.integers(0, 3, n), rng.integers(0, 4, n)]).astype(float)
    y = np.sin(X[:, 0]) + 0.3 * X[:, 2] + rng.normal(0, 0.3, n)
    return LocalObjective(X, y[:, None], None, get("gaussian"), "cv", "auto", var_types="cuo")


@pytest.fixture
def passes(monkeypatch):
    """The compiled passes made, by name: each pass's range that starts at point 0 (below the
    work threshold a pass is one range)."""
    import nadaraya.bandwidth._mixed_pass as mp_

    made: list[str] = []
    for name in ("_loo", "_loo_grad"):
        compiled = getattr(mp_, name)

        def task(*args, compiled=compiled, name=name):
            if int(args[8]) == 0:  # a0, the range's first point, in both signatures
                made.append(name)
            return compiled(*args)

        monkeypatch.setattr(mp_, name, task)
    return made


def test_value_grad_first_call_makes_one_pass(passes):
    obj = _objective()
    assert obj.has_gradient
    value, grad = obj.value_grad(np.array([0.5, 0.3, 0.4]))
    assert passes == ["_loo_grad"]
    assert obj.n_passes == 1
    assert np.isfinite(value) and np.all(np.isfinite(grad))


def test_value_grad_with_a_forward_difference_counts_both(passes):
    """At lambda = 0 of the unordered column its entry is a forward difference: one more pass,
    of the value, counted."""
    obj = _objective()
    obj.value_grad(np.array([0.5, 0.0, 0.4]))
    assert passes == ["_loo_grad", "_loo"]
    assert obj.n_passes == 2


def test_passes_counted_across_calls(passes):
    """Values and gradients in any order: the count reported equals the passes made, and the
    value from the gradient's pass equals the value's."""
    obj = _objective()
    h = np.array([0.5, 0.3, 0.4])
    first, _ = obj.value_grad(h)
    again = obj.at(h)
    obj.value_grad(h * 1.1)
    assert first == pytest.approx(again, rel=1e-13)
    assert passes == ["_loo_grad", "_loo", "_loo_grad"]
    assert obj.n_passes == len(passes) == len(obj.scores)
