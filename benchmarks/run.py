"""Run every benchmark script in benchmarks/ (bench_*.py), each in its own process, in order.

Each script prints its own table: per workload, seconds for nadaraya and for each peer measured
in the same run, and the ratio. Pass --quick for a short smoke run, or names to pick scripts:

    python benchmarks/run.py                 # everything
    python benchmarks/run.py engine --quick  # bench_engine.py only, small sizes
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def machine() -> str:
    """One line saying what this machine is."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="benchmark names (bench_NAME.py); all when omitted")
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    args = parser.parse_args(argv)
    scripts = sorted(HERE.glob("bench_*.py"))
    if args.names:
        wanted = {f"bench_{n.removeprefix('bench_').removesuffix('.py')}.py" for n in args.names}
        unknown = wanted - {s.name for s in scripts}
        if unknown:
            parser.error(f"unknown benchmark(s): {', '.join(sorted(unknown))}; have "
                         f"{', '.join(s.stem.removeprefix('bench_') for s in scripts)}")
        scripts = [s for s in scripts if s.name in wanted]
    print(f"# nadaraya benchmarks on {machine()}")
    failed = 0
    for script in scripts:
        print(f"\n## {script.stem.removeprefix('bench_')}", flush=True)
        cmd = [sys.executable, str(script), *(["--quick"] if args.quick else [])]
        rc = subprocess.call(cmd)
        if rc:
            print(f"{script.name} failed with exit code {rc}", flush=True)
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
