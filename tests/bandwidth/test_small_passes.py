"""Small bandwidth searches: the mixed leave-one-out pass against brute force, and that a small
search runs serially (one range on the calling thread, BLAS on one thread)."""

from __future__ import annotations

import threading
import warnings

import numpy as np
import pytest

from nadaraya.bandwidth import BandwidthWarning, select_bandwidth


def _brute(xc, h, lsw, group, table, Y, degree):
    """Every point's sums over the others, written out: log weights, their maximum, the sums."""
    n, dc = xc.shape
    p = Y.shape[1]
    shift, weight, value = np.empty(n), np.empty(n), np.empty((n, p))
    s1, s2, t1 = np.zeros((n, dc)), np.zeros((n, dc, dc)), np.zeros((n, dc, p))
    for i in range(n):
        others = np.arange(n) != i
        u = xc[others] - xc[i]
        lw = lsw[others] + table[group[i], group[others]] - 0.5 * (((u / h) ** 2).sum(axis=1))
        top = lw.max()
        shift[i] = top
        w = np.exp(lw - (top if np.isfinite(top) else 0.0))
        weight[i] = w.sum()
        value[i] = w @ Y[others]
        if degree:
            s1[i] = w @ u
            s2[i] = (w[:, None] * u).T @ u
            t1[i] = (w[:, None] * u).T @ Y[others]
    return shift, weight, value, s1, s2, t1


@pytest.mark.parametrize("dc,p,degree", [(1, 1, 0), (1, 1, 1), (2, 1, 0), (2, 1, 1), (1, 2, 1), (3, 2, 0)])
def test_mixed_loo_against_brute_force(dc, p, degree):
    from nadaraya.bandwidth._mixed_pass import mixed_loo

    rng = np.random.default_rng(dc * 10 + p + degree)
    n, G = 70, 4
    xc = rng.uniform(0, 1, (n, dc))
    xc[5] = xc[6]  # a duplicate point: its twin weighs 1 relative to itself, not its own term
    Y = rng.normal(size=(n, p))
    group = rng.integers(0, G, n)
    table = np.log(rng.uniform(0.05, 1, (G, G)))
    table[1, 2] = -np.inf  # a categorical factor of 0
    lsw = np.log(rng.uniform(0.2, 3.0, n))
    h = rng.uniform(0.1, 0.4, dc)
    got = mixed_loo(xc, h, lsw, group, table, Y, degree)
    want = _brute(xc, h, lsw, group, table, Y, degree)
    _check(got, want, degree)


def _check(got, want, degree):
    """Each point's sums within 1e-12 of the largest sum of its kind for that point (under the
    same shift: the shifts, the largest log weight, agree to rounding)."""
    n = got.weight.shape[0]
    np.testing.assert_allclose(got.shift, want[0], rtol=1e-15, atol=1e-14)
    assert np.all(np.isfinite(got.shift))
    rescale = np.exp(got.shift - want[0])  # 1 to rounding
    for a, b in zip((got.weight, got.value, *got.moments), want[1:] if degree else want[1:3], strict=True):
        a = a * rescale.reshape((n,) + (1,) * (a.ndim - 1))
        # every entry against the largest sum of its kind for its point
        scale = np.abs(b).reshape(n, -1).max(axis=1).reshape((n,) + (1,) * (b.ndim - 1))
        err = np.abs(a - b) / np.maximum(scale, 1e-300)
        assert np.all(err <= 1e-12), float(err.max())


def test_mixed_loo_far_points_and_one_group():
    """Keys far from 0 with a small bandwidth (every other point's weight flushes under the
    largest), a point alone in its group, and two points only."""
    from nadaraya.bandwidth._mixed_pass import mixed_loo

    rng = np.random.default_rng(3)
    xc = 1e6 + rng.uniform(0, 1, (40, 1))
    Y = rng.normal(size=(40, 1))
    group = np.zeros(40, dtype=np.intp)
    group[7] = 1
    table = np.log(np.array([[1.0, 0.2], [0.2, 1.0]]))
    got = mixed_loo(xc, np.array([1e-3]), np.zeros(40), group, table, Y, 1)
    want = _brute(xc, np.array([1e-3]), np.zeros(40), group, table, Y, 1)
    _check(got, want, 1)
    two = mixed_loo(np.array([[0.0], [1.0]]), np.ones(1), np.zeros(2), np.zeros(2, np.intp), np.zeros((1, 1)),
                    np.array([[1.0], [3.0]]), 1)
    assert two.finalize()[:, 0].tolist() == [3.0, 1.0]  # each point's only neighbour


