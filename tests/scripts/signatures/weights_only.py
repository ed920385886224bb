"""A checkpoint that pickles a custom class, loaded with torch.load's default weights_only=True (torch >= 2.6)."""
import tempfile, torch
from pathlib import Path
from dataclasses import dataclass

@dataclass
class TrainState:
    step: int
    lr: float

def main():
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ckpt.pt"
        torch.save({"model": {"w": torch.zeros(2)}, "state": TrainState(step=100, lr=0.1)}, path)
        ckpt = torch.load(path)   # weights_only=True by default: refuses TrainState
        print(ckpt["state"])

if __name__ == "__main__": main()
