"""GPU accelerator types: GCE's names, what `acceleratorTypes.get` describes them as, the zones that
offer them and the counts an N1 VM may attach (empty: the GPU comes only bundled with its machine
types, A2/A3/A4/G2).

Sources:
- names and bundling: https://cloud.google.com/compute/docs/gpus ("GPU machine types": A4 nvidia-b200,
  A3 Ultra nvidia-h200-141gb, A3 Mega nvidia-h100-mega-80gb, A3 High nvidia-h100-80gb, A2 Ultra
  nvidia-a100-80gb, A2 Standard nvidia-tesla-a100, G2 nvidia-l4; N1 takes T4, V100, P100, P4);
  the same names in XPK's src/xpk/core/system_characteristics.py (gke_accelerator of h100-80gb-8,
  h100-mega-80gb-8, h200-141gb-8, b200-8, a100-40gb-*, l4-*).
- attachable counts on N1: https://cloud.google.com/compute/docs/gpus ("N1 general-purpose"; the page's
  table is not in the stored excerpt), checked against the listing below's count rows: P100 1, 2, 4 and
  V100 4, 8 read there, T4 1, 2 read (T4 4 and V100 1, 2 not read).
- zones: Google's GPU locations page (https://cloud.google.com/compute/docs/gpus/gpu-regions-zones) is
  not in the stored material. Instead: skypilot-org/skypilot-catalog catalogs/v8/gcp/vms.csv (commit
  006059e0f18a), built from Compute's machineTypes / acceleratorTypes listings, one row per zone: the
  ",,,<GPU>,<count>" rows for N1's GPUs and the A2/A3/A4 machine types' rows for bundled ones. Where a
  row below has a zone that listing was not read for, its comment says so.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Gpu:
    name: str  # the accelerator type GCE takes (acceleratorTypes/<name>)
    label: str  # the model as GCE's description names it ("NVIDIA <label>")
    zones: tuple[str, ...]
    attachable_counts: tuple[int, ...] = ()  # N1 counts; empty = bundled only
    source: str = ""


_GPUS_PAGE = "https://cloud.google.com/compute/docs/gpus"
_LISTING = "zones: skypilot-catalog v8 gcp/vms.csv"
_US_CENTRAL = ("us-central1-a", "us-central1-b", "us-central1-c", "us-central1-f")

GPUS: dict[str, Gpu] = {g.name: g for g in (
    Gpu("nvidia-tesla-t4", "T4", (
        "asia-east1-a", "asia-east1-c", "asia-east2-a", "asia-east2-c", "asia-northeast1-a", "asia-northeast1-c",
        "asia-northeast3-b", "asia-northeast3-c", "asia-south1-a", "asia-south1-b", "asia-southeast1-a",
        "asia-southeast1-b", "asia-southeast1-c", "asia-southeast2-a", "asia-southeast2-b", "australia-southeast1-a",
        "australia-southeast1-c", "europe-central2-b", "europe-central2-c", "europe-west1-b", "europe-west1-c",
        "europe-west1-d", "europe-west2-a", "europe-west2-b", "europe-west3-b", "europe-west4-a", "europe-west4-b",
        "europe-west4-c", "me-west1-b", "me-west1-c", "northamerica-northeast1-c", "southamerica-east1-a",
        "southamerica-east1-b", "southamerica-east1-c") + _US_CENTRAL + (
        "us-east1-b", "us-east1-c", "us-east1-d", "us-east4-a", "us-east4-b", "us-east4-c", "us-west1-a", "us-west1-b",
        "us-west2-b", "us-west2-c", "us-west3-b", "us-west4-a", "us-west4-b"),
        (1, 2, 4), f"{_GPUS_PAGE} (N1: 1, 2, 4); {_LISTING} (T4 rows)"),
    Gpu("nvidia-tesla-v100", "V100", ("asia-east1-c", "europe-west4-a", "europe-west4-b", "europe-west4-c") + _US_CENTRAL
        + ("us-east1-b", "us-east1-c", "us-west1-a", "us-west1-b"),
        (1, 2, 4, 8), f"{_GPUS_PAGE} (N1: 1, 2, 4, 8); {_LISTING} (V100 rows)"),
    Gpu("nvidia-tesla-p100", "P100", ("asia-east1-a", "asia-east1-c", "australia-southeast1-b", "europe-west1-b",
                                      "europe-west1-d", "europe-west4-a", "us-central1-c", "us-central1-f", "us-east1-b",
                                      "us-east1-c", "us-west1-a", "us-west1-b"),
        (1, 2, 4), f"{_GPUS_PAGE} (N1: 1, 2, 4); {_LISTING} (P100 rows)"),
    # L4: the listing's L4 rows from europe-west3-b on were read; asia-east1-a (trainctl's) was not checked.
    Gpu("nvidia-l4", "L4", ("asia-east1-a", "europe-west3-b", "europe-west4-a", "europe-west4-b", "europe-west4-c",
                            "europe-west6-b", "europe-west6-c", "me-central2-a", "me-central2-c",
                            "northamerica-northeast1-b", "northamerica-northeast1-c", "northamerica-northeast2-a",
                            "northamerica-northeast2-b", "us-central1-a", "us-central1-b", "us-central1-c",
                            "us-east1-b", "us-east1-c", "us-east1-d", "us-east4-a", "us-east4-c", "us-west1-a",
                            "us-west1-b", "us-west1-c", "us-west4-a", "us-west4-c"),
        (), f"{_GPUS_PAGE} (G2 only); {_LISTING} (L4 rows, partly)"),
    Gpu("nvidia-tesla-a100", "A100 40GB", (
        "asia-northeast1-a", "asia-northeast1-c", "asia-northeast3-a", "asia-northeast3-b", "asia-southeast1-a",
        "asia-southeast1-b", "asia-southeast1-c", "europe-west4-a", "europe-west4-b", "me-west1-a", "me-west1-c")
        + _US_CENTRAL + ("us-east1-b", "us-west1-b", "us-west3-b", "us-west4-b"),
        (), f"{_GPUS_PAGE} (A2 Standard only); {_LISTING} (a2-highgpu-1g rows)"),
    Gpu("nvidia-a100-80gb", "A100 80GB", ("asia-southeast1-c", "europe-west4-a", "us-central1-a", "us-central1-c",
                                          "us-east4-c", "us-east5-a", "us-east5-b"),
        (), f"{_GPUS_PAGE} (A2 Ultra only); {_LISTING} (a2-ultragpu-1g rows)"),
    Gpu("nvidia-h100-80gb", "H100 80GB", (
        "asia-east1-c", "asia-northeast1-b", "asia-south1-c", "asia-south2-b", "asia-southeast1-b", "asia-southeast1-c",
        "australia-southeast1-c", "europe-north1-c", "europe-west1-b", "europe-west1-c", "europe-west3-c",
        "europe-west4-b", "europe-west4-c", "europe-west9-c", "us-central1-a", "us-central1-b", "us-central1-c",
        "us-east4-a", "us-east4-b", "us-east4-c", "us-east5-a", "us-west1-a", "us-west1-b", "us-west4-a"),
        (), f"{_GPUS_PAGE} (A3 High only); {_LISTING} (a3-highgpu-8g rows)"),
    Gpu("nvidia-h100-mega-80gb", "H100 Mega 80GB", (
        "asia-east1-c", "asia-northeast1-b", "asia-southeast1-b", "asia-southeast1-c", "australia-southeast1-c",
        "europe-north1-c", "europe-west1-b", "europe-west1-c", "europe-west3-c", "europe-west4-b", "europe-west4-c",
        "us-central1-a", "us-central1-b", "us-central1-c", "us-east4-a", "us-east4-b", "us-east4-c", "us-east5-a",
        "us-west1-a", "us-west1-b", "us-west4-a"),
        (), f"{_GPUS_PAGE} (A3 Mega only); {_LISTING} (a3-megagpu-8g rows)"),
    Gpu("nvidia-h200-141gb", "H200 141GB", ("asia-south1-b", "asia-south2-c", "europe-west1-b", "europe-west4-a",
                                            "us-central1-b", "us-east4-b", "us-east5-a", "us-south1-b", "us-west1-c"),
        (), f"{_GPUS_PAGE} (A3 Ultra only); {_LISTING} (a3-ultragpu-8g rows)"),
    Gpu("nvidia-b200", "B200", ("asia-northeast1-b", "asia-southeast1-b", "europe-north1-b", "europe-west4-b",
                                "us-central1-b", "us-east1-b", "us-east4-b", "us-south1-b", "us-west2-c", "us-west3-b",
                                "us-west3-c"),
        (), f"{_GPUS_PAGE} (A4 only); {_LISTING} (a4-highgpu-8g and B200 rows)"),
)}
