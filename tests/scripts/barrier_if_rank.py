"""Broken: rank 1 calls a barrier inside `if rank == 1:` while rank 0 all-reduces its gradients (same step count)."""
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(torch.nn.Linear(16, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        if rank == 1:
            dist.barrier()  # MARK:barrier
        loss = model(torch.randn(8, 16)).pow(2).mean()
        opt.zero_grad()
        loss.backward()  # MARK:backward
        opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
