"""The textbook example from Python: `nadaraya demo` without the command line.

`make demo` runs `python -m nadaraya demo`; this script shows the same steps through the API:
the data, the study (average pooling, each kernel at several bandwidths and the CV choice), the
figures and the offline report.

    python examples/textbook.py [OUT_DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

from nadaraya import report
from nadaraya.datasets import textbook


def main(out: str = "demo-output") -> None:
    matplotlib.use("Agg")
    split = textbook(n=50, noise=1.0, seed=0)
    study = report.textbook_study(split, learnable=False)
    print(f"Nadaraya-Watson on {split.name}: validation MSE")
    for row in study.rows:
        h = "" if row.bandwidth is None else f"{row.bandwidth:.3g}"
        print(f"  {row.model:<16}{h:>8}{row.mse:>10.4f}  {row.note}")
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    written = [*report.write_figures(study, folder), report.write_html(study, folder / "report.html")]
    print("wrote", ", ".join(str(p) for p in written))


if __name__ == "__main__":
    main(*sys.argv[1:2])
