"""The self-contained ``report.html`` of ``nadaraya demo``: data payload, SVG/canvas/JS template, writer."""

from __future__ import annotations

import base64
import html
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from ._files import atomic_write

if TYPE_CHECKING:
    from .report import Study


def _label(kernel: str) -> str:
    return "average pooling" if kernel == "constant" else kernel


def _b64_uint8(a: NDArray[np.float64]) -> tuple[str, list[float]]:
    """Each state's matrix scaled to 0..255 by its own maximum; the maxima kept for the colour bar."""
    top = np.nanmax(a.reshape(a.shape[0], -1), axis=1)
    top = np.where(top > 0, top, 1.0)
    q = np.rint(np.nan_to_num(a / top[:, None, None]) * 255).astype(np.uint8)
    return base64.b64encode(q.tobytes()).decode("ascii"), [float(t) for t in top]


def render_html(study: Study, *, title: str = "Attention pooling by similarity") -> str:
    """The report as one self-contained HTML string (no external resources).

    Parameters
    ----------
    study : Study
    title : str

    Returns
    -------
    str

    Examples
    --------
    >>> from nadaraya.report import textbook_study
    >>> study = textbook_study(kernels=["gaussian"], slider=[0.2, 1.0], learnable=False)
    >>> page = render_html(study)
    >>> "<script>" in page and "<script src" not in page and "<link" not in page
    True
    """
    s = study.split
    data = {
        "xTrain": np.round(s.x_train, 5).tolist(),
        "yTrain": np.round(s.y_train, 5).tolist(),
        "xVal": np.round(s.x_val, 5).tolist(),
        "yVal": np.round(s.y_val, 5).tolist(),
        "slider": np.round(study.slider, 6).tolist(),
        "kernels": {},
        "m": int(s.x_val.size),
        "n": int(s.x_train.size),
    }
    for k in study.curves:
        pixels, top = _b64_uint8(study.heatmaps[k])
        curve = study.curves[k]
        data["kernels"][k] = {
            "label": _label(k),
            "curves": np.round(curve, 5).tolist(),
            "mse": [float(np.mean((c - s.y_val) ** 2)) for c in curve],
            "heat": pixels,
            "heatMax": top,
            "cv": float(study.searches[k].bandwidth[0]) if k in study.searches else None,
        }
    rows = "\n".join(
        f"<tr><td>{html.escape(r.model)}</td><td>{'' if r.bandwidth is None else f'{r.bandwidth:.3g}'}</td>"
        f"<td>{r.mse:.4f}</td><td>{html.escape(r.note)}</td></tr>"
        for r in study.rows
    )
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in study.notes)
    payload = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
    return (
        _TEMPLATE.replace("%%TITLE%%", html.escape(title))
        .replace("%%DATASET%%", html.escape(s.name or "data"))
        .replace("%%ROWS%%", rows)
        .replace("%%NOTES%%", f"<ul class='notes'>{notes}</ul>" if notes else "")
        .replace("%%DATA%%", payload)
    )


def write_html(
    study: Study, path: str | os.PathLike[str], *, title: str = "Attention pooling by similarity"
) -> Path:
    """Write :func:`render_html` to ``path`` atomically.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> from nadaraya.report import textbook_study
    >>> study = textbook_study(kernels=["gaussian"], slider=[0.5], learnable=False)
    >>> p = write_html(study, pathlib.Path(tempfile.mkdtemp()) / "report.html")
    >>> p.stat().st_size < 5_000_000
    True
    """
    with atomic_write(path, "w") as f:
        f.write(render_html(study, title=title))
    return Path(path)


_TEMPLATE = r"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy"
 content="default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:">
<title>%%TITLE%%</title>
<style>
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;
 margin:1.5rem auto;max-width:1100px;color:#222;padding:0 1rem}
