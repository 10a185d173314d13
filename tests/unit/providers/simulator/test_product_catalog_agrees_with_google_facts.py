"""The product's catalog (infra/spec/catalog.py) held against the simulator's own facts
(gcpsim/facts/), which are written from Google's pages: machine types (vCPUs,
memory, bundled GPUs), TPU hosts' VM shapes, GPUs (zones, N1 counts), TPU types (chips, chips a host,
hosts, topology, zones, runtimes, GKE machine type and label), zones, and Compute's quota metrics (per GPU
model, the GPU-family quota, vCPUs by family, disks).

A disagreement names the product's row and the simulator's source. Those already found and reported
are listed in KNOWN with the reason; the list may only shrink: a new disagreement fails, and so does
a listed one that no longer holds (remove it)."""

from __future__ import annotations

from typing import Iterator

import pytest

from gcpsim.facts import gpus, machine_types, quotas, tpus, zones
from infra.spec import catalog, gpu_quota

PRODUCT = "infra/spec/catalog.py"
SIM = "gcpsim/facts"

# (area, row, field/value) -> why it is a disagreement; reported to the lead (issue 43).
KNOWN: dict[tuple[str, str, str], str] = {
    ("gpus", "nvidia-b200", "zone us-east5-a"):
        "A4 (a4-highgpu-8g, B200) is listed in asia-northeast1-b, asia-southeast1-b, europe-north1-b, europe-west4-b, "
        "us-central1-b, us-east1-b, us-east4-b, us-south1-b, us-west2-c, us-west3-b/-c, not us-east5-a "
        "(skypilot-catalog v8 gcp/vms.csv; the product says its GPUDirect zones were not checked)",
}

Finding = tuple[tuple[str, str, str], str]


def _machine_findings() -> Iterator[Finding]:
    for name, m in catalog.MACHINES.items():
        sim = machine_types.MACHINE_TYPES.get(name)
        if sim is None:
            yield ("machines", name, "missing"), f"{PRODUCT} MACHINES[{name!r}] has no row in {SIM}/machine_types.py"
            continue
        ours = (m.vcpus, float(m.memory_gb), m.bundled_gpu, m.bundled_gpu_count)
        theirs = (sim.vcpus, float(sim.memory_gb), sim.bundled_gpu, sim.bundled_gpu_count)
        if ours != theirs:
            yield (("machines", name, "shape"),
                   f"{PRODUCT} MACHINES[{name!r}] (vCPUs, GB, GPU, count) = {ours}; "
                   f"{SIM}/machine_types.py = {theirs} (source: {sim.source})")
    for name, (vcpus, memory) in catalog.TPU_HOST_MACHINES.items():
        host = machine_types.TPU_HOSTS.get(name)
        if host is None or (host.vcpus, host.memory_gb) != (vcpus, memory):
            theirs = (host.vcpus, host.memory_gb) if host else "no row"
            yield (("machines", name, "shape"),
                   f"{PRODUCT} TPU_HOST_MACHINES[{name!r}] = {(vcpus, memory)}; {SIM}/machine_types.py TPU_HOSTS = "
                   f"{theirs} (source: {host.source if host else '-'})")


def _gpu_findings() -> Iterator[Finding]:
    for name, g in catalog.GPUS.items():
        sim = gpus.GPUS.get(name)
        if sim is None:
            yield ("gpus", name, "missing"), f"{PRODUCT} GPUS[{name!r}] has no row in {SIM}/gpus.py"
            continue
        for zone in sorted(set(g.zones) - set(sim.zones)):
            yield (("gpus", name, f"zone {zone}"),
                   f"{PRODUCT} GPUS[{name!r}] offers {zone}; {SIM}/gpus.py does not (source: {sim.source})")
        if tuple(g.attachable_counts) != sim.attachable_counts:
            yield (("gpus", name, "attachable counts"),
                   f"{PRODUCT} GPUS[{name!r}].attachable_counts = {g.attachable_counts}; {SIM}/gpus.py = "
                   f"{sim.attachable_counts} (source: {sim.source})")


def _family(name: str) -> str:
    """v5litepod-16 -> v5litepod-*: a zone list is the generation's, so it disagrees once, not per size."""
    return name.rsplit("-", 1)[0] + "-*"


