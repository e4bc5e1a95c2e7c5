"""The capabilities table says what each backend serves, and ``auto`` ranks by its cost model."""

from __future__ import annotations

import math

import numpy as np
import pytest

from nadaraya import backends
from nadaraya.backends import CAPABILITIES, cost, why_not
from nadaraya.kernels import get as get_kernel
from nadaraya.kernels import names as kernel_names

KERNELS = ("gaussian", "epanechnikov", "tricube", "laplacian", "logistic")
EXACT = [name for name in ("reference", "fused", "windowed", "laplace", "truncated", "torch")
         if name in backends.available()]


def test_one_entry_per_registered_backend() -> None:
    assert set(CAPABILITIES) == set(backends.NAMES) - {"auto"}


@pytest.mark.parametrize("name", [n for n in CAPABILITIES if n in backends.available()])
def test_the_table_agrees_with_each_backends_own_supports(name: str) -> None:
    """Every kernel in 1 to 5 features: the module's own ``supports`` says what the table says."""
    module = backends.get(name)
    for kernel in kernel_names():
        for d in range(1, 6):
            assert module.supports(get_kernel(kernel), d) == CAPABILITIES[name].serves(kernel, d), (kernel, d)


def _unshifted(parts: backends.Partials) -> list[np.ndarray]:
    """The sums themselves (weight, values, moments) with the log shift undone, per query."""
    scale = np.exp(np.asarray(parts.shift, dtype=np.float64))
    out = [np.asarray(parts.weight) * scale, np.asarray(parts.value) * scale[:, None]]
    for mom in parts.moments:
        out.append(np.asarray(mom, dtype=np.float64) * scale.reshape((-1,) + (1,) * (mom.ndim - 1)))
    return out


def _data(d: int, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    keys = rng.uniform(0, 1, (40, d))
    queries = np.vstack([keys[:4], rng.uniform(0, 1, (3, d))])
    values = np.column_stack([np.sin(4 * keys[:, 0]), keys.sum(axis=1)])
    return queries, keys, values, rng.uniform(0.5, 2.0, 40)


@pytest.mark.parametrize("name", EXACT)
@pytest.mark.parametrize("d", [1, 2])
def test_what_the_table_serves_is_computed_and_the_rest_refused(name: str, d: int) -> None:
    """Each cell (kernel x degree x leave-one-out, with sample weights) the table serves gives the
    reference backend's sums to 1e-10; each it does not serve is refused by ``compute`` with a
    message that names the backend and says why."""
    rng = np.random.default_rng(d)
    queries, keys, values, sw = _data(d, rng)
    h = np.full(d, 0.35)
    for kernel in KERNELS:
        k = get_kernel(kernel)
        for degree in (0, 1, 2):
            for loo in (False, True):
                exclude = np.array([0, 1, 2, 3, -1, -1, -1]) if loo else None
                kw = dict(kernel=k, bandwidth=h, sample_weight=sw, exclude=exclude, moments=degree)
                why = why_not(name, k, d=d, degree=degree, loo=loo)
                if why is not None:
                    with pytest.raises(ValueError, match=f"backend='{name}'"):
                        backends.compute(name, queries, keys, values, **kw)
                    continue
                got = _unshifted(backends.compute(name, queries, keys, values, **kw))
                ref = _unshifted(backends.compute("reference", queries, keys, values, **kw))
                for a, b in zip(got, ref, strict=True):
                    np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12 * np.abs(b).max(),
                                               err_msg=f"{name} {kernel} d={d} degree={degree} loo={loo}")


def test_within_tol_backends_refuse_exact_calls_and_say_so() -> None:
    x = np.linspace(0, 1, 30)[:, None]
    for name in ("taylor", "binned"):
        with pytest.raises(ValueError, match="tol=None asks for exact sums"):
            backends.compute(name, x, x, x, kernel=get_kernel("gaussian"), bandwidth=np.ones(1))
    with pytest.raises(ValueError, match="without leave-one-out"):
        backends.compute("binned", x, x, x, kernel=get_kernel("gaussian"), bandwidth=np.ones(1),
                         exclude=np.arange(30), tol=1e-6)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("d", [1, 2, 3])
@pytest.mark.parametrize("degree", [0, 1, 2])
@pytest.mark.parametrize("size", [800, 20_000, 300_000])
def test_auto_takes_the_cheapest_backend_that_serves_the_call(kernel: str, d: int, degree: int,
                                                               size: int) -> None:
    """``auto`` (from the sizes) is the argmin of the cost model over the backends that serve the call."""
    k = get_kernel(kernel)
    choice = backends.choose(k, n=size, m=size, d=d, moments=degree)
    if size * size < backends.SMALL_PAIRS:
        assert choice.name == "reference"
        return
    costs = {name: cost(name, k, n=size, m=size, d=d, degree=degree)
             for name in ("reference", "fused", "windowed", "laplace") if name in backends.available()}
    assert math.isfinite(costs[choice.name])
    assert costs[choice.name] == min(costs.values()), (choice, costs)
    assert why_not(choice.name, k, d=d, degree=degree) is None


def test_auto_gives_the_laplacian_to_its_running_sums() -> None:
    """The Laplacian in 1-D goes to ``laplace`` (the cost model ranks it far below the fused loop),
    for local fits and leave-one-out too, and the answer is the reference's."""
    rng = np.random.default_rng(1)
    x = np.sort(rng.uniform(0, 10, 1000))[:, None]
    y = np.sin(x[:, 0])
    k = get_kernel("laplacian")
    for degree in (0, 1, 2):
        assert backends.choose(k, n=10**5, m=10**5, d=1, moments=degree).name == "laplace"
    from nadaraya._core.call import compute_partials, prepare

    call = prepare(x, x, y, kernel="laplacian", bandwidth=0.3)
    parts, choice = compute_partials(call, exclude=np.arange(1000))
    assert choice.name == "laplace"
    ref, _ = compute_partials(call, exclude=np.arange(1000), backend="reference")
    np.testing.assert_allclose(parts.finalize(), ref.finalize(), rtol=1e-12)


def test_explain_prints_the_table_and_the_ranking() -> None:
    text = backends.table()
    for name in CAPABILITIES:
        assert f"\n{name} " in text
    said = backends.explain("laplacian", n=10**5, m=10**5)
    assert said.startswith("laplace:") and "fused" in said


def test_named_backend_that_cannot_serve_says_why() -> None:
    said = r"backend='laplace' does not support kernel='gaussian' with d=1: it computes the 'laplacian'"
    with pytest.raises(ValueError, match=said):
        backends.choose(get_kernel("gaussian"), n=10, m=10, d=1, backend="laplace")
    with pytest.raises(ValueError, match=r"degree \(moments\) up to 0 in d=2"):
        backends.choose(get_kernel("gaussian"), n=10, m=10, d=2, backend="binned", moments=1)
