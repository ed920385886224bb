"""Genuinely uneven batches in a user's own loop (no step events): the data is split by hand into unequal shards
(`tensor_split` of 29 samples, batches of 5 with drop_last: 3 on rank 0, 2 on rank 1), so rank 1 leaves the loop
first and all-reduces the epoch's loss while rank 0 is still in its next step's gradient all-reduce."""
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset


def train_step(model, opt, x):
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()  # MARK:backward
    opt.step()
    return loss.detach()


def main():
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    data = torch.randn(29, 16)
    shard = torch.tensor_split(data, world)[rank]  # 15 and 14 samples
    loader = DataLoader(TensorDataset(shard), batch_size=5, drop_last=True)
    model = DDP(torch.nn.Linear(16, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    total = torch.zeros(1)
    for (x,) in loader:
        total += train_step(model, opt, x)
    dist.all_reduce(total)  # MARK:epoch_loss
    if rank == 0:
        print(f"epoch loss {total.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
