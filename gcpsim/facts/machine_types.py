"""Compute Engine machine types: vCPUs, memory and the GPUs an accelerator-optimized type comes with,
as `machineTypes.get` answers them (guestCpus, memoryMb, accelerators[]), and the VM shapes behind
TPU hosts (GKE TPU node pools' machine types).

Each block names the Google page it follows; where that page was not in the stored material this
was written from, the row says which source was used instead.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MachineShape:
    name: str
    vcpus: int
    memory_gb: float
    bundled_gpu: str | None = None  # facts.gpus name; None: no GPU or attached ones (N1)
    bundled_gpu_count: int = 0
    shared_cpu: bool = False  # the shared-core types (e2-medium): machineTypes' isSharedCpu
    source: str = ""

    @property
    def family(self) -> str:
        return self.name.split("-", 1)[0]


_GENERAL = "https://cloud.google.com/compute/docs/general-purpose-machines"
_ACCEL = "https://cloud.google.com/compute/docs/accelerator-optimized-machines"
# The accelerator-optimized page was not readable in the stored material. A2, A3 and A4 shapes (vCPUs,
# GiB) were read instead in skypilot-org/skypilot-catalog catalogs/v8/gcp/vms.csv (commit 006059e0f18a, built
# from Compute's machineTypes.list): a2-highgpu-1g/2g/4g/8g 12/85, 24/170, 48/340, 96/680; a2-megagpu-16g
# 96/1360; a2-ultragpu-1g..8g 12/170 .. 96/1360; a3-highgpu-8g and a3-megagpu-8g 208/1872; a3-ultragpu-8g
# 224/2952; a4-highgpu-8g 224/3968; g2-standard-96 96/384 (the other G2 rows were not read). GPU counts:
# the -<n>g of A2/A3/A4 names; G2's (1, 1, 1, 1, 2, 1, 4, 8 from -4 to -96) are unverified.
_ACCEL_SOURCE = f"{_ACCEL} (not in stored material); shapes read in skypilot-catalog v8 gcp/vms.csv"
_G2_SOURCE = f"{_ACCEL} (not in stored material); g2-standard-96 read in skypilot-catalog, other G2 rows unverified"


def _general() -> list[MachineShape]:
    out: list[MachineShape] = []
    # N1: standard 3.75 GB per vCPU, highmem 6.5 GB per vCPU; GPUs are attached, not bundled.
    n1 = f"{_GENERAL}#n1_machines"
    out += [MachineShape(f"n1-standard-{v}", v, v * 3.75, source=n1) for v in (1, 2, 4, 8, 16, 32, 64, 96)]
    out += [MachineShape(f"n1-highmem-{v}", v, v * 6.5, source=n1) for v in (2, 4, 8, 16, 32, 64, 96)]
    # E2 and N2 standard: 4 GB per vCPU; e2-medium is a shared-core type (2 vCPUs, 4 GB).
    out.append(MachineShape("e2-medium", 2, 4, shared_cpu=True, source=f"{_GENERAL}#sharedcore"))
    out += [MachineShape(f"e2-standard-{v}", v, v * 4, source=f"{_GENERAL}#e2_machine_types") for v in (2, 4, 8, 16, 32)]
    out += [MachineShape(f"n2-standard-{v}", v, v * 4, source=f"{_GENERAL}#n2_machine_types") for v in (2, 4, 8, 16, 32)]
    return out


def _accelerator_optimized() -> list[MachineShape]:
    rows = (
        # G2: L4s, 4 GB per vCPU; g2-standard-32 has one GPU like g2-standard-16.
        ("g2-standard-4", 4, 16, "nvidia-l4", 1), ("g2-standard-8", 8, 32, "nvidia-l4", 1),
        ("g2-standard-12", 12, 48, "nvidia-l4", 1), ("g2-standard-16", 16, 64, "nvidia-l4", 1),
        ("g2-standard-24", 24, 96, "nvidia-l4", 2), ("g2-standard-32", 32, 128, "nvidia-l4", 1),
        ("g2-standard-48", 48, 192, "nvidia-l4", 4), ("g2-standard-96", 96, 384, "nvidia-l4", 8),
        # A2 Standard (A100 40GB) and A2 Ultra (A100 80GB).
        ("a2-highgpu-1g", 12, 85, "nvidia-tesla-a100", 1), ("a2-highgpu-2g", 24, 170, "nvidia-tesla-a100", 2),
        ("a2-highgpu-4g", 48, 340, "nvidia-tesla-a100", 4), ("a2-highgpu-8g", 96, 680, "nvidia-tesla-a100", 8),
        ("a2-megagpu-16g", 96, 1360, "nvidia-tesla-a100", 16),
        ("a2-ultragpu-1g", 12, 170, "nvidia-a100-80gb", 1), ("a2-ultragpu-2g", 24, 340, "nvidia-a100-80gb", 2),
        ("a2-ultragpu-4g", 48, 680, "nvidia-a100-80gb", 4), ("a2-ultragpu-8g", 96, 1360, "nvidia-a100-80gb", 8),
        # A3 High / Mega (H100), A3 Ultra (H200), A4 (B200): 8 GPUs each.
        ("a3-highgpu-8g", 208, 1872, "nvidia-h100-80gb", 8), ("a3-megagpu-8g", 208, 1872, "nvidia-h100-mega-80gb", 8),
        ("a3-ultragpu-8g", 224, 2952, "nvidia-h200-141gb", 8), ("a4-highgpu-8g", 224, 3968, "nvidia-b200", 8),
    )
    return [MachineShape(n, v, m, g, c, source=_G2_SOURCE if n.startswith("g2-") else _ACCEL_SOURCE)
            for n, v, m, g, c in rows]


MACHINE_TYPES: dict[str, MachineShape] = {m.name: m for m in _general() + _accelerator_optimized()}

# TPU hosts' VM shapes (vCPUs, memory GB).
# ct5lp-*: Compute's machine types as Cyclenerd/google-cloud-pricing-cost-calculator issue 89 lists them
# from machineTypes.list ("ct5lp-hightpu-1t;24;False;48.00", "-4t;112;...;192.00", "-8t;224;...;384.00"),
# pointing at https://cloud.google.com/kubernetes-engine/docs/concepts/tpus#v5e.
# ct6e-*, ct4p-*, ct5p-*: the TPU pages' VM tables (https://cloud.google.com/tpu/docs/v6e, /v4, /v5p,
# "TPU VM" configurations); not in the stored excerpts, which name the machine types only.
_CT5LP = "Cyclenerd/google-cloud-pricing-cost-calculator#89 (machineTypes.list)"
_TPU_VM_PAGES = "cloud.google.com/tpu/docs/v6e, /v4, /v5p VM tables (shapes not in stored excerpts)"
TPU_HOSTS: dict[str, MachineShape] = {m.name: m for m in (
    MachineShape("ct5lp-hightpu-1t", 24, 48, source=_CT5LP),
    MachineShape("ct5lp-hightpu-4t", 112, 192, source=_CT5LP),
    MachineShape("ct5lp-hightpu-8t", 224, 384, source=_CT5LP),
    MachineShape("ct6e-standard-1t", 44, 176, source=_TPU_VM_PAGES),
    MachineShape("ct6e-standard-4t", 180, 720, source=_TPU_VM_PAGES),
    MachineShape("ct6e-standard-8t", 180, 1440, source=_TPU_VM_PAGES),
    MachineShape("ct4p-hightpu-4t", 240, 407, source=_TPU_VM_PAGES),
    MachineShape("ct5p-hightpu-4t", 208, 448, source=_TPU_VM_PAGES),
)}
