"""Cloud TPU accelerator types: chips, chips per VM, topology, zones, runtime versions, the GKE
machine type of a TPU slice node pool and its `cloud.google.com/gke-tpu-accelerator` label, and the
TPU API's quota ids.

Sources:
- shapes, VMs and GKE machine types: https://cloud.google.com/tpu/docs/v6e ("Supported configurations":
  1x1 ct6e-standard-1t, 2x2 ct6e-standard-4t, 2x4 one VM ct6e-standard-8t, 4x4 and larger
  ct6e-standard-4t with 4 chips a VM); v5e taken to have the same 2D shapes and VM split (the v6e page: v6e "shares many
  similarities with v5e", 256-chip Pods, 8 chips a host; v5e's own table, https://cloud.google.com/tpu/docs/v5e,
  is not in the stored excerpt) with ct5lp-hightpu-1t/-4t/-8t (the machine types Compute lists,
  Cyclenerd/google-cloud-pricing-cost-calculator#89, citing kubernetes-engine/docs/concepts/tpus#v5e); XPK src/xpk/core/system_characteristics.py for
  the multi-host machine types (ct5lp-hightpu-4t, ct6e-standard-4t, ct4p-hightpu-4t, ct5p-hightpu-4t),
  the labels (tpu-v5-lite-podslice, tpu-v6e-slice, tpu-v4-podslice, tpu-v5p-slice), 4 chips a VM
  (compute_chips_per_vm), v4/v5p names counting TensorCores, 2 a chip (tensorcores_per_chip=2), and
  their default 3D topologies (2x2x1, 2x2x2, 2x2x4, 2x4x4, 4x4x4, 4x4x8, 4x8x8, 8x8x8).
- zones: https://cloud.google.com/tpu/docs/regions lists the main zones (US: v6e us-central1-b, us-east1-d,
  us-east5-a, us-east5-b; v5p us-central1-a, us-east5-a; v5e us-central1-a, us-south1-a, us-west1-c,
  us-west4-a; v4 us-central2-b; Europe: v6e europe-west4-a; the other Europe and Asia rows are cut off in
  the stored excerpts). Where the API offers the types is wider: skypilot-org/skypilot-catalog
  catalogs/v8/gcp/vms.csv (commit 006059e0f18a), built from the TPU API's listings and SKUs, has a row per
  zone (",,,tpu-v5litepod-1,..." etc.), a superset of the page's; the tables below are those rows (v5e from
  the v5litepod-1/-4 rows, v6e from the v6e rows, v5p from its rows, v4 us-central2-b).
- runtime versions: https://cloud.google.com/tpu/docs/runtimes ("PyTorch and JAX": v6e v2-alpha-tpuv6e,
  v5p v2-alpha-tpuv5, v5e v2-alpha-tpuv5-lite, v4 and older tpu-ubuntu2204-base; TensorFlow's are named
  tpu-vm-tf-x.y.z[-pod][-{device_api}], -pod for multi-host slices, e.g. -pjrt). The TF 2.18.0 builds
  and v4's tpu-vm-v4-base are not in the stored excerpt (its TF list stops at 2.16.1): unverified.
- quota ids: the TPU API's errors, as tpu.py's docstring cites them (marin-community/marin#1612 and
  the per-generation ids), counted in chips (v5e, v6e) or TensorCores (v4, v5p).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TpuType:
    name: str  # acceleratorType as the TPU API takes it
    generation: str
    chips: int
    chips_per_host: int  # chips a VM of the slice has
    topology: str
    zones: tuple[str, ...]
    runtime_versions: tuple[str, ...]
    gke_machine_type: str
    gke_accelerator: str

    @property
    def hosts(self) -> int:
        return max(1, self.chips // self.chips_per_host)

    @property
    def multi_host(self) -> bool:
        return self.hosts > 1


_TF = ("tpu-vm-tf-2.18.0-pjrt", "tpu-vm-tf-2.18.0-pod-pjrt")
_2D = {1: "1x1", 4: "2x2", 8: "2x4", 16: "4x4", 32: "4x8", 64: "8x8", 128: "8x16", 256: "16x16"}
_3D = {4: "2x2x1", 8: "2x2x2", 16: "2x2x4", 32: "2x4x4", 64: "4x4x4", 128: "4x4x8", 256: "4x8x8", 512: "8x8x8"}

# Where the zones and runtimes come from, for messages that name the simulator's side.
ZONES_SOURCE = "https://cloud.google.com/tpu/docs/regions; skypilot-catalog v8 gcp/vms.csv (the TPU API's zones)"
RUNTIMES_SOURCE = "https://cloud.google.com/tpu/docs/runtimes"
SHAPES_SOURCE = "https://cloud.google.com/tpu/docs/v6e, /v5e and XPK src/xpk/core/system_characteristics.py"

_V5E_ZONES = ("asia-east1-a", "asia-east1-b", "asia-east1-c", "asia-northeast1-b", "asia-southeast1-b",
              "europe-north1-a", "europe-north1-c", "europe-west1-b", "europe-west1-c", "europe-west3-c",
              "europe-west4-a", "europe-west4-b", "northamerica-northeast1-b", "southamerica-west1-b",
              "southamerica-west1-c", "us-central1-a", "us-east1-b", "us-east1-c", "us-east4-b", "us-east5-a",
              "us-east5-b", "us-east5-c", "us-south1-a", "us-south1-b", "us-west1-c", "us-west4-a", "us-west4-b")
_V6E_ZONES = ("asia-east1-c", "asia-northeast1-b", "asia-south1-b", "asia-south1-c", "asia-southeast1-b",
              "europe-west4-a", "southamerica-east1-c", "southamerica-west1-a", "us-central1-a", "us-central1-b",
              "us-central1-c", "us-central2-b", "us-east1-d", "us-east4-a", "us-east5-a", "us-east5-b", "us-east5-c",
              "us-south1-a", "us-south1-c", "us-west1-c")
_V5P_ZONES = ("europe-west1-b", "europe-west1-d", "europe-west4-b", "us-central1-a", "us-east1-d", "us-east5-a",
              "us-east5-b", "us-east5-c", "us-south1-a", "us-south1-b", "us-south1-c")
_V4_ZONES = ("us-central2-b",)


def _two_d(prefix: str, generation: str, machine: str, label: str, zones: tuple[str, ...],
           runtimes: tuple[str, ...]) -> list[TpuType]:
    out = []
    for chips, topology in _2D.items():
        per_vm = chips if chips <= 8 else 4  # 1x1, 2x2, 2x4 on one VM; larger slices 4 chips a VM
        out.append(TpuType(f"{prefix}-{chips}", generation, chips, per_vm, topology, zones, runtimes,
                           f"{machine}-{per_vm}t", label))
    return out


def _three_d(prefix: str, generation: str, machine: str, label: str, zones: tuple[str, ...],
             runtimes: tuple[str, ...], largest: int) -> list[TpuType]:
    return [TpuType(f"{prefix}-{chips * 2}", generation, chips, 4, topology, zones, runtimes, machine, label)
            for chips, topology in _3D.items() if chips <= largest]


TPUS: dict[str, TpuType] = {t.name: t for t in (
    _two_d("v5litepod", "v5e", "ct5lp-hightpu", "tpu-v5-lite-podslice", _V5E_ZONES, ("v2-alpha-tpuv5-lite",) + _TF)
    + _two_d("v6e", "v6e", "ct6e-standard", "tpu-v6e-slice", _V6E_ZONES, ("v2-alpha-tpuv6e",) + _TF)
    + _three_d("v4", "v4", "ct4p-hightpu-4t", "tpu-v4-podslice", _V4_ZONES,
               ("tpu-ubuntu2204-base", "tpu-vm-v4-base") + _TF, 512)
    + _three_d("v5p", "v5p", "ct5p-hightpu-4t", "tpu-v5p-slice", _V5P_ZONES, ("v2-alpha-tpuv5",) + _TF, 128)
)}

# (on-demand, spot) quota ids per generation, as the TPU API's quota errors name them.
QUOTA_IDS = {"v5e": ("TPUV5sLitepodPerProjectPerZoneForTPUAPI", "TPUV5sPreemptibleLitepodPerProjectPerZoneForTPUAPI"),
             "v6e": ("TPUV6EPerProjectPerZoneForTPUAPI", "TPUV6EPreemptiblePerProjectPerZoneForTPUAPI"),
             "v4": ("TPUV4sPodPerProjectPerZoneForTPUAPI", "TPUV4sPreemptiblePodPerProjectPerZoneForTPUAPI"),
             "v5p": ("TPUV5PPerProjectPerZoneForTPUAPI", "TPUV5PPreemptiblePerProjectPerZoneForTPUAPI")}
TENSORCORE_COUNTED = ("v4", "v5p")  # their quota (and their names) count TensorCores, 2 a chip


def quota_units(t: TpuType) -> int:
    return t.chips * 2 if t.generation in TENSORCORE_COUNTED else t.chips


def quota_id(t: TpuType, spot: bool) -> str:
    return QUOTA_IDS[t.generation][1 if spot else 0]
