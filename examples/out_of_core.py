"""Out-of-core Nadaraya-Watson: fit from a Zarr store, predict in chunks, never loading the data whole.

The training data are written to a Zarr store chunk by chunk (as an instrument or an ETL job
would), so they never sit in this process's memory at once; the workers are started with a
memory limit, and nadaraya's working memory is set small. ``NadarayaWatson.fit`` keeps the Dask
arrays lazy and computes the Scott bandwidth with Dask reductions; ``predict`` returns a Dask
array that streams, query chunk by query chunk, into another Zarr store.

    python examples/out_of_core.py                 # 1e6 training rows in 2 features
    python examples/out_of_core.py --rows 100000   # smaller
    python examples/out_of_core.py --scheduler tcp://host:8786   # an existing cluster

With ``--scheduler`` the stores must be on storage every worker can read (a shared file
system or an object store URL such as ``s3://bucket/path`` with the right fsspec package).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import dask.array as da
import distributed
import numpy as np
import zarr

import nadaraya


def write_training_store(path: Path, rows: int, chunk: int, seed: int = 0) -> None:
    """Write X (rows, 2) and y (rows,) to Zarr one chunk at a time."""
    X = zarr.create_array(store=str(path / "X.zarr"), shape=(rows, 2), chunks=(chunk, 2), dtype="f8")
    y = zarr.create_array(store=str(path / "y.zarr"), shape=(rows,), chunks=(chunk,), dtype="f8")
    for i, start in enumerate(range(0, rows, chunk)):
        rng = np.random.default_rng([seed, i])
        x = rng.uniform(-3, 3, size=(min(chunk, rows - start), 2))
        X[start : start + len(x)] = x
        y[start : start + len(x)] = np.sin(x[:, 0]) * np.cos(x[:, 1]) + rng.normal(0, 0.2, len(x))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="training rows (default 1e6)")
    parser.add_argument("--chunk", type=int, default=100_000, help="rows per Zarr chunk = per shard")
    parser.add_argument("--grid", type=int, default=100, help="predict on a grid x grid of queries")
    parser.add_argument("--scheduler", default=None, help="address of an existing Dask scheduler")
    parser.add_argument("--store", default=None, help="directory for the Zarr stores (default: a temp dir)")
    args = parser.parse_args(argv)

    nadaraya.set_config(working_memory=16)  # MiB of scratch per call: far below the data's size
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(args.store or tmp)
        t0 = time.perf_counter()
        write_training_store(root, args.rows, args.chunk)
        print(f"wrote {args.rows} x 3 floats ({args.rows * 24 / 2**20:.0f} MiB) to {root} "
              f"in {time.perf_counter() - t0:.1f} s")

        if args.scheduler:
            client = distributed.Client(args.scheduler)
        else:
            cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, memory_limit="1GiB",
                                               dashboard_address=None)
            client = distributed.Client(cluster)
        with client:
            X = da.from_zarr(str(root / "X.zarr"))
            y = da.from_zarr(str(root / "y.zarr"))
            t0 = time.perf_counter()
            model = nadaraya.NadarayaWatson(bandwidth="scott").fit(X, y)
            print(f"fit: bandwidth_ = {np.round(model.bandwidth_, 4).tolist()} (Dask reductions) "
                  f"in {time.perf_counter() - t0:.1f} s; X_fit_ stays a {type(model.X_fit_).__name__}")

            g = np.linspace(-2.5, 2.5, args.grid)
            queries = da.from_array(np.stack(np.meshgrid(g, g), -1).reshape(-1, 2), chunks=(2_000, 2))
            pred = model.predict(queries)  # lazy: one chunk per query chunk
            t0 = time.perf_counter()
            pred.to_zarr(str(root / "pred.zarr"))  # streams chunk by chunk into the store
            seconds = time.perf_counter() - t0
            out = zarr.open_array(str(root / "pred.zarr"), mode="r")[:]
            truth = np.sin(queries[:, 0]) * np.cos(queries[:, 1])
            rmse = float(np.sqrt(np.mean((out - truth.compute()) ** 2)))
            workers = len(client.scheduler_info()["workers"])
            print(f"predict: {out.size} queries x {args.rows} keys in {seconds:.1f} s on {workers} "
                  f"workers; RMSE against the true curve {rmse:.3f}")
        if not args.scheduler:
            cluster.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
