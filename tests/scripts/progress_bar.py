"A rank that draws a progress bar on stderr the way tqdm does (carriage returns, one newline at the end), then prints."
import os, sys, time

rank = int(os.environ["RANK"])
for pct in (10, 50, 100):
    sys.stderr.write(f"\r{pct:3d}%|{'#' * (pct // 10)}"); sys.stderr.flush()
    time.sleep(0.4)  # longer than the launcher's look at the files, so each redraw is read on its own
sys.stderr.write("\n")
print(f"rank {rank} done", flush=True)
sys.stdout.write("no newline at the end"); sys.stdout.flush()
