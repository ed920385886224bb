"""DataLoader workers' memory grows: a corpus kept as Python strings, read by forked workers.

Each rank loads the corpus (one string per document, as a JSON-lines file gives it) and trains a small
character-level classifier on the first characters of each document for a few epochs, with persistent
DataLoader workers (forked: Linux's default).
Run it on 2 ranks:  distlab launch --nproc-per-node 2 broken.py   (bare: torchrun --nproc-per-node 2 broken.py)
Under distlab, each rank's health samples record its workers' memory: resident (RSS), proportional (PSS), private (USS).
"""
import gc, os
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, DistributedSampler

DOCS, CHARS, CONTEXT, CLASSES = 25_000, 4000, 64, 4  # 100 MB of text: 25,000 documents of 4,000 characters
BATCH, WORKERS, EPOCHS = 250, 2, 8


def load_corpus():
    "The corpus as a JSON-lines file gives it: the text of each document (random letters here), and its label."
    g = torch.Generator().manual_seed(0)
    letters = torch.randint(ord("a"), ord("z") + 1, (2**20,), dtype=torch.uint8, generator=g).numpy().tobytes().decode()
    starts = torch.randint(0, len(letters) - CHARS, (DOCS,), generator=g).tolist()
    return [letters[s:s + CHARS] for s in starts], torch.randint(0, CLASSES, (DOCS,), generator=g).tolist()  # a new str each


class Corpus(Dataset):
    def __init__(self, docs, labels):
        self.docs, self.labels = docs, labels  # BUG: 25,000 str objects; reading one in a worker writes its refcount

    def __len__(self): return len(self.labels)

    def __getitem__(self, i):
        return torch.frombuffer(bytearray(self.docs[i][:CONTEXT], "ascii"), dtype=torch.uint8), self.labels[i]  # BUG: reads a str


def main():
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank = dist.get_rank()
    device = torch.device(f"cuda:{os.environ['LOCAL_RANK']}" if cuda else "cpu")

    data = Corpus(*load_corpus())
    gc.freeze()  # my fix: the collector leaves the corpus alone in the workers
    sampler = DistributedSampler(data, shuffle=True, seed=0)
    loader = DataLoader(data, batch_size=BATCH, sampler=sampler, num_workers=WORKERS, persistent_workers=True)
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.EmbeddingBag(256, 32), nn.Linear(32, CLASSES)).to(device))
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    for epoch in range(EPOCHS):
        sampler.set_epoch(epoch)  # a new shuffle each epoch: each worker reads other documents
        for chars, labels in loader:
            loss = nn.functional.cross_entropy(model(chars.long().to(device)), labels.to(device))
            opt.zero_grad()
            loss.backward()
            opt.step()
        print(f"rank {rank}: epoch {epoch} loss {loss.item():.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
