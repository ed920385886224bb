"""FSDP reshard: FSDP2 state saved by 2 ranks, loaded again at 2 (a resume) and at 1 (evaluation on one machine).

Run it on 2 ranks:  distlab launch --nproc-per-node 2 broken.py
The 2 ranks train, save, and resume from the checkpoint; then rank 0 alone plays the evaluation job: one
process, no process group, the plain model.
"""
import os, time
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import fully_shard

STEPS = 4
CKPT = os.path.join(os.environ.get("DISTLAB_RUN_DIR", "."), "checkpoints")  # one directory per distlab run


def make_model():
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))


def sharded(model):
    "FSDP2: each Linear, then the whole model; every rank keeps 1/2 of each parameter."
    for layer in model:
        if isinstance(layer, nn.Linear): fully_shard(layer)
    return fully_shard(model)


def loss_on_fixed_batch(model, device):
    g = torch.Generator().manual_seed(1234)  # the same 64 samples in every process
    x, y = torch.randn(64, 32, generator=g), torch.randint(0, 4, (64,), generator=g)
    with torch.no_grad(): return nn.functional.cross_entropy(model(x.to(device)), y.to(device)).item()


def train():
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, device = dist.get_rank(), torch.device(f"cuda:{os.environ['LOCAL_RANK']}" if cuda else "cpu")
    if cuda: torch.cuda.set_device(device)
    torch.manual_seed(0)  # the same initial weights on every rank
    model = sharded(make_model().to(device))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    torch.manual_seed(1 + rank)  # each rank its own data
    for step in range(STEPS):
        x, y = torch.randn(16, 32), torch.randint(0, 4, (16,))
        loss = nn.functional.cross_entropy(model(x.to(device)), y.to(device))
        opt.zero_grad(); loss.backward(); opt.step()
    w, trained = model.state_dict()["0.weight"], loss_on_fixed_batch(model, device)
    print(f"rank {rank}: trained; 0.weight is a {type(w).__name__}, {tuple(w.to_local().shape)} of {tuple(w.shape)} here; "
          f"loss on the fixed batch {trained:.6f}", flush=True)
    os.makedirs(CKPT, exist_ok=True)
    t0 = time.perf_counter()
    torch.save(model.state_dict(), f"{CKPT}/model-rank{rank}.pt")  # BUG: this rank's half of each tensor, one file per rank
    dist.barrier()
    print(f"rank {rank}: saved in {time.perf_counter() - t0:.3f} s", flush=True)

    # The training job resumes at world 2: a fresh sharded model loads the checkpoint.
    again = sharded(make_model().to(device))
    again.load_state_dict(torch.load(f"{CKPT}/model-rank{rank}.pt", weights_only=True))  # BUG: works only at the same world size
    print(f"rank {rank}: resumed at world 2; loss on the fixed batch {loss_on_fixed_batch(again, device):.6f}", flush=True)
    dist.destroy_process_group()


def evaluate():
    "The evaluation job: one process on one machine, no process group, the plain model."
    plain = make_model()
    plain.load_state_dict(torch.load(f"{CKPT}/model-rank0.pt", weights_only=True))
    print(f"evaluation at world 1: loss on the fixed batch {loss_on_fixed_batch(plain, 'cpu'):.6f}", flush=True)


if __name__ == "__main__":
    train()
    if os.environ["RANK"] == "0": evaluate()  # rank 0 alone, after the training job's process group is gone
