"""What the Dask graph of ``pool`` reads, counted from the graph that runs (README "Beyond one
machine", docs/distributed.md "What moves over the network").

Each task reads at most one key chunk, the value chunk of the same rows and one query chunk,
and reads nothing else (no task gathers training data): so the training data that a worker's
tasks need is at most ``n x (d + p)`` floats, and everything else that leaves a task is what it
computed from them (partials, nearest keys, sums). Where the scheduler places the tasks, and
whether it moves a chunk to the same worker twice under load, is its choice, not the graph's:
``benchmarks/bench_dask.py`` measures that from the workers' transfer logs.
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict

import numpy as np
import pytest

import nadaraya

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")

N, M, D = 4000, 400, 2
Q_CHUNK = 50  # 8 query chunks; 4 key chunks, or 16 in the merge tree's case
# more than 8 key chunks stay apart only when each has at least min(1024, n / 8) rows (smaller
# ones are coalesced first): the merge tree's case takes 16 chunks of 1024 keys
N_TREE = 16 * 1024


def _layer(key) -> str:
    return key[0] if isinstance(key, tuple) else key


def _graph(k_chunk: int, **kw):
    n = N_TREE if k_chunk == 1024 else N
    from dask.core import get_dependencies

    rng = np.random.default_rng(0)
    keys = rng.uniform(0, 5, (n, D))
    values = np.sin(keys[:, 0]) + rng.normal(0, 0.3, n)
    queries = rng.uniform(0, 5, (M, D))
    dq = da.from_array(queries, chunks=(Q_CHUNK, D))
    dk, dv = da.from_array(keys, chunks=(k_chunk, D)), da.from_array(values, chunks=k_chunk)
    lazy = nadaraya.pool(dq, dk, dv, bandwidth=0.3, **kw)
    (run,) = dask.optimize(lazy)  # the graph that the scheduler gets
    g = dict(run.__dask_graph__())
    return g, {k: set(get_dependencies(g, k)) for k in g}


CASES = [
    (1000, {}),
    (1024, {}),  # a merge tree
    (1000, {"degree": 1}),
    (1000, {"kernel": "epanechnikov", "empty": "nearest"}),  # nearest-key tasks beside the partials
    (1000, {"kernel": "epanechnikov", "empty": "mean"}),  # the mean of the values, per key chunk
    (1000, {"tol": 1e-6}),
]


@pytest.mark.parametrize(("k_chunk", "kw"), CASES, ids=str)
def test_each_task_reads_at_most_one_chunk_of_each_input(k_chunk, kw):
    g, deps = _graph(k_chunk, **kw)
    # the validated input chunks: one layer per input, one key per chunk
    inputs = defaultdict(dict)
    for k in g:
        if isinstance(k, tuple) and _layer(k).startswith("_check_chunk-"):
            inputs[_layer(k)][k[1]] = k
    nq, nk = M // Q_CHUNK, (N_TREE if k_chunk == 1024 else N) // k_chunk
    counts = {name: len(chunks) for name, chunks in inputs.items()}
    assert sorted(counts.values()) == sorted([nq, nk, nk]), counts
    query_layer = next(name for name, c in counts.items() if c == nq)
    training = [name for name in inputs if name != query_layer]
    chunk_of = {k: (name, i) for name in inputs for i, k in inputs[name].items()}
    # the data behind each validated chunk key (it is an alias) is read by that key alone
    for key in chunk_of:
        for t in deps[key]:
            assert {k for k in g if t in deps[k]} == {key}, f"{t} is read by more than {key}"
    # a slice of one input chunk (e.g. a key as the anchor of a far query) counts as that chunk
    sliced = {k: chunk_of[next(iter(deps[k]))] for k in g
              if k not in chunk_of and len(deps[k]) == 1 and deps[k] <= set(chunk_of)}
    read_as = {**chunk_of, **sliced}
    readers = {k: sorted({read_as[d] for d in deps[k] if d in read_as}) for k in g if k not in chunk_of}
    readers = {k: read for k, read in readers.items() if any(name in training for name, _ in read)}
    assert readers
    pairs = Counter()
    for k, read in readers.items():
        assert deps[k] <= set(read_as), f"{k} reads more than input chunks: {deps[k] - set(read_as)}"
        rows = {name: [i for n, i in read if n == name] for name in inputs}
        assert all(len(r) <= 1 for r in rows.values()), f"{k} reads several chunks of one input: {read}"
        blocks = {r[0] for name in training for r in [rows[name]] if r}
        assert len(blocks) == 1, f"{k} pairs key and value chunks of other rows: {read}"
        if rows[query_layer]:
            pairs[rows[query_layer][0], blocks.pop()] += 1
    # every (query chunk, key chunk) pair is read the same number of times (once for the
    # partials, once more for the nearest keys): no key chunk is read more for some queries
    assert set(pairs) == set(itertools.product(range(nq), range(nk)))
    assert len(set(pairs.values())) == 1, pairs
