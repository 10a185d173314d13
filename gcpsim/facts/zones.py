"""The zones the simulated Compute Engine has: every zone where facts/gpus.py or facts/tpus.py offers
an accelerator (CPU machine types exist in all of them). Zone names are the region's plus a letter:
https://cloud.google.com/compute/docs/regions-zones ("Each zone name contains two parts")."""

from __future__ import annotations

from gcpsim.facts.gpus import GPUS
from gcpsim.facts.tpus import TPUS

ZONES: tuple[str, ...] = tuple(sorted({z for g in GPUS.values() for z in g.zones}
                                      | {z for t in TPUS.values() for z in t.zones}))
TPU_ZONES: tuple[str, ...] = tuple(sorted({z for t in TPUS.values() for z in t.zones}))