def test_small_mixed_search_runs_serially(monkeypatch):
    """Below the work threshold each pass is one range on the calling thread, and the search's
    BLAS calls (L-BFGS-B, the small solves) see one BLAS thread."""
    from threadpoolctl import threadpool_info

    import nadaraya.bandwidth._mixed_pass as mp_
    import nadaraya.bandwidth.local as local

    calls: list[tuple[int, int, int]] = []

    def spy(name, at):
        compiled = getattr(mp_, name)

        def task(*args):
            calls.append((threading.get_ident(), int(args[at]), int(args[at + 1])))
            return compiled(*args)

        monkeypatch.setattr(mp_, name, task)

    spy("_loo", 8)
    spy("_loo_grad", 8)  # the gradient's pass, which L-BFGS-B takes
    blas: set[tuple[int, ...]] = set()
    at = local.LocalObjective.at

    def at_spy(self, *a, **k):
        blas.add(tuple(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"))
        return at(self, *a, **k)

    monkeypatch.setattr(local.LocalObjective, "at", at_spy)
    rng = np.random.default_rng(4)
    n = 60
    X = np.column_stack([rng.uniform(0, 5, n), rng.integers(0, 3, n), rng.integers(0, 4, n)]).astype(float)
    y = np.sin(X[:, 0]) + 0.3 * X[:, 2] + rng.normal(0, 0.3, n)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BandwidthWarning)
        res = select_bandwidth(X, y, var_types="cou")
    assert len(calls) == res.n_passes > 10
    assert {c[0] for c in calls} == {threading.get_ident()}
    assert {c[1:] for c in calls} == {(0, n)}
    assert blas <= {(1,) * len(next(iter(blas)))}


def _blas_threads():
    import scipy.linalg  # noqa: F401  (its OpenBLAS, which one_blas_thread loads, counts from the start)
    from threadpoolctl import threadpool_info

    return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]


def test_one_blas_thread_restores_the_limits():
    from threadpoolctl import threadpool_limits

    from nadaraya._support.threads import one_blas_thread

    with threadpool_limits(2, user_api="blas"):  # so that the limit shows, whatever the environment
        before = _blas_threads()
        assert before and all(t == 2 for t in before)
        with one_blas_thread():
            assert all(t == 1 for t in _blas_threads())
        assert _blas_threads() == before


def test_one_blas_thread_nests_and_leaves_other_threads_alone():
    """Nested blocks restore the count once, at the outermost; a worker thread's block (where
    OpenBLAS would not take a new count) changes nothing, even while it outlives the main
    thread's block."""
    from threadpoolctl import threadpool_limits

    from nadaraya._support.threads import one_blas_thread

    inside, main_left = threading.Event(), threading.Event()
    seen = {}

    def worker():
        with one_blas_thread():
            seen["worker inside"] = _blas_threads()
            inside.set()
            main_left.wait(10)
            seen["after the main thread left"] = _blas_threads()

    with threadpool_limits(2, user_api="blas"):
        before = _blas_threads()
        thread = threading.Thread(target=worker)
        with one_blas_thread():
            with one_blas_thread():
                assert all(t == 1 for t in _blas_threads())
            assert all(t == 1 for t in _blas_threads())
            thread.start()
            assert inside.wait(10)
        main_left.set()
        thread.join(20)
        assert seen["worker inside"] == [1] * len(before)
        assert seen["after the main thread left"] == before
        assert _blas_threads() == before


# --- the gradient's pass of the mixed CV (local constant, Gaussian) ------------------------------


def _objective(var_types, ck, n=120, seed=5, p=2):
    from nadaraya.bandwidth.local import LocalObjective
    from nadaraya.kernels import get

    rng = np.random.default_rng(seed)
    cols = {"c": rng.uniform(0, 5, n), "u": rng.integers(0, 4, n), "o": rng.integers(0, 5, n)}
    X = np.column_stack([cols[t] for t in var_types]).astype(float)
    y = np.sin(cols["c"]) + 0.5 * (cols["u"] == 2) + 0.2 * cols["o"] + rng.normal(0, 0.3, n)
    Y = np.column_stack([y, y**2][:p])
    sw = rng.uniform(0.5, 2.0, n)
    return LocalObjective(X, Y, sw, get("gaussian"), "cv", "auto", var_types=var_types, categorical_kernel=ck)


def _central(obj, h, j, cont, e=1e-6):
    hp, hm = h.copy(), h.copy()
    if cont:
        hp[j], hm[j] = h[j] * np.exp(e), h[j] * np.exp(-e)
    else:
        hp[j], hm[j] = h[j] + e, h[j] - e
    return (obj.at(hp) - obj.at(hm)) / (2 * e)


@pytest.mark.parametrize("var_types,ck", [("cuo", "classic"), ("cuo", "li-racine"), ("ouc", "classic"),
                                          ("ccu", "classic")])
