"""The self-contained ``report.html`` of ``nadaraya demo``: data payload, SVG/canvas/JS template, writer."""

from __future__ import annotations

import base64
import html
import json
import os
import zlib
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from nadaraya._support.files import atomic_write

if TYPE_CHECKING:
    from nadaraya.report._study import Study


def _label(kernel: str) -> str:
    return "average pooling" if kernel == "constant" else kernel


def _deflated_uint8(a: NDArray[np.float64]) -> tuple[str, list[float]]:
    """Each state's matrix scaled to 0..255 by its own maximum, zlib-compressed and base64-encoded
    (the page inflates it with the browser's ``DecompressionStream``); the maxima kept for the
    colour bar."""
    top = np.nanmax(a.reshape(a.shape[0], -1), axis=1)
    top = np.where(top > 0, top, 1.0)
    q = np.rint(np.nan_to_num(a / top[:, None, None]) * 255).astype(np.uint8)
    return base64.b64encode(zlib.compress(q.tobytes(), 9)).decode("ascii"), [float(f"{t:.4g}") for t in top]


def _at(slider: NDArray[np.float64], h: float) -> int | None:
    """The slider position of ``h`` (to a relative 1e-5: positions have 6 significant digits), or None."""
    hit = np.flatnonzero(np.isclose(slider, h, rtol=1e-5, atol=0.0))
    return int(hit[0]) if hit.size else None


def _table(study: Study, cv_index: dict[str, int | None]) -> str:
    """The MSE table, one row per model: MSE at the textbook's bandwidths, the chosen h and its MSE."""
    s = study.split
    hs = sorted({r.bandwidth for r in study.rows
                 if r.bandwidth is not None and not r.note and r.kernel in study.curves})

    def mse_at(k: str, i: int | None) -> float | None:
        return None if i is None else float(np.mean((study.curves[k][i] - s.y_val) ** 2))

    body: list[tuple[str, list[float | None], str, float | None, str]] = []
    for k in study.curves:
        if k == "constant":
            body.append((_label(k), [], "none", mse_at(k, 0), "(no bandwidth)"))
            continue
        cv = float(study.searches[k].bandwidth[0]) if k in study.searches else None
        body.append((k, [mse_at(k, _at(study.slider, h)) for h in hs],
                     "" if cv is None else f"{cv:.3g}", mse_at(k, cv_index.get(k)), ""))
    for d, fit in study.local.items():
        if d:
            body.append((fit.name, [], f"{fit.bandwidth:.3g}", fit.mse, f"{fit.kernel}, degree {d}"))
    for r in study.rows:
        if r.kernel in ("learned", "lowess"):
            body.append((r.model, [], "" if r.bandwidth is None else f"{r.bandwidth:.3g}", r.mse, r.note))
    values = [v for _, ms, _, m, _ in body for v in (*ms, m) if v is not None]
    best = min(values) if values else None

    def cell(v: float | None) -> str:
        if v is None:
            return "<td></td>"
        return f"<td><b>{v:.4f}</b></td>" if v == best else f"<td>{v:.4f}</td>"

    head = (f"<thead><tr><th></th><th colspan='{len(hs)}'>validation MSE at h =</th>"
            "<th colspan='2'>chosen (CV or trained)</th></tr><tr><th>model</th>"
            + "".join(f"<th>{h:g}</th>" for h in hs) + "<th>h</th><th>MSE</th></tr></thead>")
    rows = []
    for name, ms, h, m, note in body:
        span = f"<td colspan='{len(hs)}' class='note'>{html.escape(note)}</td>"
        left = "".join(cell(v) for v in ms) if ms else span
        rows.append(f"<tr><td>{html.escape(name)}</td>{left}<td>{h}</td>{cell(m)}</tr>")
    return f"<table id='msetable'>{head}<tbody>{''.join(rows)}</tbody></table>"


#: Colours of the local fits in the report, by degree (Nadaraya-Watson red as the slider's curve).
_LOCAL_COLOURS = {0: "#d62728", 1: "#1f77b4", 2: "#2ca02c", 3: "#9467bd"}
#: The MSE columns of the local table: the validation inputs within this fraction of the range
#: of each edge, and those between.
_EDGE = 0.1


