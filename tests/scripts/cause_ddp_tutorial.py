"""PyTorch's DDP tutorial, in its shape (a Trainer class, DistributedSampler, LOCAL_RANK and RANK read from torchrun's
environment), on CPU and gloo, with a barrier that only rank 1 reaches, at the end of epoch 1."""
import os
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


class Trainer:
    def __init__(self, model, train_data, optimizer, save_every):
        self.local_rank = int(os.environ["LOCAL_RANK"])
        self.global_rank = int(os.environ["RANK"])
        self.model = DDP(model)
        self.train_data, self.optimizer, self.save_every = train_data, optimizer, save_every

    def _run_batch(self, source, targets):
        self.optimizer.zero_grad()
        loss = F.cross_entropy(self.model(source), targets)
        loss.backward()  # MARK:backward
        self.optimizer.step()

    def _run_epoch(self, epoch):
        self.train_data.sampler.set_epoch(epoch)
        for source, targets in self.train_data:
            self._run_batch(source, targets)
        print(f"[rank {self.global_rank}] epoch {epoch} | steps: {len(self.train_data)}", flush=True)

    def train(self, max_epochs):
        for epoch in range(max_epochs):
            self._run_epoch(epoch)
            if int(os.environ["RANK"]) == 1 and epoch == 1:
                torch.distributed.barrier()  # MARK:barrier
            if self.local_rank == 0 and epoch % self.save_every == 0:
                print(f"epoch {epoch}: a snapshot would be saved here", flush=True)


def main(total_epochs=4, save_every=2, batch_size=8):
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(64, 20), torch.randint(0, 4, (64,)))
    loader = DataLoader(data, batch_size=batch_size, shuffle=False, sampler=DistributedSampler(data))
    model = torch.nn.Linear(20, 4)
    trainer = Trainer(model, loader, torch.optim.SGD(model.parameters(), lr=1e-3), save_every)
    trainer.train(total_epochs)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
