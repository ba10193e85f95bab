"""Per-run fixed overhead: forkserver launcher (as shipped) vs a fresh spawn, same process, same load.

Not a test (no test_ prefix): `.venv/bin/python tests/sweep/overhead.py 3` prints the README's figures."""
import functools, statistics, sys, time
import torch.multiprocessing as mp
from parbench import launch
from parbench.distributed import launcher
from parbench.config import RunConfig

def measure(ws, n):
    out = []
    for _ in range(n):
        cfg = RunConfig(strategy="ddp", world_size=ws, steps=2, warmup_steps=2, global_batch_size=16,
                        workload={"name": "mlp", "layers": 1, "hidden": 16})
        outcome = launch.launch(cfg)
        assert outcome.status == "ok", outcome.error
        out.append(outcome.wall_s - sum(outcome.results[0].step_times_s))
    return out

if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    t = time.perf_counter(); first = measure(2, 1)[0]; print(f"first launch (starts forkserver): {first:.2f} s")
    rows = {}
    for ws in (2, 4):
        rows[("forkserver", ws)] = measure(ws, n)
    orig = mp.start_processes
    mp.start_processes = functools.partial(lambda *a, **k: orig(*a, **{**k, "start_method": "spawn"}))
    launcher.mp.start_processes = mp.start_processes
    for ws in (2, 4):
        rows[("spawn", ws)] = measure(ws, n)
    for (how, ws), v in rows.items():
        print(f"{how:10s} W={ws}: overhead median {statistics.median(v):.2f} s, min {min(v):.2f}, max {max(v):.2f} (n={n})")
    for ws in (2, 4):
        print(f"W={ws} ratio forkserver/spawn: {statistics.median(rows[('forkserver', ws)]) / statistics.median(rows[('spawn', ws)]):.2f}")
