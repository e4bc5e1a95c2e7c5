"""Partials that carry moments: merging moment stacks over any split of the keys is exact.

The reference here is written plainly: per query, the log weights of all keys, their maximum,
and the weighted sums ``sum w``, ``sum w v``, ``sum w (k - q)``, ``sum w (k - q)(k - q)^T`` and
``sum w (k - q) v`` computed in one go over all keys.
"""

from __future__ import annotations

import numpy as np
import pytest

from nadaraya.partials import Partials, concat, empty, merge, merge_all

SHAPES = lambda d, p: [(d,), (d, d), (d, p)]  # noqa: E731  (the local-linear stack)


def _problem(seed, batch=(), m=7, n=40, d=2, p=3, dead=True):
    """Random log weights (some -inf: keys outside a window; one query with no key at all)."""
    rng = np.random.default_rng(seed)
    q = rng.normal(size=(*batch, m, d))
    k = rng.normal(size=(*batch, n, d))
    v = rng.normal(size=(*batch, n, p))
    lw = rng.normal(scale=30.0, size=(*batch, m, n))  # spread: exp(lw) alone would over/underflow
    if dead:
        lw[rng.uniform(size=lw.shape) < 0.3] = -np.inf
        lw[..., 0, :] = -np.inf  # query 0 sees no key
    return q, k, v, lw


def _sums(q, k, v, lw, shift):
    """The plain sums of keys ``k`` under the given per-query shift (shape (..., m))."""
    w = np.exp(lw - np.where(np.isfinite(shift), shift, 0.0)[..., None])  # (..., m, n)
    u = k[..., None, :, :] - q[..., :, None, :]  # (..., m, n, d)
    return (
        w.sum(-1),
        np.einsum("...mn,...np->...mp", w, v),
        (
            np.einsum("...mn,...mnd->...md", w, u),
            np.einsum("...mn,...mnd,...mne->...mde", w, u, u),
            np.einsum("...mn,...mnd,...np->...mdp", w, u, v),
        ),
    )


def _partials(q, k, v, lw):
    """Partials of the keys given, with the shift at their running maximum."""
    shift = lw.max(-1) if lw.shape[-1] else np.full(lw.shape[:-1], -np.inf)
    weight, value, moments = _sums(q, k, v, lw, shift)
    return Partials(shift, weight, value, moments)


def _split(q, k, v, lw, rng, parts):
    n = k.shape[-2]
    cuts = np.sort(rng.choice(np.arange(0, n + 1), parts - 1))  # repeats allowed: empty chunks
    order = rng.permutation(n)  # any disjoint split, not only consecutive keys
    return [
        _partials(q, k[..., idx, :], v[..., idx, :], lw[..., idx])
        for idx in np.split(order, cuts)
    ]


