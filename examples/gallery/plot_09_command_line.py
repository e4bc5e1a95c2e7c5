"""
The command line: fit, predict, select
======================================

Everything the estimator does is also a command, ``nadaraya`` (or ``python -m nadaraya``),
on CSV, TSV or Parquet files (the format follows the extension; needs the ``cli`` extra).
This example writes the textbook data to a CSV file in a temporary folder and runs the
commands from Python with :mod:`subprocess`, printing exactly what a user sees in a terminal.
"""

# %%
# The data, as a CSV file
# -----------------------
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from nadaraya.datasets import textbook

data = textbook(n=50, noise=1.0, seed=0)
folder = Path(tempfile.mkdtemp(prefix="nadaraya-cli-"))
np.savetxt(folder / "train.csv", np.column_stack([data.x_train, data.y_train]), delimiter=",",
           header="x,y", comments="", fmt="%.6f")
np.savetxt(folder / "new.csv", data.x_val[::10], header="x", comments="", fmt="%.1f")
print((folder / "train.csv").read_text().splitlines()[:4])


def nadaraya(*args: str) -> None:
    """Run ``python -m nadaraya ARGS`` in the folder and print what the terminal shows."""
    print("$ nadaraya", " ".join(args))
    env = {**os.environ, "COLUMNS": "80"}
    done = subprocess.run([sys.executable, "-m", "nadaraya", *args], cwd=folder, env=env,
                          capture_output=True, text=True)
    print(done.stdout + done.stderr, end="")
    print(f"(exit code {done.returncode})\n")


# %%
# Fit and save a model
# --------------------
# ``--bandwidth cv`` (the default) chooses the bandwidth by leave-one-out cross-validation;
# the model file is a safe zip of JSON and arrays (nothing in it is executed when loaded).
nadaraya("fit", "train.csv", "-x", "x", "-y", "y", "--kernel", "gaussian", "--bandwidth", "cv",
         "--model", "model.npz")

# %%
# Predict on new inputs
# ---------------------
# The output holds the input columns and one ``predicted_<target>`` column per target.
nadaraya("predict", "--model", "model.npz", "new.csv", "--out", "predictions.csv")
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
# draws the CV curve into a PNG file, shown here.
nadaraya("select", "train.csv", "-x", "x", "-y", "y", "--method", "cv", "--plot", "cv.png")
image = plt.imread(folder / "cv.png")
fig, ax = plt.subplots(figsize=(image.shape[1] / 100, image.shape[0] / 100), layout="constrained")
ax.imshow(image)
ax.set_axis_off()
plt.show()

# %%
# Clean up the temporary folder.
shutil.rmtree(folder)
