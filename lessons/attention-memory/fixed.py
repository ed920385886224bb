"""Attention written by hand, fixed: scaled_dot_product_attention computes the same attention block by block (flash
attention, on CPU and on GPUs) and never holds a (sequence x sequence) matrix.

A small causal language model: token embeddings, two blocks of 4-head attention and an MLP, sequences of 2048
tokens, DDP and Adam. On CPU ranks the launch gives each rank a memory budget, as a GPU has a size: past it, torch's
own allocator fails ("DefaultCPUAllocator: can't allocate memory").
Run it on 2 ranks:  DISTLAB_MEMORY_BUDGET_MIB=144 distlab launch --nproc-per-node 2 broken.py
(bare torchrun has no budget: on a large machine it fits.)
"""
import os
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

VOCAB, WIDTH, HEADS, LAYERS, SEQ, STEPS = 512, 256, 4, 2, 2048, 3


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(WIDTH), nn.LayerNorm(WIDTH)
        self.qkv, self.out = nn.Linear(WIDTH, 3 * WIDTH), nn.Linear(WIDTH, WIDTH)
        self.mlp = nn.Sequential(nn.Linear(WIDTH, 4 * WIDTH), nn.GELU(), nn.Linear(4 * WIDTH, WIDTH))

    def attention(self, q, k, v):  # q, k, v: (batch, heads, SEQ, WIDTH // HEADS)
        return nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)  # FIX: a fused kernel, no SEQ x SEQ matrix

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, HEADS, WIDTH // HEADS).permute(2, 0, 3, 1, 4)
        x = x + self.out(self.attention(q, k, v).transpose(1, 2).reshape(b, t, WIDTH))
        return x + self.mlp(self.norm2(x))


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.blocks = nn.Sequential(*(Block() for _ in range(LAYERS)))
        self.head = nn.Linear(WIDTH, VOCAB)

    def forward(self, tokens):
        return self.head(self.blocks(self.embed(tokens)))


def main():
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank = dist.get_rank()
    device = torch.device(f"cuda:{os.environ['LOCAL_RANK']}" if cuda else "cpu")

    torch.manual_seed(0)
    model = DDP(TinyLM().to(device))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step in range(STEPS):
        g = torch.Generator().manual_seed(1000 * step + rank)
        tokens = torch.randint(0, VOCAB, (1, SEQ + 1), generator=g).to(device)
        opt.zero_grad(set_to_none=True)
        logits = model(tokens[:, :-1])  # predict each next token
        loss = nn.functional.cross_entropy(logits.reshape(-1, VOCAB), tokens[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        print(f"rank {rank}: step {step} loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
