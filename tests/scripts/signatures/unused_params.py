"""DDP without find_unused_parameters on a model whose `aux` head takes no part in the loss: the second
iteration raises "Expected to have finished reduction in the prior iteration" (with TORCH_DISTRIBUTED_DEBUG=DETAIL
the message names the parameters)."""
import torch, torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(8, 16)
        self.head = nn.Linear(16, 1)
        self.aux = nn.Linear(16, 4)   # defined, never used in forward
    def forward(self, x): return self.head(torch.relu(self.body(x)))

def main():
    dist.init_process_group("gloo")
    try:
        model = DDP(Net())
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(3):
            loss = model(torch.randn(4, 8)).sum()
            opt.zero_grad(); loss.backward(); opt.step()
            print(f"rank {dist.get_rank()} step {step} done", flush=True)
    finally:
        dist.destroy_process_group()

if __name__ == "__main__": main()
