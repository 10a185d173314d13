"""Every rank's work is done; rank 1 then dies of SIGABRT as its interpreter exits, as gloo's
worker thread racing interpreter shutdown after destroy_process_group() does now and then."""
import atexit
import os
import time

import torch.distributed as dist

dist.init_process_group("gloo")
dist.barrier()
dist.destroy_process_group()
if os.environ["RANK"] == "1":
    time.sleep(1)  # the others have finished by now
    atexit.register(os.abort)
print("rank", os.environ["RANK"], "leaving", flush=True)
