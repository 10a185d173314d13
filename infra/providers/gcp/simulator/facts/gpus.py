"""GPU accelerator types: GCE's names, what `acceleratorTypes.get` describes them as, the zones that
offer them and the counts an N1 VM may attach (empty: the GPU comes only bundled with its machine
types, A2/A3/A4/G2).

Sources:
- names and bundling: https://cloud.google.com/compute/docs/gpus ("GPU machine types": A4 nvidia-b200,
  A3 Ultra nvidia-h200-141gb, A3 Mega nvidia-h100-mega-80gb, A3 High nvidia-h100-80gb, A2 Ultra
  nvidia-a100-80gb, A2 Standard nvidia-tesla-a100, G2 nvidia-l4; N1 takes T4, V100, P100, P4);
  the same names in XPK's src/xpk/core/system_characteristics.py (gke_accelerator of h100-80gb-8,
  h100-mega-80gb-8, h200-141gb-8, b200-8, a100-40gb-*, l4-*).
- attachable counts on N1: https://cloud.google.com/compute/docs/gpus ("N1 general-purpose": T4 1, 2, 4;
  P100 1, 2, 4; V100 1, 2, 4, 8).
- zones: Google's GPU locations page (https://cloud.google.com/compute/docs/gpus/gpu-regions-zones) is
  NOT in the stored material this was written from. The zone lists below are unverified: they are
  the zones trainctl's stacks and tests place these GPUs in, kept so the simulated world offers them;
  where a Google listing was found for a zone it is named beside the row.
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
_UNVERIFIED_ZONES = "zones unverified (gpu-regions-zones page not in stored material)"
_US_CENTRAL = ("us-central1-a", "us-central1-b", "us-central1-c", "us-central1-f")

GPUS: dict[str, Gpu] = {g.name: g for g in (
    # T4 in us-east1-c: `gcloud compute accelerator-types list` output,
    # https://gist.github.com/cgpu/48a1f174f5c1283ca0daef0a8080cbd7 (nvidia-tesla-t4 | us-east1-c).
    Gpu("nvidia-tesla-t4", "T4", _US_CENTRAL + ("us-east1-c", "us-east1-d", "us-west1-a", "us-west1-b",
                                                "europe-west4-a", "europe-west4-b", "asia-east1-a"),
        (1, 2, 4), f"{_GPUS_PAGE} (N1: 1, 2, 4); {_UNVERIFIED_ZONES}"),
    Gpu("nvidia-tesla-v100", "V100", _US_CENTRAL + ("us-west1-a", "us-west1-b", "europe-west4-a", "europe-west4-b"),
        (1, 2, 4, 8), f"{_GPUS_PAGE} (N1: 1, 2, 4, 8); {_UNVERIFIED_ZONES}"),
    Gpu("nvidia-tesla-p100", "P100", ("us-central1-c", "us-central1-f", "us-east1-b", "us-west1-a", "us-west1-b",
                                      "europe-west4-a"),
        (1, 2, 4), f"{_GPUS_PAGE} (N1: 1, 2, 4); {_UNVERIFIED_ZONES}"),
    Gpu("nvidia-l4", "L4", ("us-central1-a", "us-central1-b", "us-central1-c", "us-east1-b", "us-east4-a",
                            "us-west1-a", "us-west1-b", "europe-west4-a", "europe-west4-b", "asia-east1-a"),
        (), f"{_GPUS_PAGE} (G2 only); {_UNVERIFIED_ZONES}"),
    Gpu("nvidia-tesla-a100", "A100 40GB", _US_CENTRAL + ("us-east1-b", "us-west1-b", "us-west4-b", "europe-west4-a",
                                                         "europe-west4-b", "asia-northeast1-a"),
        (), f"{_GPUS_PAGE} (A2 Standard only); {_UNVERIFIED_ZONES}"),
    Gpu("nvidia-a100-80gb", "A100 80GB", ("us-central1-a", "us-central1-c", "us-east4-c", "us-east5-b",
                                          "europe-west4-a", "asia-southeast1-c"),
        (), f"{_GPUS_PAGE} (A2 Ultra only); {_UNVERIFIED_ZONES}"),
    Gpu("nvidia-h100-80gb", "H100 80GB", ("us-central1-a", "us-central1-c", "us-east4-a", "us-east5-a", "us-west1-a",
                                          "europe-west4-b", "asia-northeast1-b"),
        (), f"{_GPUS_PAGE} (A3 High only); {_UNVERIFIED_ZONES}"),
    Gpu("nvidia-h100-mega-80gb", "H100 Mega 80GB", ("us-central1-a", "us-central1-c", "us-east4-a", "us-east5-a",
                                                    "europe-west4-b", "asia-northeast1-b"),
        (), f"{_GPUS_PAGE} (A3 Mega only); {_UNVERIFIED_ZONES}"),
    Gpu("nvidia-h200-141gb", "H200 141GB", ("us-central1-b", "us-east4-b", "us-east5-a", "us-west1-c",
                                            "europe-west1-b", "asia-south1-b"),
        (), f"{_GPUS_PAGE} (A3 Ultra only); {_UNVERIFIED_ZONES}"),
    Gpu("nvidia-b200", "B200", ("us-central1-b", "us-east4-b", "us-east5-a", "us-west2-c", "europe-west4-b",
                                "asia-northeast1-b"),
        (), f"{_GPUS_PAGE} (A4 only); {_UNVERIFIED_ZONES}"),
)}
