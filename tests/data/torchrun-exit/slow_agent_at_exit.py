"""Every rank succeeds; rank 0 leaves last (its final save), and the agent of every other rank
is slow to leave: frozen for seconds while it waits in torchrun's exit barrier, as on a loaded
machine. So the agent that hosted the rendezvous store left while the others still needed it."""
import os
import subprocess
import time

import torch.distributed as dist

# The other agent notices its worker's exit within its monitor interval (1 s) and enters the
# exit barrier; it is frozen after IN_BARRIER seconds, before rank 0 has left, and for longer
# than rank 0 takes to.
IN_BARRIER, RANK_0_SAVES, FROZEN = 3, 8, 12

dist.init_process_group("gloo")
dist.barrier()
dist.destroy_process_group()
if os.environ["RANK"] == "0":
    time.sleep(RANK_0_SAVES)
else:
    agent = os.getppid()  # torchrun starts a script's workers itself
    subprocess.Popen(["sh", "-c", f"sleep {IN_BARRIER}; kill -STOP {agent}; sleep {FROZEN}; kill -CONT {agent}"],
                     start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL)
print("rank", os.environ["RANK"], "leaving", flush=True)
