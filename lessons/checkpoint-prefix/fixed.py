"""Checkpoint prefix: a checkpoint saved from the DDP-wrapped model, loaded for evaluation into a plain one.

Run it on 2 ranks:  distlab launch --nproc-per-node 2 broken.py
"""
import os
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

STEPS = 4
CKPT = os.path.join(os.environ.get("DISTLAB_RUN_DIR", "."), "checkpoints", "model.pt")  # one directory per distlab run


def make_model():
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))


def main():
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, device = dist.get_rank(), torch.device(f"cuda:{os.environ['LOCAL_RANK']}" if cuda else "cpu")
    torch.manual_seed(rank)
    model = DDP(make_model().to(device))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in range(STEPS):
        x, y = torch.randn(16, 32), torch.randint(0, 4, (16,))
        loss = nn.functional.cross_entropy(model(x.to(device)), y.to(device))
        opt.zero_grad(); loss.backward(); opt.step()
    if rank == 0:
        os.makedirs(os.path.dirname(CKPT), exist_ok=True)
        torch.save(model.module.state_dict(), CKPT)  # FIX: the model inside the wrapper: keys 0.weight, 0.bias, ...
        print(f"rank 0: saved {len(model.module.state_dict())} tensors, the first is {next(iter(model.module.state_dict()))}", flush=True)
    dist.barrier()

    # Evaluation (or fine-tuning, or serving) builds the plain model and loads the checkpoint into it.
    plain = make_model()
    plain.load_state_dict(torch.load(CKPT, map_location="cpu", weights_only=True))
    same = all(torch.equal(a.cpu(), b) for a, b in zip(model.module.state_dict().values(), plain.state_dict().values()))
    print(f"rank {rank}: loaded {len(plain.state_dict())} tensors into the plain model; same weights as trained: {same}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
