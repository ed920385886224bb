"""An `is_main_process()` helper and an early return: save_checkpoint() leaves at once on the other ranks, and rank 0
then waits in a barrier "so that every rank sees the file"."""
import os, tempfile
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def is_main_process():
    return dist.get_rank() == 0


def save_checkpoint(model, step, path):
    if not is_main_process():
        return
    torch.save(model.module.state_dict(), path)
    dist.barrier()  # MARK:barrier


def main():
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    model = DDP(torch.nn.Linear(16, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    path = os.path.join(tempfile.gettempdir(), f"cause_ckpt_{os.getpid()}.pt")
    for step in range(6):
        loss = model(torch.randn(8, 16)).pow(2).mean()
        opt.zero_grad()
        loss.backward()  # MARK:backward
        opt.step()
        if step == 2:
            save_checkpoint(model, step, path)
    if os.path.exists(path): os.remove(path)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
