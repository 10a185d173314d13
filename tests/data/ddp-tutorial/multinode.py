"""PyTorch's multi-node DDP tutorial as trainctl meets it, written for these tests (not a copy of
it): pytorch/examples distributed/ddp-tutorial-series/multinode.py, read at commit
17f4f9a5d66c6da5b348d032cd6a6e2410760952. What is kept is what decides whether it resumes:

- its command line, `multinode.py TOTAL_EPOCHS SAVE_EVERY [--batch_size N]`, run by torchrun;
- its snapshot: a relative `snapshot.pt` in the working directory, which rank 0 alone saves
  every SAVE_EVERY epochs ({"MODEL_STATE", "EPOCHS_RUN": the epoch just trained}) and which every
  rank loads when it starts, if the file exists where that rank looks;
- its data and model (2,048 random samples of 20 features, a Linear(20, 1), SGD at 1e-3, a
  DistributedSampler) and the lines it prints ("Loading snapshot", "Resuming training from
  snapshot at Epoch N", "[GPU<rank>] Epoch N | Batchsize: B | Steps: S", "Epoch N | Training
  snapshot saved at snapshot.pt").

The CPU port is the tutorial's own CPU branch: backend gloo, no device ids, nothing moved to a
GPU (the published file moves the model and batches to LOCAL_RANK, a CUDA device). With the
snapshot on each node's own disk, a restarted group resumes rank 0 at epoch N and the others at
0; with the experiment's `shared_dir: {links: [snapshot.pt]}`, every rank at N.
"""

import argparse
import os

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

SNAPSHOT = "snapshot.pt"


def restore(model: torch.nn.Module) -> int:
    """The epoch to start at: 0, or the one the snapshot says was run last (it runs again)."""
    if not os.path.exists(SNAPSHOT):
        return 0
    print("Loading snapshot")
    state = torch.load(SNAPSHOT, map_location="cpu")
    model.load_state_dict(state["MODEL_STATE"])
    print(f"Resuming training from snapshot at Epoch {state['EPOCHS_RUN']}")
    return state["EPOCHS_RUN"]


def train(total_epochs: int, save_every: int, batch_size: int) -> None:
    print("Running on device cpu")
    dist.init_process_group(backend="gloo")
    rank = int(os.environ["RANK"])
    data = TensorDataset(torch.rand(2048, 20), torch.rand(2048, 1))
    loader = DataLoader(data, batch_size=batch_size, shuffle=False, sampler=DistributedSampler(data))
    model = torch.nn.Linear(20, 1)
    first = restore(model)
    ddp = DistributedDataParallel(model)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=1e-3)
    for epoch in range(first, total_epochs):
        print(f"[GPU{rank}] Epoch {epoch} | Batchsize: {batch_size} | Steps: {len(loader)}")
        loader.sampler.set_epoch(epoch)
        for source, targets in loader:
            optimizer.zero_grad()
            F.cross_entropy(ddp(source), targets).backward()
            optimizer.step()
        if rank == 0 and epoch % save_every == 0:
            torch.save({"MODEL_STATE": model.state_dict(), "EPOCHS_RUN": epoch}, SNAPSHOT)
            print(f"Epoch {epoch} | Training snapshot saved at {SNAPSHOT}")
    dist.destroy_process_group()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("total_epochs", type=int, help="epochs in all")
    parser.add_argument("save_every", type=int, help="rank 0 saves the snapshot every this many epochs")
    parser.add_argument("--batch_size", default=32, type=int, help="samples per batch on each rank")
    args = parser.parse_args()
    train(args.total_epochs, args.save_every, args.batch_size)
