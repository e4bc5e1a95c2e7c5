"""
The command line: fit, predict, select
======================================

Everything the estimator does is also a command, ``nadaraya`` (or ``python -m nadaraya``),
on CSV, TSV or Parquet files (the format follows the extension; needs the ``cli`` extra).
This example writes the textbook data to a CSV file in a temporary folder and runs the
commands from Python, printing exactly what a user sees in a terminal.

Here the commands run inside this Python process through typer's test runner, on
``nadaraya.cli.app``, the application that the ``nadaraya`` command starts, so the output is
what a terminal shows. From a script of your own, ``subprocess.run([sys.executable, "-m",
"nadaraya", "fit", ...])`` runs each as its own process (which first spends a second or two
importing scikit-learn and the rest).
"""

# %%
# The data, as a CSV file
# -----------------------
import os
import shutil
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from typer.testing import CliRunner

from nadaraya.cli import app
from nadaraya.datasets import textbook

data = textbook(n=50, noise=1.0, seed=0)
folder = Path(tempfile.mkdtemp(prefix="nadaraya-cli-"))
np.savetxt(
    folder / "train.csv",
    np.column_stack([data.x_train, data.y_train]),
    delimiter=",",
    header="x,y",
    comments="",
    fmt="%.6f",
)
np.savetxt(
    folder / "new.csv", data.x_val[::10], header="x", comments="", fmt="%.1f"
)
print(*(folder / "train.csv").read_text().splitlines()[:4], "...", sep="\n")


def nadaraya(*args: str) -> None:
    """Run ``nadaraya ARGS`` in the folder and print what the terminal shows (stdout and stderr)."""
    print("$ nadaraya", " ".join(args))
    here = os.getcwd()
    os.chdir(folder)
    try:
        done = CliRunner(env={"COLUMNS": "80"}).invoke(app, list(args))
    finally:
        os.chdir(here)
    print(done.output, end="")
    print(f"(exit code {done.exit_code})\n")


# %%
# Fit and save a model
# --------------------
# ``--bandwidth cv`` (the default) chooses the bandwidth by leave-one-out cross-validation;
# the model file is a safe zip of JSON and arrays (nothing in it is executed when loaded).
nadaraya(
    "fit",
    "train.csv",
    "-x",
    "x",
    "-y",
    "y",
    "--kernel",
    "gaussian",
    "--bandwidth",
    "cv",
    "--model",
    "model.npz",
)

# %%
# Predict on new inputs
# ---------------------
# The output holds the input columns and one ``predicted_<target>`` column per target.
nadaraya(
    "predict", "--model", "model.npz", "new.csv", "--out", "predictions.csv"
)
print((folder / "predictions.csv").read_text())

# %%
# A mistake ends with one line
# ----------------------------
# A misspelt column (or a missing file, a non-numeric column, missing values) stops with exit
# code 2 and one line saying what is wrong; no output file is left behind.
nadaraya("fit", "train.csv", "-x", "X", "-y", "y", "--model", "other.npz")
print("other.npz written:", (folder / "other.npz").exists())

# %%
# Select a bandwidth and draw the search
# --------------------------------------
# ``select`` runs the search alone, prints every bandwidth it evaluated and, with ``--plot``,
# draws the CV curve into a PNG file.
nadaraya(
    "select",
    "train.csv",
    "-x",
    "x",
    "-y",
    "y",
    "--method",
    "cv",
    "--plot",
    "cv.png",
)

# %%
# The picture ``--plot`` wrote:
image = plt.imread(folder / "cv.png")
fig, ax = plt.subplots(
    figsize=(image.shape[1] / 100, image.shape[0] / 100), layout="constrained"
)
ax.imshow(image)
ax.set_axis_off()
plt.show()

# %%
# Clean up the temporary folder.
shutil.rmtree(folder)