def _tpu_findings() -> Iterator[Finding]:
    source = f"{SIM}/tpus.py"
    for name, t in catalog.TPUS.items():
        sim = tpus.TPUS.get(name)
        if sim is None:
            yield ("tpus", name, "missing"), f"{PRODUCT} TPUS[{name!r}] has no row in {source}"
            continue
        fields = ("chips", "chips_per_host", "hosts", "topology", "gke_machine_type", "gke_accelerator")
        for f in fields:
            if getattr(t, f) != getattr(sim, f):
                yield (("tpus", name, f),
                       f"{PRODUCT} TPUS[{name!r}].{f} = {getattr(t, f)!r}; {source} = {getattr(sim, f)!r} "
                       f"(source: {tpus.SHAPES_SOURCE})")
        for zone in sorted(set(t.zones) - set(sim.zones)):
            yield (("tpus", _family(name), f"zone {zone}"),
                   f"{PRODUCT} TPUS[{name!r}] offers {zone}; {source} does not: {sim.zones} "
                   f"(source: {tpus.ZONES_SOURCE})")
        for runtime in sorted(set(t.runtime_versions) - set(sim.runtime_versions)):
            yield (("tpus", _family(name), f"runtime {runtime}"),
                   f"{PRODUCT} TPUS[{name!r}] runs {runtime}; {source} does not (source: {tpus.RUNTIMES_SOURCE})")


def _zone_findings() -> Iterator[Finding]:
    for zone in sorted(set(catalog.ZONES) - set(zones.ZONES)):
        yield ("zones", zone, "missing"), f"{PRODUCT} ZONES has {zone}; {SIM}/zones.py does not"


def _gpu_quota_findings() -> Iterator[Finding]:
    source = f"{SIM}/quotas.py"
    for name, g in catalog.GPUS.items():
        sim = quotas.GPU_QUOTAS.get(name)
        if sim is None:
            yield ("quotas", name, "missing"), f"{PRODUCT} GPUS[{name!r}] has no row in {source} GPU_QUOTAS"
            continue
        preemptible = f"PREEMPTIBLE_{g.quota_metric}" if g.quota_metric else g.spot_quota_metric
        ours = (g.quota_metric or None, preemptible or None, g.quota_family or None)
        if ours != (sim.metric, sim.preemptible, sim.family):
            yield (("quotas", name, "metrics"),
                   f"{PRODUCT} GPUS[{name!r}] (metric, spot metric, gpu_family) = {ours}; {source} = "
                   f"{(sim.metric, sim.preemptible, sim.family)} (source: {sim.source})")


def _quota_findings() -> Iterator[Finding]:
    yield from _gpu_quota_findings()
    source = f"{SIM}/quotas.py"
    pairs = {"GPU_FAMILY_QUOTA": (catalog.GPU_FAMILY_QUOTA, quotas.FAMILY_METRIC),
             "GPU_FAMILY_QUOTA_ID": (gpu_quota.GPU_FAMILY_QUOTA_ID, quotas.FAMILY_QUOTA_ID),
             "GPUS_ALL_REGIONS": (catalog.GPUS_ALL_REGIONS, quotas.GPUS_ALL_REGIONS),
             "CPUS_ALL_REGIONS": (catalog.CPUS_ALL_REGIONS, quotas.CPUS_ALL_REGIONS),
             "CPU_QUOTA_METRICS": (catalog.CPU_QUOTA_METRICS, quotas.CPU_METRICS),
             "DISK_QUOTA_METRICS": (catalog.DISK_QUOTA_METRICS, quotas.DISK_METRICS)}
    for name, (ours, theirs) in pairs.items():
        if ours != theirs:
            yield ("quotas", name, "value"), f"{PRODUCT} {name} = {ours!r}; {source} = {theirs!r} (its docstring's sources)"


AREAS = {"machines": _machine_findings, "gpus": _gpu_findings, "tpus": _tpu_findings, "zones": _zone_findings,
         "quotas": _quota_findings}


@pytest.mark.parametrize("area", sorted(AREAS))
def test_the_products_catalog_agrees_with_the_simulators_facts_but_for_the_reported_ones(area: str) -> None:
    found = dict(AREAS[area]())
    new = [message for key, message in found.items() if key not in KNOWN]
    assert not new, "the product's catalog and Google's facts disagree:\n" + "\n".join(new)
    gone = [f"{key}: {why}" for key, why in KNOWN.items() if key[0] == area and key not in found]
    assert not gone, "these reported disagreements no longer hold; remove them from KNOWN:\n" + "\n".join(gone)


def test_every_known_disagreement_is_one_the_comparison_can_find() -> None:
    assert {key[0] for key in KNOWN} <= set(AREAS)
