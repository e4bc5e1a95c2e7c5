"""Learnable attention pooling: forward+backward time and peak memory against textbook dense code.

Workloads, each one forward and one backward at m = n (4096; 1024 with --quick), float32, CPU:

- additive attention, hidden 64: ``nadaraya.nn.AdditiveAttentionPooling`` (key chunks,
  recomputed in backward) against the textbook's dense layer (broadcast ``W_q q + W_k k`` to
  (m, n, hidden), tanh, scores, softmax, bmm);
- Gaussian kernel pooling, learnable ``w``: ``nadaraya.nn.KernelPooling`` (fused SDPA) and its
  chunked path against the textbook's dense ``softmax(-((q - k) w)^2 / 2) @ v``.

Time is the best wall-clock of a few steps (3; 2 at full size); peak memory is the largest sum
of live CPU allocations that torch's memory profiler records during one more step (inputs
excluded). A dense case whose estimated memory exceeds 70 % of the machine's available memory
is skipped and reported as such. ``--threads N`` sets torch's intra-op threads (default: torch's).
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from nadaraya.nn import AdditiveAttentionPooling, KernelPooling


def available_bytes() -> int:
    """MemAvailable from /proc/meminfo (or 8 GiB where there is none)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 8 * 2**30


def measure(step: Callable[[], None], repeat: int) -> tuple[float, int]:
    """Best seconds of ``repeat`` calls of ``step``, and the peak bytes one call allocates."""
    seconds = math.inf
    for _ in range(repeat):
        start = time.perf_counter()
        step()
        seconds = min(seconds, time.perf_counter() - start)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    events = sorted((e.start_ns(), e.nbytes()) for e in prof.profiler.kineto_results.events()
                    if e.name() == "[memory]")
    live = peak = 0
    for _, nbytes in events:
        live += nbytes
        peak = max(peak, live)
    return seconds, peak


class DenseAdditive(torch.nn.Module):
    """The textbook's additive attention: the (m, n, hidden) features are materialised."""

    def __init__(self, ours: AdditiveAttentionPooling) -> None:
        super().__init__()
        self.ours = ours  # shares the weights, so both compute the same function

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        features = torch.tanh(self.ours.W_q(q)[:, None, :] + self.ours.W_k(k)[None, :, :])
        scores = self.ours.w_v(features)[..., 0]
        return torch.bmm(torch.softmax(scores, dim=-1)[None], v[None])[0]


def dense_gaussian(layer: KernelPooling, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """The textbook's learnable kernel regression: softmax(-((q - k) w)^2 / 2) @ v, dense."""
    diff = (q[:, None, :] - k[None, :, :]) * layer.w
    return torch.bmm(torch.softmax(-0.5 * (diff * diff).sum(-1), dim=-1)[None], v[None])[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="m = n = 1024")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    repeat = 3 if args.quick else 2
    m = n = 1024 if args.quick else 4096
    hidden, d, p = 64, 2, 1
    torch.manual_seed(0)
    q, k, v = torch.rand(m, d) * 5, torch.rand(n, d) * 5, torch.randn(n, p)
    additive = AdditiveAttentionPooling(d, hidden)
    gauss = KernelPooling("gaussian", 0.5)
    chunked = KernelPooling("gaussian", 0.5, method="chunked")
    dense_add = DenseAdditive(additive)
    budget = int(available_bytes() * 0.7)

    def step(fn: Callable[..., torch.Tensor], module: torch.nn.Module) -> Callable[[], None]:
        def run() -> None:
            module.zero_grad()
            qq = q.clone().requires_grad_()
            fn(qq, k, v).square().sum().backward()

        return run

    cases = [
        ("additive, hidden 64", "nadaraya (chunks)", step(additive, additive), 0),
        ("additive, hidden 64", "textbook dense", step(dense_add, additive), 3 * m * n * hidden * 4),
        ("gaussian kernel", "nadaraya (SDPA)", step(gauss, gauss), 0),
        ("gaussian kernel", "nadaraya (chunks)", step(chunked, chunked), 0),
        ("gaussian kernel", "textbook dense",
         step(lambda a, b, c: dense_gaussian(gauss, a, b, c), gauss), 6 * m * n * d * 4),
    ]
    # warm up every path once on a small problem (first calls pay for dispatch and allocation)
    small = (q[:64], k[:64], v[:64])
    for fn in (additive, gauss, chunked, dense_add):
        fn(*small).sum().backward()
    dense_gaussian(gauss, *small).sum().backward()

    print(f"m = n = {m}, d = {d}, float32, forward + backward, torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads")
    print(f"{'workload':<22}{'implementation':<20}{'seconds':>9}{'peak MiB':>11}{'time ratio':>12}"
          f"{'memory ratio':>14}")
    results: dict[tuple[str, str], tuple[float, int]] = {}
    for workload, impl, run, need in cases:
        if need > budget:
            print(f"{workload:<22}{impl:<20}  skipped: needs about {need / 2**30:.1f} GiB, "
                  f"{budget / 2**30:.1f} GiB allowed")
            continue
        results[(workload, impl)] = measure(run, repeat)
    for workload, impl, _, _ in cases:
        if (workload, impl) not in results:
            continue
        secs, peak = results[(workload, impl)]
        base = results.get((workload, "textbook dense"))
        tr = f"{secs / base[0]:.3f}" if base else "n/a"
        mr = f"{peak / base[1]:.4f}" if base and base[1] else "n/a"
        print(f"{workload:<22}{impl:<20}{secs:>9.3f}{peak / 2**20:>11.1f}{tr:>12}{mr:>14}")
    print("ratios: this implementation / textbook dense, in the same run (below 1: faster, smaller)")
    dense_tensor = m * n * hidden * 4
    if ("additive, hidden 64", "nadaraya (chunks)") in results:
        peak = results[("additive, hidden 64", "nadaraya (chunks)")][1]
        print(f"additive peak / one (m, n, hidden) float32 tensor ({dense_tensor / 2**20:.0f} MiB): "
              f"{peak / dense_tensor:.4f}")
    return 0 if all(math.isfinite(s) for s, _ in results.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
