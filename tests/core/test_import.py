"""`import nadaraya` stays light: no numba, torch, dask, matplotlib, pandas or scikit-learn."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ["numba", "torch", "dask", "distributed", "matplotlib", "pandas", "sklearn", "typer", "rich"]


def test_import_is_light_in_a_fresh_interpreter():
    code = (
        "import sys, json, nadaraya; "
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    loaded = set(json.loads(out.stdout))
    assert "nadaraya" in loaded
    assert not loaded & set(HEAVY), f"import nadaraya loaded {sorted(loaded & set(HEAVY))}"


def test_pool_on_numpy_data_stays_light():
    code = (
        "import sys, json, nadaraya; nadaraya.pool([0.5], [0.0, 1.0], [1.0, 2.0], backend='reference'); "
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    loaded = set(json.loads(out.stdout))
    assert not loaded & {"torch", "dask", "matplotlib", "pandas"}