def _nice(lo: float, hi: float, n: int = 5) -> tuple[float, float, list[float]]:
    """A round axis range around [lo, hi] and its ticks (steps of 1, 2 or 5 times a power of ten)."""
    raw = (hi - lo or 1.0) / n
    p = 10.0 ** np.floor(np.log10(raw))
    step = p * next(m for m in (1, 2, 5, 10) if raw / p <= m * 1.0001)
    a, b = np.floor(lo / step) * step, np.ceil(hi / step) * step
    return float(a), float(b), [float(f"{v:.10g}") for v in np.arange(a, b + step / 2, step)]


def _svg_panel(study: Study, degrees: list[int], box: tuple[float, float, float, float],
               xlim: tuple[float, float] | None, title: str) -> str:
    """One panel of the local section's figure: points, truth (dashed), each fit, axes and ticks."""
    s = study.split
    x = study.local[degrees[0]].x
    keep = np.ones(x.size, bool) if xlim is None else (x >= xlim[0]) & (x <= xlim[1])
    xk = x[keep]
    pts = np.ones(s.x_train.size, bool) if xlim is None else (s.x_train >= xk[0]) & (s.x_train <= xk[-1])
    truth = s.truth(xk)
    ys = [truth, *(study.local[d].prediction[keep] for d in degrees), s.y_train[pts]]
    x0, x1, xt = _nice(float(xk[0]), float(xk[-1]))
    y0, y1, yt = _nice(min(float(v.min()) for v in ys), max(float(v.max()) for v in ys))
    left, top, w, h = box

    def sx(v: np.ndarray | float) -> np.ndarray:
        return left + (np.asarray(v) - x0) / (x1 - x0) * w

    def sy(v: np.ndarray | float) -> np.ndarray:
        return top + h - (np.asarray(v) - y0) / (y1 - y0) * h

    def path(xs: np.ndarray, ys_: np.ndarray) -> str:
        return "M" + "L".join(f"{a:.1f},{b:.1f}" for a, b in zip(sx(xs), sy(ys_)))

    out = [f"<text x='{left + w / 2:.0f}' y='{top - 8:.0f}' text-anchor='middle' font-size='13'>"
           f"{html.escape(title)}</text>"]
    for v in xt:
        out.append(f"<line x1='{sx(v):.1f}' x2='{sx(v):.1f}' y1='{top}' y2='{top + h}' stroke='#eee'/>"
                   f"<text x='{sx(v):.1f}' y='{top + h + 15}' text-anchor='middle' class='tk'>{v:g}</text>")
    for v in yt:
        out.append(f"<line x1='{left}' x2='{left + w}' y1='{sy(v):.1f}' y2='{sy(v):.1f}' stroke='#eee'/>"
                   f"<text x='{left - 6}' y='{sy(v) + 4:.1f}' text-anchor='end' class='tk'>{v:g}</text>")
    out.append(f"<rect x='{left}' y='{top}' width='{w}' height='{h}' fill='none' stroke='#888'/>")
    out.append(f"<text x='{left + w / 2:.0f}' y='{top + h + 34}' text-anchor='middle' "
               "font-size='13'>x</text>")
    out += [f"<circle cx='{a:.1f}' cy='{b:.1f}' r='3' fill='#8c8c8c' fill-opacity='0.8'/>"
            for a, b in zip(sx(s.x_train[pts]), sy(s.y_train[pts]))]
    out.append(f"<path d='{path(xk, truth)}' fill='none' stroke='#111' stroke-width='1.5' "
               "stroke-dasharray='6 4'/>")
    for d in degrees:  # the 95 % pointwise band, shaded, under the curves
        band = study.local[d].band
        if band is not None:
            lo, hi = np.clip(band.lower[keep], y0, y1), np.clip(band.upper[keep], y0, y1)
            ring = path(np.concatenate([xk, xk[::-1]]), np.concatenate([hi, lo[::-1]]))
            out.append(f"<path d='{ring}Z' fill='{_LOCAL_COLOURS.get(d, '#ff7f0e')}' fill-opacity='0.13' "
                       f"stroke='none' class='band{d}'/>")
    for d in degrees:
        out.append(f"<path d='{path(xk, study.local[d].prediction[keep])}' fill='none' "
                   f"stroke='{_LOCAL_COLOURS.get(d, '#ff7f0e')}' stroke-width='2.5' class='local{d}'/>")
    return "".join(out)