h1{font-size:1.5rem;margin-bottom:.2rem} .sub{color:#666;margin-top:0}
.controls{display:flex;gap:2rem;align-items:center;flex-wrap:wrap;background:#f6f6f6;
 padding:.7rem 1rem;border-radius:8px}
.controls label{font-weight:600}
#bwval{font-family:monospace;font-size:1.1rem;min-width:5ch;display:inline-block}
.panels{display:flex;gap:1.5rem;flex-wrap:wrap;margin-top:1rem}
.panel{flex:1 1 460px} .panel h2{font-size:1.05rem;margin:.3rem 0}
svg{background:#fff;border:1px solid #ddd;border-radius:4px}
#heat{border:1px solid #ddd;image-rendering:pixelated;width:380px;height:380px}
.heatwrap{display:flex;gap:.6rem;align-items:stretch}
.cbar{width:14px;border:1px solid #ccc;
 background:linear-gradient(to top,#fff5f0,#fcbba1,#fb6a4a,#cb181d,#67000d)}
.cbl{display:flex;flex-direction:column;justify-content:space-between;font-size:.8rem;color:#555}
table{border-collapse:collapse;margin-top:.5rem}
td,th{padding:.2rem .8rem;border-bottom:1px solid #e4e4e4;text-align:right}
td:first-child,th:first-child,td:last-child,th:last-child{text-align:left} .notes{color:#777}
.stat{font-family:monospace}
</style></head><body>
<h1>%%TITLE%%</h1>
<p class="sub">Nadaraya-Watson regression on %%DATASET%%: each prediction is an attention-weighted
average of the training targets; the weights come from a kernel of (query - key) / h.</p>
<div class="controls">
 <span><label for="kernel">kernel</label> <select id="kernel"></select></span>
 <span><label for="bw">bandwidth h</label> <input type="range" id="bw" min="0" step="1">
   <span id="bwval"></span></span>
 <span>validation MSE <span id="mse" class="stat"></span></span>
 <span id="cvnote" class="stat"></span>
</div>
<div class="panels">
 <div class="panel"><h2>Fit</h2>
  <svg id="fit" viewBox="0 0 520 380" width="520" height="380" role="img"
   aria-label="fitted curve"></svg></div>
 <div class="panel">
  <h2>Attention weights (rows: validation inputs, columns: training inputs, both sorted)</h2>
  <div class="heatwrap"><canvas id="heat"></canvas><div class="cbar"></div>
  <div class="cbl"><span id="cbmax"></span><span>0</span></div></div></div>
</div>
<h2>Validation MSE</h2>
<table><thead><tr><th>model</th><th>bandwidth</th><th>MSE</th><th></th></tr></thead><tbody>
%%ROWS%%
</tbody></table>
%%NOTES%%
<script id="data" type="application/json">%%DATA%%</script>
<script>
"use strict";
const D = JSON.parse(document.getElementById("data").textContent);
const NS = "http://www.w3.org/2000/svg";
const sel = document.getElementById("kernel"), bw = document.getElementById("bw");
const svg = document.getElementById("fit"), canvas = document.getElementById("heat");
const W = 520, H = 380, L = 45, R = 12, T = 12, B = 36;
const xs = D.xTrain.concat(D.xVal), ys = D.yTrain.concat(D.yVal);
const x0 = Math.min(...xs), x1 = Math.max(...xs);
const y0 = Math.min(...ys) - 0.5, y1 = Math.max(...ys) + 0.5;
const sx = x => L + (x - x0) / (x1 - x0) * (W - L - R);
const sy = y => H - B - (y - y0) / (y1 - y0) * (H - T - B);
function el(name, attrs, parent) {
  const e = document.createElementNS(NS, name);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  (parent || svg).appendChild(e); return e;
}
function pathOf(x, y) {
  return x.map((v, i) => (i ? "L" : "M") + sx(v).toFixed(1) + "," + sy(y[i]).toFixed(1)).join("");
}
function axes() {
  el("line", {x1: L, y1: H - B, x2: W - R, y2: H - B, stroke: "#888"});
  el("line", {x1: L, y1: T, x2: L, y2: H - B, stroke: "#888"});
  const tick = (v, horiz) => {
    const t = el("text", horiz ? {x: sx(v), y: H - B + 16, "text-anchor": "middle"}
                               : {x: L - 6, y: sy(v) + 4, "text-anchor": "end"});
    t.setAttribute("font-size", "11"); t.setAttribute("fill", "#555"); t.textContent = +v.toFixed(2);
  };
  for (let i = 0; i <= 5; i++) tick(x0 + i * (x1 - x0) / 5, true);
  for (let i = 0; i <= 4; i++) tick(y0 + i * (y1 - y0) / 4, false);
  const xl = el("text", {x: (L + W - R) / 2, y: H - 4, "text-anchor": "middle", "font-size": "12"});
  xl.textContent = "x";
}
axes();
el("path", {d: pathOf(D.xVal, D.yVal), fill: "none", stroke: "#111", "stroke-dasharray": "6 4",
            "stroke-width": 1.5, id: "truth"});
D.xTrain.forEach((x, i) => el("circle", {cx: sx(x), cy: sy(D.yTrain[i]), r: 3, fill: "#8c8c8c",
                                         "fill-opacity": 0.8}));
const curve = el("path", {fill: "none", stroke: "#d62728", "stroke-width": 2.5, id: "curve"});
const legend = [["training data", "#8c8c8c"], ["truth", "#111"], ["prediction", "#d62728"]];
legend.forEach(([name, c], i) => {
  el("rect", {x: L + 12, y: T + 6 + i * 16, width: 12, height: 3, fill: c});
  const t = el("text", {x: L + 30, y: T + 11 + i * 16, "font-size": "12"}); t.textContent = name;
});
canvas.width = D.n; canvas.height = D.m;
const ctx = canvas.getContext("2d");
const ramp = [[255,245,240],[252,187,161],[251,106,74],[203,24,29],[103,0,13]];
function colour(t) {
  const f = t * (ramp.length - 1), i = Math.min(Math.floor(f), ramp.length - 2), u = f - i;
  return ramp[i].map((c, j) => Math.round(c + u * (ramp[i + 1][j] - c)));
}
const lut = Array.from({length: 256}, (_, v) => colour(v / 255));
const decoded = {};
function heat(k) {
  if (!decoded[k]) { const s = atob(D.kernels[k].heat); const a = new Uint8Array(s.length);
    for (let i = 0; i < s.length; i++) a[i] = s.charCodeAt(i); decoded[k] = a; }
  return decoded[k];
}
for (const k in D.kernels) {
  const o = document.createElement("option");
  o.value = k; o.textContent = D.kernels[k].label; sel.appendChild(o);
}
bw.max = D.slider.length - 1;
const start = D.slider.findIndex(h => Math.abs(h - 0.5) < 1e-9);
bw.value = start >= 0 ? start : Math.floor(D.slider.length / 2);
if (D.kernels.gaussian) sel.value = "gaussian";
function update() {
  const k = sel.value, i = +bw.value, K = D.kernels[k];
  document.getElementById("bwval").textContent = k === "constant" ? "(none)" : D.slider[i].toPrecision(3);
  curve.setAttribute("d", pathOf(D.xVal, K.curves[i]));
  document.getElementById("mse").textContent = K.mse[i].toFixed(4);
  document.getElementById("cvnote").textContent = K.cv ? "CV choice h = " + K.cv.toPrecision(3) : "";
  const px = heat(k), off = i * D.m * D.n, img = ctx.createImageData(D.n, D.m);
  for (let p = 0; p < D.m * D.n; p++) { const c = lut[px[off + p]];
    img.data[4 * p] = c[0]; img.data[4 * p + 1] = c[1]; img.data[4 * p + 2] = c[2];
    img.data[4 * p + 3] = 255; }
  ctx.putImageData(img, 0, 0);
  document.getElementById("cbmax").textContent = K.heatMax[i].toPrecision(2);
}
sel.addEventListener("change", update); bw.addEventListener("input", update);
update();
</script>
</body></html>
"""