def _assert_same(got, want, rtol=1e-12):
    np.testing.assert_array_equal(got.shift, want.shift)
    scale = np.maximum(np.abs(want.weight), 1e-300)
    np.testing.assert_allclose(got.weight, want.weight, rtol=rtol, atol=0)
    np.testing.assert_allclose(got.value, want.value, rtol=rtol, atol=rtol * scale.max())
    assert len(got.moments) == len(want.moments)
    for a, b in zip(got.moments, want.moments):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol * np.abs(b).max())


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("batch", [(), (2,), (2, 3)])
def test_merged_moment_stacks_equal_the_moments_over_all_keys(seed, batch):
    q, k, v, lw = _problem(seed, batch)
    rng = np.random.default_rng(100 + seed)
    whole = _partials(q, k, v, lw)
    pieces = _split(q, k, v, lw, rng, parts=1 + seed % 4 + 1)
    _assert_same(merge_all(pieces), whole)
    tree = merge(merge_all(pieces[: len(pieces) // 2] or [pieces[0]]), merge_all(pieces[len(pieces) // 2:]))
    if len(pieces) > 1:  # a different order of the same exact merge
        _assert_same(tree, whole)
    assert np.isneginf(whole.shift[..., 0]).all()  # the query with no key stays empty
    assert whole.empty[..., 0].all()
    for s in merge_all(pieces).moments:
        assert not np.isnan(s).any()


def test_merged_moments_in_torch_equal_numpy():
    torch = pytest.importorskip("torch")
    q, k, v, lw = _problem(7, batch=(3,))
    pieces = _split(q, k, v, lw, np.random.default_rng(1), parts=4)
    want = _partials(q, k, v, lw)
    as_t = [
        Partials(*(torch.from_numpy(np.ascontiguousarray(f)) for f in (p.shift, p.weight, p.value)),
                 tuple(torch.from_numpy(np.ascontiguousarray(s)) for s in p.moments))
        for p in pieces
    ]
    got = merge_all(as_t, xp=torch)
    assert all(isinstance(s, torch.Tensor) for s in got.moments)
    back = Partials(got.shift.numpy(), got.weight.numpy(), got.value.numpy(),
                    tuple(s.numpy() for s in got.moments))
    _assert_same(back, want)
    both = concat([got, got], xp=torch)
    assert both.moments[1].shape == (3, 2 * q.shape[-2], 2, 2)


def test_without_moments_the_merge_is_the_degree_zero_formula_bit_for_bit():
    q, k, v, lw = _problem(3)
    a, b = (_partials(q, k[i::2], v[i::2], lw[:, i::2]) for i in (0, 1))
    a, b = (Partials(p.shift, p.weight, p.value) for p in (a, b))
    got = merge(a, b)
    assert got.moments == ()
    shift = np.maximum(a.shift, b.shift)
    with np.errstate(invalid="ignore"):
        sa = np.where(np.isfinite(a.shift), np.exp(a.shift - shift), 0.0)
        sb = np.where(np.isfinite(b.shift), np.exp(b.shift - shift), 0.0)
    np.testing.assert_array_equal(got.weight, a.weight * sa + b.weight * sb)
    np.testing.assert_array_equal(got.value, a.value * sa[:, None] + b.value * sb[:, None])


def test_empty_partials_with_moments_are_the_identity_of_merge():
    q, k, v, lw = _problem(4)
    a = _partials(q, k, v, lw)
    m, d, p = 7, 2, 3
    e = empty(m, p, moments=SHAPES(d, p))
    assert [s.shape for s in e.moments] == [(m, d), (m, d, d), (m, d, p)]
    for got in (merge(a, e), merge(e, a)):
        np.testing.assert_array_equal(got.shift, a.shift)
        for x, y in zip(got.moments, a.moments):
            np.testing.assert_array_equal(x, y)
    ee = merge(e, e)
    assert np.isneginf(ee.shift).all() and ee.empty.all()
    assert all((s == 0).all() for s in ee.moments)
    direct = empty(m, p, log_domain=False, moments=SHAPES(d, p))
    assert (direct.shift == 0).all() and len(direct.moments) == 3


def test_far_apart_shifts_rescale_moments_without_overflow():
    one = np.ones(1)
    a = Partials(np.zeros(1), one, one[:, None], (np.array([[2.0, 4.0]]),))
    b = Partials(np.array([-2000.0]), one, 5 * one[:, None], (np.array([[1e300, -1e300]]),))
    for got in (merge(a, b), merge(b, a)):
        assert got.shift.tolist() == [0.0]
        assert got.moments[0].tolist() == [[2.0, 4.0]]  # exp(-2000) * 1e300 underflows to 0 exactly
    c = Partials(np.array([-np.inf]), np.zeros(1), np.zeros((1, 1)), (np.zeros((1, 2)),))
    got = merge(c, c)
    assert np.isneginf(got.shift).all() and not np.isnan(got.moments[0]).any()


def test_getitem_and_concat_carry_the_moments_along_the_query_axis():
    for batch in ((), (2,)):
        q, k, v, lw = _problem(5, batch)
        whole = _partials(q, k, v, lw)
        blocks = [whole[0:3], whole[3:4], whole[4:]]
        assert blocks[0].moments[2].shape == (*batch, 3, 2, 3)
        _assert_same(concat(blocks), whole, rtol=0)
        picked = whole[np.array([4, 1])]
        np.testing.assert_array_equal(picked.moments[1], whole.moments[1][..., [4, 1], :, :])
        np.testing.assert_array_equal(picked.weight, whole.weight[..., [4, 1]])
    # batch dimensions: each batch element merges on its own
    q, k, v, lw = _problem(6, (4,))
    pieces = _split(q, k, v, lw, np.random.default_rng(2), parts=3)
    merged = merge_all(pieces)
    for i in range(4):
        alone = merge_all([Partials(p.shift[i], p.weight[i], p.value[i], tuple(s[i] for s in p.moments))
                           for p in pieces])
        _assert_same(Partials(merged.shift[i], merged.weight[i], merged.value[i],
                              tuple(s[i] for s in merged.moments)), alone, rtol=0)


def test_finalize_with_batch_dimensions():
    q, k, v, lw = _problem(8, (2,))
    whole = _partials(q, k, v, lw)
    out = whole.finalize()
    assert out.shape == (2, 7, 3)
    assert np.isnan(out[:, 0]).all()
    np.testing.assert_allclose(out[:, 1:], whole.value[:, 1:] / whole.weight[:, 1:, None], rtol=0)


def test_mismatched_moment_stacks_are_refused():
    one = np.ones(1)
    a = Partials(np.zeros(1), one, one[:, None], (np.ones((1, 2)),))
    b = Partials(np.zeros(1), one, one[:, None])
    with pytest.raises(ValueError, match="1 and 0 moments"):
        merge(a, b)
    with pytest.raises(ValueError, match="same stack"):
        concat([a, b])
    with pytest.raises(ValueError, match="at least one"):
        concat([])


# ------------------------------------------------- the reference backend computes a moment stack


def _plain_weights(kernel, q, k, h, sw, exclude):
    """Product-kernel weights written out directly: (m, n)."""
    w = np.prod(kernel.profile((q[:, None, :] - k[None, :, :]) / h), axis=-1) * sw
    rows = np.nonzero(exclude >= 0)[0]
    w[rows, exclude[rows]] = 0.0
    return w


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
@pytest.mark.parametrize("degree", [1, 2])
def test_reference_backend_moments_equal_the_plain_sums(kernel, degree, monkeypatch):
    from nadaraya.backends import reference
    from nadaraya.kernels import get

    rng = np.random.default_rng(11)
    n, m, d, p = 150, 12, 2, 2
    k, q = rng.uniform(0, 1, (n, d)), rng.uniform(0, 1, (m, d))
    v, sw = rng.normal(size=(n, p)), rng.uniform(0.5, 2.0, n)
    h = np.array([0.3, 0.4])
    exclude = rng.integers(-1, n, m)
    K = get(kernel)
    monkeypatch.setattr(reference, "block_sizes", lambda *a, **kw: (5, 7))  # awkward blocks, merged
    got = reference.partials(q, k, v, kernel=K, bandwidth=h, sample_weight=sw, exclude=exclude,
                             moments=degree)
    assert [s.shape[1:] for s in got.moments] == reference.moment_shapes(degree, d, p)
    w = _plain_weights(K, q, k, h, sw, exclude)
    u = k[None, :, :] - q[:, None, :]
    plain = [np.einsum("qk,qkd->qd", w, u), np.einsum("qk,qkd,qke->qde", w, u, u)]
    if degree == 2:
        plain += [np.einsum("qk,qkd,qke,qkf->qdef", w, u, u, u),
                  np.einsum("qk,qkd,qke,qkf,qkg->qdefg", w, u, u, u, u)]
    plain.append(np.einsum("qk,qkd,kp->qdp", w, u, v))
    if degree == 2:
        plain.append(np.einsum("qk,qkd,qke,kp->qdep", w, u, u, v))
    assert len(got.moments) == len(plain)
    some = w.sum(1) > 0
    assert (some == ~got.empty).all()
    for a, b in zip(got.moments, plain):  # normalised by the weight: the shift cancels
        ratio = a[some] / got.weight[some].reshape(-1, *[1] * (a.ndim - 1))
        want = b[some] / w.sum(1)[some].reshape(-1, *[1] * (b.ndim - 1))
        np.testing.assert_allclose(ratio, want, rtol=1e-10, atol=1e-13)


def test_reference_backend_without_moments_is_unchanged():
    from nadaraya.backends import reference
    from nadaraya.kernels import get

    rng = np.random.default_rng(12)
    k, q, v = rng.normal(size=(300, 3)), rng.normal(size=(40, 3)), rng.normal(size=(300, 2))
    args = dict(kernel=get("gaussian"), bandwidth=np.full(3, 0.5))
    a = reference.partials(q, k, v, **args)
    b = reference.partials(q, k, v, moments=0, **args)
    assert a.moments == () and b.moments == ()
    for f in ("shift", "weight", "value"):
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f))
    w = np.exp(-0.5 * (((q[:, None, :] - k[None]) / 0.5) ** 2).sum(-1))
    np.testing.assert_allclose(a.finalize(), w @ v / w.sum(1)[:, None], rtol=1e-12)


@pytest.mark.parametrize("bad", [-1, 1.5, True, "1"])
@pytest.mark.parametrize("name", ["reference", "fused", "truncated"])
def test_the_backend_door_refuses_a_bad_moment_degree(bad, name):
    """``backends.compute`` checks ``moments`` once for every backend (they no longer re-check)."""
    from nadaraya import backends
    from nadaraya.kernels import get

    x = np.zeros((2, 1))
    with pytest.raises(ValueError, match=r"moments must be a non-negative int.*got"):
        backends.compute(name, x, x, x, kernel=get("gaussian"), bandwidth=np.ones(1), moments=bad)