def _local_figure(study: Study, degrees: list[int], zoom: tuple[float, float]) -> str:
    """The local section's figure: the whole range and the left edge enlarged, with one legend."""
    legend = [("truth", "#111", "6 4")] + [(study.local[d].name, _LOCAL_COLOURS.get(d, "#ff7f0e"), "")
                                           for d in degrees]
    keys = "".join(
        f"<line x1='{60 + 190 * i}' x2='{84 + 190 * i}' y1='16' y2='16' stroke='{c}' stroke-width='2.5'"
        + (f" stroke-dasharray='{dash}'" if dash else "") + f"/><text x='{90 + 190 * i}' y='20' "
        f"font-size='12'>{html.escape(name)}</text>" for i, (name, c, dash) in enumerate(legend))
    dot = 60 + 190 * len(legend)
    return ("<svg id='localfit' viewBox='0 0 1000 390' width='1000' height='390' role='img' "
            "aria-label='Nadaraya-Watson and local linear fits, the whole range and the left edge'>"
            "<style>.tk{font-size:11px;fill:#555}</style>" + keys
            + f"<circle cx='{dot + 12}' cy='16' r='3' fill='#8c8c8c'/>"
            f"<text x='{dot + 30}' y='20' font-size='12'>training data</text>"
            + _svg_panel(study, degrees, (50, 56, 540, 284), None, "the whole range")
            + _svg_panel(study, degrees, (660, 56, 320, 284), zoom, f"the edge at x = {zoom[0]:g}, enlarged")
            + "</svg>")


def _local_section(study: Study) -> str:
    """Local linear beside Nadaraya-Watson: why the edge bends, the figure, and a table of errors."""
    if not {0, 1} <= set(study.local):
        return ""
    from nadaraya.report._study import edge_window

    s = study.split
    lo, hi = float(s.x_val.min()), float(s.x_val.max())
    left, right = s.x_val <= lo + _EDGE * (hi - lo), s.x_val >= hi - _EDGE * (hi - lo)
    parts = {"left edge": left, "interior": ~(left | right), "right edge": right}
    t0 = float(s.truth(np.asarray([study.local[0].x[0]]))[0])
    head = ("<thead><tr><th>fit</th><th>degree</th><th>CV h</th><th>validation MSE</th>"
            f"<th>at x = {study.local[0].x[0]:g} (truth {t0:.2f})</th>"
            + "".join(f"<th>MSE, {name}</th>" for name in parts) + "</tr></thead>")
    rows = []
    for d, fit in study.local.items():
        err = (fit.validation - s.y_val) ** 2
        rows.append(f"<tr><td>{html.escape(fit.name)}</td><td>{d}</td><td>{fit.bandwidth:.3g}</td>"
                    f"<td>{fit.mse:.4f}</td><td>{fit.prediction[0]:.3f}</td>"
                    + "".join(f"<td>{err[m].mean():.4f}</td>" for m in parts.values()) + "</tr>")
    edges = (f"the left edge: x &le; {s.x_val[left].max():g}; the right edge: "
             f"x &ge; {s.x_val[right].min():g} ({_EDGE:.0%} of the range at each end)")
    figure = _local_figure(study, [0, 1], edge_window(study))
    return (
        "<details open id='local'><summary>Local linear beside Nadaraya-Watson: the boundary bias</summary>"
        "<p class='prose'>Nadaraya-Watson is local-constant regression: each prediction is a weighted "
        "average of the training targets. At the edge of the data every point in the kernel's window "
        "lies on one side of the query, so where the function rises or falls there the average is "
        "pulled towards the inside, by about its slope times h. Local linear regression "
        "(<code>degree=1</code>) fits a weighted straight line around each query and predicts its "
        "intercept, which removes that bias; local quadratic (<code>degree=2</code>) also follows the "
        "curvature of peaks and valleys. Each fit has its own bandwidth chosen by leave-one-out CV. "
        "The edges still have few points, and there the local line follows their noise: its variance is "
        "larger. The table's edge columns show both effects on this sample. The shaded bands are 95 % "
        "pointwise confidence bands (exact standard errors, noise variance smoothed from the "
        "residuals): they cover the smoothed curve, not the truth where the fit is biased, which is "
        "why Nadaraya-Watson's misses the truth at x = 0; <code>confidence_band(method='rbc')</code> "
        "covers the truth, and <code>kind='simultaneous'</code> the whole curve at once.</p>"
        f"{figure}<table id='localtable'>{head}<tbody>{''.join(rows)}</tbody></table>"
        f"<p class='notes'>Validation MSE at the validation inputs; {edges}.</p></details>"
    )


