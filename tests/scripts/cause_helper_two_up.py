"""The collective sits two calls below the rank test, reached through a callback: train() calls log_metrics() under
`if args.rank == 0 and ...`, and log_metrics() calls the `reduce` it was given, sync_stats(), whose barrier only rank 0
reaches. Only the rank's stack shows that path: no line of this file calls sync_stats() by name."""
import argparse, os
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def sync_stats(stats):
    dist.barrier()  # MARK:barrier
    dist.all_reduce(stats)
    return stats / dist.get_world_size()


def log_metrics(step, loss, reduce):
    stats = reduce(torch.tensor([loss, 1.0]))
    print(f"step {step}: loss {stats[0].item():.4f}", flush=True)


def train(args):
    model = DDP(torch.nn.Linear(16, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(args.steps):
        loss = model(torch.randn(8, 16)).pow(2).mean()
        opt.zero_grad()
        loss.backward()  # MARK:backward
        opt.step()
        if args.rank == 0 and step % args.log_every == 1:
            log_metrics(step, loss.item(), reduce=sync_stats)  # MARK:log


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--rank", type=int, default=int(os.environ.get("RANK", 0)))
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--log-every", type=int, default=2)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    train(args)
    dist.destroy_process_group()
