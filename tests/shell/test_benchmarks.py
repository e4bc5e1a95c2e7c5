"""`make bench` keeps working: every benchmark script runs in its smoke mode (--quick).

Timings are not checked here (the machines are noisy; the figures live in docs/benchmarks.md);
what is checked is that a change to the library did not break a script, as dropping a keyword
of `backends.choose` once did.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
SCRIPTS = sorted(p.stem.removeprefix("bench_") for p in BENCHMARKS.glob("bench_*.py"))


def test_there_are_benchmarks() -> None:
    assert {"engine", "bandwidth"} <= set(SCRIPTS)


@pytest.mark.parametrize("name", SCRIPTS)
def test_benchmark_runs_in_smoke_mode(name: str) -> None:
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "run.py"), name, "--quick"],
        capture_output=True, text=True, timeout=600, cwd=BENCHMARKS,
    )
    tail = f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert done.returncode == 0, f"benchmarks/run.py {name} --quick failed:\n{tail}"
    assert f"## {name}" in done.stdout
