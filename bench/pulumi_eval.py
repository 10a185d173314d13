"""Pulumi program evaluation under mocks as the cluster grows: 1 → 256 GPU VMs, and a v4-128 slice.

Prints seconds per size and the ratio to the 1-node run measured in this same process, so the
growth is visible on a noisy machine. Goal: 256 GPU nodes + a v4-128 slice in ≤ 10 s.
Run: .venv/bin/python bench/pulumi_eval.py
"""

from __future__ import annotations

import time

from infra.providers.gcp.program.mocks import evaluate
from infra.spec.cluster import ClusterSpec

BASE = {"provider": "gcp", "project": "bench-project", "ssh": {"source_ranges": ["203.0.113.0/24"]}}


def gpu_spec(nodes: int) -> ClusterSpec:
    return ClusterSpec.model_validate({**BASE, "name": f"bench-gpu-{nodes}", "zone": "us-central1-a",
                                       "kind": "vm", "nodes": nodes, "machine_type": "n1-standard-8",
                                       "gpu": {"type": "nvidia-tesla-t4", "count": 1}})


def timed(spec: ClusterSpec) -> tuple[float, int]:
    start = time.perf_counter()
    ev = evaluate(spec)
    return time.perf_counter() - start, len(ev.resources)


def main() -> None:
    evaluate(gpu_spec(1))  # warm imports so the baseline measures evaluation, not module loading
    base, _ = timed(gpu_spec(1))
    print(f"{'cluster':<28}{'resources':>10}{'seconds':>10}{'x 1-node':>10}")
    print(f"{'1 GPU VM':<28}{'':>10}{base:>10.2f}{1.0:>10.1f}")
    for n in (16, 64, 256):
        secs, count = timed(gpu_spec(n))
        print(f"{f'{n} GPU VMs':<28}{count:>10}{secs:>10.2f}{secs / base:>10.1f}")
    tpu = ClusterSpec.model_validate({**BASE, "name": "bench-tpu", "zone": "us-central2-b",
                                      "kind": "tpu", "tpu": {"type": "v4-128"}})
    secs_tpu, count = timed(tpu)
    print(f"{'v4-128 slice (16 hosts)':<28}{count:>10}{secs_tpu:>10.2f}{secs_tpu / base:>10.1f}")
    total = timed(gpu_spec(256))[0] + secs_tpu
    print(f"256 GPU VMs + v4-128: {total:.2f} s (goal <= 10 s): {'met' if total <= 10 else 'MISSED'}")


if __name__ == "__main__":
    main()
