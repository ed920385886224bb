"""Both trainers at world 2 on the same data and weights: DDP and FSDP2 must train alike; FSDP holds half the state per rank."""
import gc, json, sys
from pathlib import Path
import torch, torch.distributed as dist
from distlab.config import ModelConfig, TrainerConfig
from distlab.train.models import build_model
from distlab.train.data import SyntheticDataset
from distlab.train.trainer import DDPTrainer
from distlab.train.fsdp import FSDPTrainer

dist.init_process_group("gloo")
mcfg = ModelConfig(in_dim=16, hidden=32, layers=2)
ds = SyntheticDataset(512, mcfg)
cfg = TrainerConfig(accumulate=2, clip_grad_norm=0.5, warmup_steps=2, momentum=0.9, shuffle=True)
out = {}
for cls in (DDPTrainer, FSDPTrainer):
    t = cls(build_model(mcfg), ds, cfg, batch_size=8, max_steps=6, lr=0.2)
    out[cls.__name__] = {"losses": [r["loss"] for r in t.fit()],
                         "local_numel": sum(getattr(p, "to_local", lambda: p)().numel() for p in t.model.parameters()),
                         "optimizer_numel": sum(getattr(v, "to_local", lambda: v)().numel() for s in t.optimizer.state.values() for v in s.values()
                                                if torch.is_tensor(v) and v.dim() > 0)}
# a resume at world 2: stop after 3 steps, load into a fresh trainer, finish; same losses as straight through
first = DDPTrainer(build_model(mcfg), ds, cfg, batch_size=8, max_steps=3, lr=0.2); first.fit()
second = DDPTrainer(build_model(mcfg, seed=7), ds, cfg, batch_size=8, max_steps=6, lr=0.2)
second.load_state_dict(first.state_dict())
out["resumed"] = [r["loss"] for r in second.fit()]
out["rank"] = dist.get_rank()
Path(sys.argv[1], f"rank{dist.get_rank()}.json").write_text(json.dumps(out))  # a file per rank: two ranks' stdout lines can interleave
# free every DDP model before its group: with torch 2.13 on gloo a reducer left in a cycle past destroy_process_group
# aborts the process at exit now and then (5 of 30 runs of a plain script, none after a collection; see nbs/20_ledger)
del t, first, second; gc.collect()
dist.destroy_process_group()
