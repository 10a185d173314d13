"""Every rank succeeds; rank 0 is the last to leave, as when it writes the final checkpoint and
metrics: `trainctl launch --stack S -- python rank0_saves_last.py`."""
import os
import time

import torch.distributed as dist

dist.init_process_group("gloo")
dist.barrier()
dist.destroy_process_group()
if os.environ["RANK"] == "0":
    time.sleep(2)  # the final save
print("rank", os.environ["RANK"], "leaving", flush=True)
