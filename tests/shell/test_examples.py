"""Every script in examples/ runs, quickly (small arguments), in a fresh process, and says what it did."""

from __future__ import annotations

import re
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SCRIPTS = sorted(p.name for p in EXAMPLES.glob("*.py"))

#: per script: small arguments ({out} is a fresh folder) and the modules it needs
SMALL = {
    "textbook.py": (["{out}"], ["matplotlib"]),
    "out_of_core.py": (
        ["--rows", "20000", "--chunk", "5000", "--grid", "20", "--store", "{out}"],
        ["dask", "distributed", "zarr"],
    ),
}


def test_every_example_has_small_arguments():
    assert SCRIPTS, f"no examples in {EXAMPLES}"
    assert set(SCRIPTS) <= set(SMALL), f"give {sorted(set(SCRIPTS) - set(SMALL))} small arguments here"


def _run(name: str, tmp_path: Path) -> str:
    args, needs = SMALL[name]
    missing = [m for m in needs if find_spec(m) is None]
    if missing:
        pytest.skip(f"examples/{name} needs {', '.join(missing)}, which is not installed")
    argv = [a.format(out=tmp_path) for a in args]
    out = subprocess.run([sys.executable, str(EXAMPLES / name), *argv], capture_output=True, text=True,
                         timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-4000:]
    return out.stdout


def test_textbook(tmp_path):
    stdout = _run("textbook.py", tmp_path)
    assert "validation MSE" in stdout
    assert (tmp_path / "report.html").stat().st_size > 10_000
    for name in ("kernels.png", "fit.png", "attention.png", "bandwidth.png"):
        assert (tmp_path / name).stat().st_size > 1_000, name
    # average pooling is the worst model of the table (the chapter's point)
    rows = re.findall(r"^\s+(\S.*?)\s+(\d+\.\d{4})\s", stdout, flags=re.M)
    mse = {model.strip(): float(v) for model, v in rows}
    assert any("average" in m for m in mse), stdout
    worst = max(mse, key=mse.get)
    assert "average" in worst, stdout


@pytest.mark.cluster  # starts a LocalCluster of 2 worker processes
def test_out_of_core(tmp_path):
    stdout = _run("out_of_core.py", tmp_path)
    assert "wrote 20000 x 3 floats" in stdout
    rmse = float(re.search(r"RMSE against the true curve (\d+\.\d+)", stdout).group(1))
    # y = sin x0 cos x1 + N(0, 0.2^2), Scott's bandwidth on 20000 points: well under the noise
    assert rmse < 0.2, stdout
    assert "400 queries x 20000 keys" in stdout
