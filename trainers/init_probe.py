"""Joins the process group and reports when it did: the launch benchmark's probe."""

import os
import time
from datetime import timedelta

import torch.distributed as dist

dist.init_process_group("gloo", timeout=timedelta(seconds=60))
print(f"INIT_DONE rank={os.environ['RANK']} t={time.time():.3f}", flush=True)
dist.barrier()
dist.destroy_process_group()
