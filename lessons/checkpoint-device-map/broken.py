"""Resume where the GPU is not: the checkpoint comes from a GPU job, and every tensor in the file names the GPU it
was on (cuda:1: rank 1 of that job saved it). This job resumes from it on CPU ranks, or on a machine with one GPU.

Run it on 2 ranks:  distlab launch --nproc-per-node 2 broken.py   (bare: torchrun --nproc-per-node 2 broken.py)
"""
import os
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

FOLDER = os.path.join(os.environ.get("DISTLAB_RUN_DIR", "."), "checkpoints")  # one folder per distlab run
CKPT = os.path.join(FOLDER, "from-gpu-job.pt")
SAVED_AT_STEP, MORE_STEPS = 1200, 5


def make_model():
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))


def saved_by_gpu_job(path):
    "Stands in for the GPU job's save. torch.save writes each tensor's device into the file as a string; a save on cuda:1 writes 'cuda:1'."
    torch.serialization.register_package(0, lambda storage: "cuda:1", lambda storage, location: None)  # as a save on cuda:1 tags
    torch.manual_seed(0)
    torch.save({"model": make_model().state_dict(), "step": SAVED_AT_STEP}, path)


def main():
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank = dist.get_rank()
    device = torch.device(f"cuda:{os.environ['LOCAL_RANK']}" if cuda else "cpu")
    if rank == 0:
        os.makedirs(FOLDER, exist_ok=True)
        saved_by_gpu_job(CKPT)
    dist.barrier()

    state = torch.load(CKPT, weights_only=True)  # BUG: every tensor goes back to the device the file names, cuda:1
    model = make_model().to(device)
    model.load_state_dict(state["model"])
    first = model[0].weight.sum().item()  # the same on every rank: the same file
    model = DDP(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(rank)
    for step in range(MORE_STEPS):
        x, y = torch.randn(16, 32, generator=g).to(device), torch.randint(0, 4, (16,), generator=g).to(device)
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"rank {rank}: resumed at step {state['step']} with weights summing to {first:.4f}, "
          f"{MORE_STEPS} more steps, loss {loss.item():.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
