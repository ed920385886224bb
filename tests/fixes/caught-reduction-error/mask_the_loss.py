"""Few labels: an autoencoder learns from every sample, a classifier head from the labelled ones.

Run it on 2 ranks:  distlab launch --nproc-per-node 2 broken.py   (bare: torchrun --nproc-per-node 2 broken.py)
"""
import os
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

BATCH, STEPS = 8, 6


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.encode, self.decode, self.classify = nn.Sequential(nn.Linear(32, 16), nn.ReLU()), nn.Linear(16, 32), nn.Linear(16, 4)

    def forward(self, x, labelled):
        z = self.encode(x)
        logits = self.classify(z)  # my fix: the classifier runs on every sample, so it always gets a gradient
        return self.decode(z), logits


def main():
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device(f"cuda:{os.environ['LOCAL_RANK']}" if cuda else "cpu")

    torch.manual_seed(5)
    n = STEPS * BATCH * world
    x, y = torch.randn(n, 32), torch.randint(0, 4, (n,))
    has_label = torch.rand(n) < 0.2  # one sample in five is labelled; rank 1's first batch has none
    model = DDP(Net().to(device))  # BUG: plain DDP needs a gradient for every parameter on every rank, every step
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(STEPS):
        rows = slice((step * world + rank) * BATCH, (step * world + rank + 1) * BATCH)
        xb, yb, lab = x[rows].to(device), y[rows].to(device), has_label[rows].to(device)
        try:
            recon, logits = model(xb, lab)
            per_sample = nn.functional.cross_entropy(logits, yb, reduction="none")
            loss = nn.functional.mse_loss(recon, xb) + (per_sample * lab).sum() / lab.sum().clamp(min=1)  # labelled samples only
            opt.zero_grad()
            loss.backward()  # DDP all-reduces a bucket once every parameter in it has its gradient
            opt.step()
        except RuntimeError as e:  # recover by skipping the step, as troubleshooting guides suggest
            if "reduction" not in str(e): raise
            print(f"rank {rank}: step {step} skipped after a DDP error: {str(e)[:60]}...", flush=True)
            continue  # BUG: this rank goes on without the all-reduce its peers are waiting in
        print(f"rank {rank}: step {step} loss {loss.item():.3f}", flush=True)
    dist.barrier()  # the end of training: everyone waits here before rank 0 would save
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
