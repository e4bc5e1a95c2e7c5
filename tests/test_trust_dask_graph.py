"""What the Dask graph of ``pool`` reads, counted from the graph that runs (README "Beyond one
machine", docs/distributed.md "What moves over the network").

Each (query chunk, key chunk) task reads one key chunk, the value chunk of the same rows and
one query chunk, and no other task reads training data: so the training data that a worker's
tasks need is at most ``n x (d + p)`` floats, and everything else that leaves a task is its
partials. Where the scheduler places the tasks, and whether it moves a chunk to the same
worker twice under load, is its choice, not the graph's: ``benchmarks/bench_dask.py`` measures
that from the workers' transfer logs.
"""

from __future__ import annotations

import itertools
from collections import defaultdict

import numpy as np
import pytest

import nadaraya

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")

N, M, D = 4000, 400, 2
Q_CHUNK = 50


def _layer(key) -> str:
    return key[0] if isinstance(key, tuple) else key


def _graph(degree: int, k_chunk: int):
    from dask.core import get_dependencies

    rng = np.random.default_rng(0)
    keys = rng.uniform(0, 5, (N, D))
    values = np.sin(keys[:, 0]) + rng.normal(0, 0.3, N)
    queries = rng.uniform(0, 5, (M, D))
    dq = da.from_array(queries, chunks=(Q_CHUNK, D))
    dk, dv = da.from_array(keys, chunks=(k_chunk, D)), da.from_array(values, chunks=k_chunk)
    lazy = nadaraya.pool(dq, dk, dv, bandwidth=0.3, degree=degree)
    (run,) = dask.optimize(lazy)  # the graph that the scheduler gets
    g = dict(run.__dask_graph__())
    return g, {k: set(get_dependencies(g, k)) for k in g}


@pytest.mark.parametrize(("degree", "k_chunk"), [(0, 1000), (1, 1000), (0, 250)])  # 250: a merge tree
def test_each_task_reads_one_key_chunk_and_nothing_else_reads_training_data(degree, k_chunk):
    g, deps = _graph(degree, k_chunk)
    # the validated input chunks: one layer per input, one key per chunk
    inputs = defaultdict(dict)
    for k in g:
        if isinstance(k, tuple) and _layer(k).startswith("_check_chunk-"):
            inputs[_layer(k)][k[1]] = k
    by_size = {len(chunks): name for name, chunks in inputs.items()}
    nq, nk = M // Q_CHUNK, N // k_chunk
    counts = {name: len(chunks) for name, chunks in inputs.items()}
    assert sorted(counts.values()) == sorted([nq, nk, nk]), counts
    query_layer = by_size[nq]
    training = [name for name in inputs if name != query_layer]
    # the data behind each validated chunk key (an alias of it), read by that key alone
    behind = {t for name in inputs for k in inputs[name].values() for t in deps[k]}
    for t in behind:
        assert {k for k in g if t in deps[k]} <= {k for name in inputs for k in inputs[name].values()}
    chunk_of = {k: (name, i) for name in inputs for i, k in inputs[name].items()}
    readers = {k: {chunk_of[d] for d in deps[k] if d in chunk_of} for k in g if k not in chunk_of}
    readers = {k: read for k, read in readers.items() if any(name in training for name, _ in read)}
    pairs = []
    for k, read in readers.items():
        assert deps[k] <= set(chunk_of), f"{k} reads more than input chunks: {deps[k] - set(chunk_of)}"
        rows = {name: [i for n, i in read if n == name] for name in inputs}
        assert all(len(rows[name]) == 1 for name in training), f"{k} reads {read}"
        assert rows[training[0]] == rows[training[1]], f"{k} pairs key and value chunks of other rows: {read}"
        assert len(rows[query_layer]) == 1, f"{k} reads {read}"
        pairs.append((rows[query_layer][0], rows[training[0]][0]))
    # one task per (query chunk, key chunk): each key chunk is read once per query chunk
    assert sorted(pairs) == sorted(itertools.product(range(nq), range(nk)))
