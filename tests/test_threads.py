"""numba's and torch's thread pools in one process: neither slows the other down (issue 3, item 6)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("torch")
pytest.importorskip("numba")

# Run in a fresh process: the threading layer and OpenMP's wait policy are fixed at first use.
_SCRIPT = textwrap.dedent(
    """
    import json, time
    import numpy as np
    import torch
    import nadaraya
    from nadaraya import _threads

    torch.set_num_threads(2)
    rng = np.random.default_rng(0)
    x = rng.uniform(size=3000); v = rng.normal(size=3000)
    a = torch.rand(400_000)

    def torch_op():
        t = time.perf_counter()
        for _ in range(5):
            torch.exp(a)
        return (time.perf_counter() - t) / 5

    def fused_pool():
        t = time.perf_counter()
        nadaraya.pool(x, x, v, bandwidth=0.1, backend="fused")
        return time.perf_counter() - t

    torch_op(); torch_alone = min(torch_op() for _ in range(5))
    fused_pool(); pool_alone = min(fused_pool() for _ in range(3))
    pool_mixed, torch_mixed = [], []
    for _ in range(5):
        pool_mixed.append(fused_pool())
        torch_mixed.append(torch_op())
        pool_mixed.append(fused_pool())
    print(json.dumps({"torch_alone": torch_alone, "torch_mixed": min(torch_mixed),
                      "pool_alone": pool_alone, "pool_mixed": min(pool_mixed),
                      "layer": _threads.threading_layer()}))
    """
)


def _within(r: dict) -> bool:
    # coarse: best of several runs, 2x, plus 2 ms for a machine shared with other work
    torch_ok = r["torch_mixed"] <= 2.0 * r["torch_alone"] + 2e-3
    return bool(torch_ok and r["pool_mixed"] <= 2.0 * r["pool_alone"] + 2e-3)


@pytest.mark.slow
def test_fused_then_torch_then_fused_neither_slows_down() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "NUMBA_THREADING_LAYER")}
    # up to three fresh processes: the fight between thread pools that this guards against
    # (1000x) shows in every one, while other work on a shared machine rarely spoils three
    # (one CI run measured torch alone at 4x its usual time, and failed the 2x bound)
    results = []
    for _ in range(3):
        out = subprocess.run(
            [sys.executable, "-c", _SCRIPT], capture_output=True, text=True, env=env, timeout=300, check=True
        )
        r = json.loads(out.stdout.strip().splitlines()[-1])
        assert r["layer"] != "unstarted"
        results.append(r)
        if _within(r):
            break
    assert _within(results[-1]), results


def test_configure_respects_the_users_choice() -> None:
    script = (
        "import os; from nadaraya import _threads; _threads.configure();"
        "import numba; print(os.environ['OMP_WAIT_POLICY'], numba.config.THREADING_LAYER)"
    )
    env = dict(os.environ, OMP_WAIT_POLICY="ACTIVE", NUMBA_THREADING_LAYER="workqueue")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.split() == ["ACTIVE", "workqueue"]
