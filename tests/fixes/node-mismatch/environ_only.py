"""The job each node of a two-node job runs: join the process group, all-reduce one number, print the sum.

Run it as two nodes of one rank each, from two shells (here both on 127.0.0.1; node 1 with its launch's variable):
    distlab launch --nnodes 2 --node-rank 0 --nproc-per-node 1 --master-addr 127.0.0.1 --master-port 29400 broken.py
    TORCH_DISTRIBUTED_DEBUG=DETAIL distlab launch --nnodes 2 --node-rank 1 --nproc-per-node 1 --master-addr 127.0.0.1 --master-port 29400 broken.py
`distlab run node-mismatch` starts both nodes' torchrun agents (node 1's launch exports TORCH_DISTRIBUTED_DEBUG=DETAIL).
"""
import os
import torch
import torch.distributed as dist


def main():
    os.environ.pop("TORCH_DISTRIBUTED_DEBUG", None)  # my fix: no debugging switch on any node
    dist.init_process_group("gloo")
    t = torch.tensor([float(dist.get_rank() + 1)])
    dist.all_reduce(t)  # 1 + 2 on two ranks
    print(f"node {os.environ['GROUP_RANK']} rank {dist.get_rank()}: sum {t.item():.0f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
