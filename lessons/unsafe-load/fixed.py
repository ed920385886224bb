"""Unsafe load: a checkpoint from elsewhere (a model hub, a shared drive, a colleague) loaded with
weights_only=False runs whatever its pickle names, in every rank, with the job's permissions.

Run it on 2 ranks:  distlab launch --nproc-per-node 2 broken.py   (bare: torchrun --nproc-per-node 2 broken.py)
"""
import os
import torch
import torch.distributed as dist
from torch import nn

FOLDER = os.path.join(os.environ.get("DISTLAB_RUN_DIR", "."), "checkpoints", "downloaded")  # one folder per distlab run
CKPT = os.path.join(FOLDER, "pretrained.pt")


def make_model():
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))


class Payload:
    "What a tampered file can carry: unpickling it calls exec(code)."
    def __init__(self, code): self.code = code
    def __reduce__(self): return (exec, (self.code,))


def plant(path):
    "Stands in for the file you downloaded: real weights, plus an object whose unpickling writes a marker file."
    marker = os.path.join(FOLDER, "code-ran-in-rank")
    code = f"import os; open({marker!r} + os.environ['RANK'], 'w').write(str(os.getpid()))"
    torch.save({"model": make_model().state_dict(), "note": Payload(code)}, path)


def main():
    dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    rank = dist.get_rank()
    if rank == 0:
        os.makedirs(FOLDER, exist_ok=True)
        plant(CKPT)
    dist.barrier()

    state = torch.load(CKPT, map_location="cpu", weights_only=True)  # FIX: tensors and plain data only: the planted object is refused
    model = make_model()
    model.load_state_dict(state["model"])
    print(f"rank {rank}: loaded {len(state['model'])} tensors from {os.path.basename(CKPT)}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