def test_cv_gradient_against_central_differences(var_types, ck):
    """The gradient along log h (continuous) and lambda (categorical), sample weights and two
    value columns, against central differences of the exact criterion; the value is the
    criterion's."""
    obj = _objective(var_types, ck)
    assert obj.has_gradient
    h = np.array([0.4 if t == "c" else 0.3 for t in var_types])
    value, grad = obj.value_grad(h)
    assert value == pytest.approx(obj.at(h), rel=1e-13)
    for j, t in enumerate(var_types):
        assert grad[j] == pytest.approx(_central(obj, h, j, t == "c"), rel=1e-6, abs=1e-9)


def test_cv_gradient_at_lambda_zero_takes_a_forward_difference():
    """At lambda = 0 an unordered column's factor lambda / (c - 1) has no finite log
    derivative: that entry is a forward difference, the others stay analytic."""
    obj = _objective("cuo", "classic", p=1)
    h = np.array([0.4, 0.0, 0.3])
    passes = obj.n_passes
    value, grad = obj.value_grad(h)
    assert obj.n_passes == passes + 2  # the gradient's pass and one difference
    e = 1e-7
    forward = (obj.at(np.array([0.4, e, 0.3])) - value) / e
    assert grad[1] == pytest.approx(forward, rel=1e-3)
    assert grad[0] == pytest.approx(_central(obj, h, 0, True), rel=1e-6)
    assert grad[2] == pytest.approx(_central(obj, h, 2, False), rel=1e-6)


def test_gradient_pass_sums_against_brute_force():
    """mixed_loo_grad: the partials of mixed_loo, and its derivative sums written out."""
    from nadaraya.bandwidth._mixed_pass import mixed_loo, mixed_loo_grad

    rng = np.random.default_rng(8)
    n, G, dc, p, C = 60, 3, 2, 2, 2
    group = rng.integers(0, G, n)
    xc, Y = rng.uniform(0, 1, (n, dc)), rng.normal(size=(n, p))
    lsw = np.log(rng.uniform(0.5, 2.0, n))
    table = np.log(rng.uniform(0.1, 1.0, (G, G)))
    dtab = rng.normal(size=(C, G, G))
    h = np.array([0.2, 0.3])
    parts, A, B, E, EY = mixed_loo_grad(xc, h, lsw, group, table, dtab, Y)
    plain = mixed_loo(xc, h, lsw, group, table, Y, 0)
    np.testing.assert_allclose(parts.shift, plain.shift, rtol=1e-15, atol=1e-15)
    np.testing.assert_allclose(parts.weight, plain.weight, rtol=1e-13)
    np.testing.assert_allclose(parts.value, plain.value, rtol=1e-12, atol=1e-13 * np.abs(plain.value).max())
    for i in range(n):
        others = np.arange(n) != i
        u = (xc[i] - xc[others]) / h
        w = np.exp(lsw[others] + table[group[i], group[others]] - 0.5 * (u**2).sum(axis=1) - parts.shift[i])
        wd = w[:, None] * dtab[:, group[i], group[others]].T  # (n - 1, C)
        scale = w.sum() * (1 + np.abs(Y).max()) * max(1.0, float((u**2).max()), float(np.abs(dtab).max()))
        for got, want in ((A[i], w @ u**2), (B[i], (w[:, None] * u**2).T @ Y[others]),
                          (E[i], w @ dtab[:, group[i], group[others]].T), (EY[i], wd.T @ Y[others])):
            assert np.all(np.abs(got - want) <= 1e-13 * scale)


def test_mixed_search_with_the_gradient_no_worse_than_with_differences(monkeypatch):
    """The search on the gradient's pass ends where the same search on finite differences ends,
    to a relative 1e-5 of the CV or lower (the two optimiser paths differ with the platform's
    rounding; near the minimum the CV is flat, so both paths' ends agree far closer than that:
    to 1e-14 here), below the coarse grid's best, and within a stated number of passes: the
    grid's 27 and at most 69 more (37 here; finite differences take 98 more). A gradient
    set to zero or of the wrong sign ends 0.7-2 % higher on these data."""
    import nadaraya.bandwidth.local as local

    rng = np.random.default_rng(9)
    n = 150
    X = np.column_stack([rng.uniform(0, 5, n), rng.integers(0, 4, n), rng.integers(0, 5, n)]).astype(float)
    y = np.sin(X[:, 0]) + 0.5 * (X[:, 1] == 2) + 0.2 * X[:, 2] + rng.normal(0, 0.3, n)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BandwidthWarning)
        fast = select_bandwidth(X, y, var_types="cuo")
        monkeypatch.setattr(local.LocalObjective, "has_gradient", property(lambda self: False))
        slow = select_bandwidth(X, y, var_types="cuo")
    assert fast.score <= slow.score * (1 + 1e-5)
    stages, scores = fast.search["stages"], fast.search["scores"]
    assert (stages == "grid").sum() == 27
    assert fast.score < scores[stages == "grid"].min() * (1 - 1e-3)
    assert fast.n_passes <= 27 + 69