def render_html(study: Study, *, title: str = "Attention pooling by similarity") -> str:
    """The report as one self-contained HTML string (no external resources).

    A kernel selector and a bandwidth slider (its positions include every kernel's CV choice,
    with a scale and a button that lands on it) switch the fitted curve, its validation MSE
    and the attention heatmap (with axes and a colour bar) among the study's states; the
    selector's LOWESS entry moves the slider over spans ``k / n`` instead, its CV choice of ``k``
    marked, the heatmap showing its tricube weights; below,
    the validation MSE table, one row per model (local linear and quadratic included), and a
    section on local linear beside Nadaraya-Watson (a figure of both with the left edge
    enlarged, and their errors at the edges and inside).

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
    cv_index = {k: _at(study.slider, float(sr.bandwidth[0])) for k, sr in study.searches.items()}
    data = {
        "xTrain": np.round(s.x_train, 4).tolist(),
        "yTrain": np.round(s.y_train, 4).tolist(),
        "xVal": np.round(s.x_val, 4).tolist(),
        "yVal": np.round(s.y_val, 4).tolist(),
        "qSorted": np.round(np.sort(s.x_val), 4).tolist(),
        "kSorted": np.round(np.sort(s.x_train), 4).tolist(),
        "slider": [float(f"{h:.6g}") for h in study.slider],
        "kernels": {},
        "m": int(s.x_val.size),
        "n": int(s.x_train.size),
    }
    for k in study.curves:
        pixels, top = _deflated_uint8(study.heatmaps[k])
        curve = study.curves[k]
        data["kernels"][k] = {
            "label": _label(k),
            "curves": np.round(curve, 3).tolist(),
            "mse": [float(f"{np.mean((c - s.y_val) ** 2):.4g}") for c in curve],
            "heat": pixels,
            "heatMax": top,
            "cv": float(study.searches[k].bandwidth[0]) if k in study.searches else None,
            "cvIndex": cv_index.get(k),
        }
    if study.lowess is not None:
        data["kernels"]["lowess"] = _lowess_entry(study)
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in study.notes)
    payload = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
    return (
        _TEMPLATE.replace("%%TITLE%%", html.escape(title))
        .replace("%%DATASET%%", html.escape(s.name or "data"))
        .replace("%%TABLE%%", _table(study, cv_index))
        .replace("%%LOCAL%%", _local_section(study))
        .replace("%%NOTES%%", f"<ul class='notes'>{notes}</ul>" if notes else "")
        .replace("%%DATA%%", payload)
    )


def _lowess_entry(study: Study) -> dict[str, object]:
    """The fit view's LOWESS entry: its own slider over the spans ``k / n``, the curves, MSEs and
    tricube weights at each, the CV choice of ``k``."""
    lw, s = study.lowess, study.split
    assert lw is not None
    pixels, top = _deflated_uint8(lw.weights)
    return {
        "label": "LOWESS (tricube, local linear, span)",
        "slider": [float(f"{v:.6g}") for v in lw.spans],
        "ks": lw.ks.tolist(),
        "curves": np.round(lw.curves, 3).tolist(),
        "mse": [float(f"{np.mean((c - s.y_val) ** 2):.4g}") for c in lw.curves],
        "heat": pixels,
        "heatMax": top,
        "cv": float(f"{lw.k_cv / lw.n:.6g}"),
        "cvIndex": lw.cv_index,
        "kCv": lw.k_cv,
    }


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
    >>> p.stat().st_size < 1_000_000
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
.controls{display:flex;gap:1.5rem 2rem;align-items:flex-start;flex-wrap:wrap;background:#f6f6f6;
 padding:.7rem 1rem;border-radius:8px}
.controls label{font-weight:600}
.slider{display:inline-flex;flex-direction:column;vertical-align:top}
#bw{width:340px;margin:0}
.scale{position:relative;width:340px;height:2.4rem;font-size:.75rem;color:#555}
.scale span{position:absolute;transform:translateX(-50%);white-space:nowrap}
.scale .tick{top:0} .scale .tick::before{content:"";position:absolute;left:50%;top:-3px;height:5px;
 border-left:1px solid #888}
#cvmark{top:1.15rem;color:#c0392b;font-weight:600}
#bwval{font-family:monospace;font-size:1.05rem;min-width:5ch;display:inline-block}
button{font:inherit;font-size:.85rem;padding:.1rem .5rem}
.panels{display:flex;gap:1.5rem;flex-wrap:wrap;margin-top:1rem}
.panel{flex:1 1 480px} .panel h2{font-size:1.05rem;margin:.3rem 0}
svg{background:#fff}
#fit{border:1px solid #ddd;border-radius:4px}
.heatbox{position:relative;width:520px;height:430px}
.heatbox svg,.heatbox canvas{position:absolute}
#heat{left:60px;top:10px;width:360px;height:360px;image-rendering:pixelated}
details{margin-top:1rem} summary{font-weight:600;font-size:1.1rem;cursor:pointer}
table{border-collapse:collapse;margin-top:.5rem;font-size:.9rem}
td,th{padding:.12rem .6rem;border-bottom:1px solid #e4e4e4;text-align:right}
td:first-child,th:first-child{text-align:left} td.note{text-align:center;color:#777}
.notes{color:#777} .stat{font-family:monospace} .prose{max-width:60rem;line-height:1.45}
#localfit{max-width:100%;height:auto;display:block;margin:.5rem 0}
</style></head><body>
<h1>%%TITLE%%</h1>
<p class="sub">Nadaraya-Watson regression on %%DATASET%%: each prediction is an attention-weighted
average of the training targets; the weights come from a kernel of (query - key) / h.</p>
<div class="controls">
 <span><label for="kernel">kernel</label> <select id="kernel"></select></span>
 <span class="slider"><span><label for="bw" id="bwlabel">bandwidth h</label> <span id="bwval"></span>
   <button id="cvbtn" type="button">go to the CV choice</button></span>
   <input type="range" id="bw" min="0" step="1" aria-describedby="scale">
   <span class="scale" id="scale"><span id="cvmark">&#9650; CV</span></span></span>
 <span>validation MSE <span id="mse" class="stat"></span></span>
</div>
<div class="panels">
 <div class="panel"><h2>Fit</h2>
  <svg id="fit" viewBox="0 0 520 400" width="520" height="400" role="img"
   aria-label="training data, truth and the fitted curve"></svg></div>
 <div class="panel"><h2>Attention weights</h2>
  <div class="heatbox"><svg id="heataxes" viewBox="0 0 520 430" width="520" height="430" role="img"
   aria-label="attention weights: validation inputs (rows) against training inputs (columns), sorted"></svg>
  <canvas id="heat"></canvas></div><p id="heatnote" class="notes"></p></div>
</div>
<details open><summary>Validation MSE</summary>
%%TABLE%%
</details>
%%LOCAL%%
%%NOTES%%
<script id="data" type="application/json">%%DATA%%</script>
<script>
"use strict";
const D = JSON.parse(document.getElementById("data").textContent);
const NS = "http://www.w3.org/2000/svg", $ = id => document.getElementById(id);
const sel = $("kernel"), bw = $("bw"), svg = $("fit"), hsvg = $("heataxes"), canvas = $("heat");
function el(name, attrs, parent, text) {
  const e = document.createElementNS(NS, name);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  parent.appendChild(e); if (text !== undefined) e.textContent = text; return e;
}
function niceStep(span, n) {
  const raw = span / n, p = Math.pow(10, Math.floor(Math.log10(raw))), f = raw / p;
  return (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * p;
}
function ticks(lo, hi, n) {
  const st = niceStep(hi - lo, n), out = [];
  for (let v = Math.ceil(lo / st - 1e-9) * st; v <= hi + 1e-9 * st; v += st) out.push(+v.toPrecision(12));
  return out;
}
const fmt = v => String(+v.toPrecision(6));
function domain(vals) {
  const lo = Math.min(...vals), hi = Math.max(...vals), st = niceStep(hi - lo, 5);
  return [Math.floor(lo / st) * st, Math.ceil(hi / st) * st];
}
/* the fit: axes with round ticks, labels, a legend above the plot */
const W = 520, H = 400, L = 50, R = 14, T = 30, B = 44;
const [x0, x1] = domain(D.xTrain.concat(D.xVal)), [y0, y1] = domain(D.yTrain.concat(D.yVal));
const sx = x => L + (x - x0) / (x1 - x0) * (W - L - R);
const sy = y => H - B - (y - y0) / (y1 - y0) * (H - T - B);
const small = {"font-size": 11, fill: "#555"};
for (const v of ticks(x0, x1, 5)) {
  el("line", {x1: sx(v), x2: sx(v), y1: T, y2: H - B, stroke: "#eee"}, svg);
  el("text", {...small, x: sx(v), y: H - B + 15, "text-anchor": "middle"}, svg, fmt(v));
}
for (const v of ticks(y0, y1, 5)) {
  el("line", {x1: L, x2: W - R, y1: sy(v), y2: sy(v), stroke: "#eee"}, svg);
  el("text", {...small, x: L - 6, y: sy(v) + 4, "text-anchor": "end"}, svg, fmt(v));
}
el("rect", {x: L, y: T, width: W - L - R, height: H - T - B, fill: "none", stroke: "#888"}, svg);
el("text", {x: (L + W - R) / 2, y: H - 8, "text-anchor": "middle", "font-size": 13}, svg, "x");
el("text", {x: 14, y: (T + H - B) / 2, "text-anchor": "middle", "font-size": 13,
            transform: `rotate(-90 14 ${(T + H - B) / 2})`}, svg, "y");
const pathOf = (x, y) => x.map((v, i) => (i ? "L" : "M") + sx(v).toFixed(1) + "," + sy(y[i]).toFixed(1))
  .join("");
el("path", {d: pathOf(D.xVal, D.yVal), fill: "none", stroke: "#111", "stroke-dasharray": "6 4",
            "stroke-width": 1.5, id: "truth"}, svg);
D.xTrain.forEach((x, i) => el("circle", {cx: sx(x), cy: sy(D.yTrain[i]), r: 3, fill: "#8c8c8c",
                                         "fill-opacity": 0.8}, svg));
const curve = el("path", {fill: "none", stroke: "#d62728", "stroke-width": 2.5, id: "curve"}, svg);
el("circle", {cx: L + 10, cy: 14, r: 3, fill: "#8c8c8c"}, svg);
el("line", {x1: L + 124, x2: L + 142, y1: 14, y2: 14, stroke: "#111", "stroke-dasharray": "6 4"}, svg);
el("line", {x1: L + 244, x2: L + 262, y1: 14, y2: 14, stroke: "#d62728", "stroke-width": 2.5}, svg);
["training data", "truth", "prediction"].forEach((name, i) =>
  el("text", {x: L + 20 + i * 126, y: 18, "font-size": 12}, svg, name));
/* the heatmap: canvas over an SVG with the axes and the colour bar */
const HL = 60, HT = 10, HS = 360, CB = HL + HS + 18;
const at = (sorted, v) => {  // fractional index where the sorted inputs reach v
  let i = 0; while (i < sorted.length - 2 && sorted[i + 1] < v) i++;
  const a = sorted[i], b = sorted[i + 1];
  return i + (b > a ? Math.min(Math.max((v - a) / (b - a), 0), 1) : 0);
};
function heatAxis(sorted, horiz) {
  for (const v of ticks(sorted[0], sorted[sorted.length - 1], 5)) {
    if (v < sorted[0] || v > sorted[sorted.length - 1]) continue;
    const p = (at(sorted, v) + 0.5) / sorted.length * HS;
    if (horiz) {
      el("line", {x1: HL + p, x2: HL + p, y1: HT + HS, y2: HT + HS + 4, stroke: "#555"}, hsvg);
      el("text", {...small, x: HL + p, y: HT + HS + 16, "text-anchor": "middle"}, hsvg, fmt(v));
    } else {
      el("line", {x1: HL - 4, x2: HL, y1: HT + p, y2: HT + p, stroke: "#555"}, hsvg);
      el("text", {...small, x: HL - 7, y: HT + p + 4, "text-anchor": "end"}, hsvg, fmt(v));
    }
  }
}
heatAxis(D.kSorted, true); heatAxis(D.qSorted, false);
el("rect", {x: HL, y: HT, width: HS, height: HS, fill: "none", stroke: "#888"}, hsvg);
el("text", {x: HL + HS / 2, y: HT + HS + 36, "text-anchor": "middle", "font-size": 13}, hsvg,
   "training input (key), sorted");
el("text", {x: 16, y: HT + HS / 2, "text-anchor": "middle", "font-size": 13,
            transform: `rotate(-90 16 ${HT + HS / 2})`}, hsvg, "validation input (query), sorted");
const ramp = [[255,245,240],[252,187,161],[251,106,74],[203,24,29],[103,0,13]];
function colour(t) {
  const f = t * (ramp.length - 1), i = Math.min(Math.floor(f), ramp.length - 2), u = f - i;
  return ramp[i].map((c, j) => Math.round(c + u * (ramp[i + 1][j] - c)));
}
for (let j = 0; j < 72; j++)  // the colour bar: 72 stripes of the ramp, bottom (0) to top
  el("rect", {x: CB, y: HT + HS - (j + 1) * HS / 72, width: 14, height: HS / 72 + 0.5,
              fill: `rgb(${colour((j + 0.5) / 72)})`}, hsvg);
el("rect", {x: CB, y: HT, width: 14, height: HS, fill: "none", stroke: "#888"}, hsvg);
el("text", {x: CB + 56, y: HT + HS / 2, "text-anchor": "middle", "font-size": 12,
            transform: `rotate(90 ${CB + 56} ${HT + HS / 2})`}, hsvg, "attention weight");
const cbTicks = el("g", {id: "cbticks"}, hsvg);
function colourBar(top) {
  cbTicks.replaceChildren();
  for (const v of ticks(0, top, 4)) {
    if (v > top * (1 + 1e-9)) continue;
    const y = HT + HS - v / top * HS;
    el("line", {x1: CB + 14, x2: CB + 18, y1: y, y2: y, stroke: "#555"}, cbTicks);
    el("text", {...small, x: CB + 21, y: y + 4}, cbTicks, fmt(v));
  }
}
canvas.width = D.n; canvas.height = D.m;
const ctx = canvas.getContext("2d");
const lut = Array.from({length: 256}, (_, v) => colour(v / 255));
const heat = {};
let heatErr = "";
async function inflate(b64) {
  const bin = Uint8Array.from(atob(b64), c => c.charCodeAt(0));
  const stream = new Blob([bin]).stream().pipeThrough(new DecompressionStream("deflate"));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}
/* the slider: one position per state, a scale at round bandwidths, the CV choice marked; an entry
   with its own grid (LOWESS: spans k / n) brings its own positions and scale */
let S = D.slider, N = S.length;
const frac = i => N > 1 ? i / (N - 1) : 0.5;
const place = (span, f) => { span.style.left = `calc(8px + ${f} * (100% - 16px))`; };
function fracOf(v) {  // fractional position of bandwidth v, log-interpolated between positions
  if (v <= S[0]) return 0; if (v >= S[N - 1]) return 1;
  let i = 0; while (S[i + 1] < v) i++;
  return frac(i + Math.log(v / S[i]) / Math.log(S[i + 1] / S[i]));
}
const scale = $("scale"), cvmark = $("cvmark");
function useGrid(grid) {  // the slider's positions and the scale's round ticks
  S = grid; N = S.length; bw.max = N - 1;
  for (const t of [...scale.querySelectorAll(".tick")]) t.remove();
  for (let e = Math.floor(Math.log10(S[0])); e <= Math.ceil(Math.log10(S[N - 1])); e++) {
    for (const m of [1, 2, 5]) {
      const v = +(m * Math.pow(10, e)).toPrecision(6);
      if (v < S[0] * (1 - 1e-9) || v > S[N - 1] * (1 + 1e-9)) continue;
      const t = document.createElement("span"); t.className = "tick"; t.textContent = fmt(v);
      place(t, fracOf(v)); scale.appendChild(t);
    }
  }
}
for (const k in D.kernels) {
  const o = document.createElement("option");
  o.value = k; o.textContent = D.kernels[k].label; sel.appendChild(o);
}
if (D.kernels.gaussian) sel.value = "gaussian";
const gridOf = k => D.kernels[k].slider || D.slider;
useGrid(gridOf(sel.value));
const first = D.kernels[sel.value].cvIndex;
bw.value = first !== null && first !== undefined ? first : Math.floor(N / 2);
function update() {
  const k = sel.value, i = +bw.value, K = D.kernels[k], cvAt = K.cvIndex;
  const none = k === "constant", span = !!K.ks;
  $("bwlabel").textContent = span ? "span k/n" : "bandwidth h";
  const lowessNote = "LOWESS: each query's tricube weights over its k nearest training points; " +
    "its local line reweights them.";
  $("heatnote").textContent = heatErr || (span ? lowessNote : "");
  const cvTag = i === cvAt ? (span ? ", CV choice" : " (CV choice)") : "";
  $("bwval").textContent = none ? "(none)"
    : S[i].toPrecision(3) + (span ? ` (k = ${K.ks[i]} of ${D.n}${cvTag})` : cvTag);
  curve.setAttribute("d", pathOf(D.xVal, K.curves[i]));
  $("mse").textContent = K.mse[i].toFixed(4);
  const hasCv = cvAt !== null && cvAt !== undefined;
  cvmark.style.display = hasCv ? "" : "none"; $("cvbtn").disabled = !hasCv;
  if (hasCv) { place(cvmark, frac(cvAt));
    cvmark.title = span ? `CV choice k = ${K.kCv} (span ${K.cv.toPrecision(4)})`
      : "CV choice h = " + K.cv.toPrecision(4); }
  colourBar(K.heatMax[i]);
  const px = heat[k];
  if (!px) return;
  const off = i * D.m * D.n, img = ctx.createImageData(D.n, D.m);
  for (let p = 0; p < D.m * D.n; p++) { const c = lut[px[off + p]];
    img.data[4 * p] = c[0]; img.data[4 * p + 1] = c[1]; img.data[4 * p + 2] = c[2];
    img.data[4 * p + 3] = 255; }
  ctx.putImageData(img, 0, 0);
}
sel.addEventListener("change", () => {  // into or out of an entry with its own grid: to its CV choice
  const K = D.kernels[sel.value];
  if (gridOf(sel.value) !== S) {
    useGrid(gridOf(sel.value));
    bw.value = K.cvIndex !== null && K.cvIndex !== undefined ? K.cvIndex : Math.floor(N / 2);
  }
  update();
});
bw.addEventListener("input", update);
$("cvbtn").addEventListener("click", () => {
  const c = D.kernels[sel.value].cvIndex; if (c !== null && c !== undefined) { bw.value = c; update(); }
});
update();
(async () => {
  try {
    const names = Object.keys(D.kernels);
    const planes = await Promise.all(names.map(k => inflate(D.kernels[k].heat)));
    names.forEach((k, j) => { heat[k] = planes[j]; });
  } catch (err) {
    heatErr = "This browser cannot unpack the heatmaps (" + err + ").";
  }
  update();
  document.body.dataset.ready = "1";
})();
</script>
</body></html>
"""
