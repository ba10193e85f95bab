"""Start ``world_size`` rank processes with torch.multiprocessing, watch them, and build the record.

The launcher owns the rendezvous (a TCPStore on 127.0.0.1, port chosen by the kernel, so two
runs never race for a port), a deadline, and the rank processes: a rank that fails or hangs
ends the run, and every rank process is killed before ``launch`` returns.
"""

from __future__ import annotations

import multiprocessing
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch.distributed as dist
import torch.multiprocessing as mp

from parbench.config import RunConfig
from parbench.record import build_record, failed_record
from parbench.validation import check_environment

POLL_S = 0.02
# Rank processes fork from a server that has imported torch and parbench once, so a launch
# costs a fork, not an interpreter start plus `import torch` per rank.
multiprocessing.set_forkserver_preload(["torch", "torch.distributed", "parbench.runner"])


@dataclass
class RankOutcome:
    results: list[dict[str, Any]] = field(default_factory=list)
    status: str = "ok"
    error: str | None = None
    failed_rank: int | None = None


def launch(cfg: RunConfig) -> tuple[RankOutcome, float]:
    """Run the ranks; (outcome, wall seconds). Never leaves a rank process behind."""
    check_environment(cfg)
    check_implemented(cfg)
    out_dir = Path(tempfile.mkdtemp(prefix="parbench-run-"))
    store = dist.TCPStore("127.0.0.1", 0, cfg.world_size + 1, is_master=True, wait_for_workers=False)
    t0 = time.perf_counter()
    context = mp.start_processes(
        _entry, args=(cfg.world_size, store.port, cfg.to_dict(), str(out_dir)),
        nprocs=cfg.world_size, join=False, start_method="forkserver",
    )
    try:
        outcome = _watch(context.processes, out_dir, cfg)
    finally:
        _kill_all(context.processes)
        wall = time.perf_counter() - t0
        shutil.rmtree(out_dir, ignore_errors=True)
        del store
    return outcome, wall


def check_implemented(cfg: RunConfig) -> None:
    from parbench.config import ConfigError
    from parbench.strategies import BUILDERS

    if cfg.strategy not in BUILDERS:
        have = ", ".join(s.value for s in BUILDERS)
        raise ConfigError(f"strategy={cfg.strategy.value} is not implemented yet; implemented: {have}")


def _entry(rank: int, world_size: int, port: int, config: dict, out_dir: str) -> None:
    from parbench.runner import rank_entry

    rank_entry(rank, world_size, port, config, out_dir)


def _watch(procs, out_dir: Path, cfg: RunConfig) -> RankOutcome:
    """Poll until every rank has a result, one fails, or the deadline passes."""
    deadline = time.monotonic() + cfg.timeout_s
    n = len(procs)
    while True:
        errors = sorted(out_dir.glob("rank*.error.json"))
        if errors:
            return _failure(errors[0])
        done = [out_dir / f"rank{r}.json" for r in range(n)]
        if all(p.exists() for p in done):
            return RankOutcome(results=[_read(p) for p in done])
        for rank, proc in enumerate(procs):
            # a rank that died without writing its result crashed (signal, OOM kill, os._exit)
            if proc.exitcode is not None and not done[rank].exists() and not list(out_dir.glob(f"rank{rank}.error.json")):
                time.sleep(0.2)  # its error file may still be on its way
                if not done[rank].exists() and not list(out_dir.glob("rank*.error.json")):
                    return RankOutcome(status="failed", failed_rank=rank,
                                       error=f"rank {rank} died with exit code {proc.exitcode} "
                                             f"({_signal_name(proc.exitcode)}) before writing its result")
        if time.monotonic() > deadline:
            missing = [r for r in range(n) if not done[r].exists()]
            return RankOutcome(status="timeout", failed_rank=missing[0] if missing else None,
                               error=f"timed out after {cfg.timeout_s:g} s; ranks without a result: {missing}")
        time.sleep(POLL_S)


def _failure(path: Path) -> RankOutcome:
    err = _read(path)
    tb_last = err.get("traceback", "").strip().splitlines()[-3:]
    return RankOutcome(status="failed", failed_rank=err["rank"],
                       error=f"rank {err['rank']}: {err['error']}\n" + "\n".join(tb_last))


def _read(path: Path) -> dict[str, Any]:
    import json

    return json.loads(path.read_text())


def _signal_name(code: int | None) -> str:
    import signal

    if code is not None and code < 0:
        try:
            return signal.Signals(-code).name
        except ValueError:
            pass
    return f"exit {code}"


def _kill_all(procs) -> None:
    """SIGKILL every rank still alive and reap it: no orphans, no zombies."""
    for proc in procs:
        if proc.is_alive():
            proc.kill()
    for proc in procs:
        proc.join(timeout=5)


def run(cfg: RunConfig, *, results_dir: str | Path | None = "results", sweep_id: str | None = None,
        repeat: int = 0, reference_losses: list[float] | None = None) -> dict[str, Any]:
    """Launch one run and write its record (when ``results_dir`` is given); returns the record."""
    from parbench.results import write_record

    outcome, wall = launch(cfg)
    if reference_losses is None and outcome.status == "ok":
        reference_losses = single_process_losses(cfg.reference())
    record = (build_record(cfg, outcome.results, wall, reference_losses=reference_losses)
              if outcome.status == "ok" else failed_record(cfg, outcome, wall))
    record.update(sweep_id=sweep_id, repeat=repeat)
    if results_dir is not None:
        write_record(results_dir, record)
    return record


def single_process_losses(ref: RunConfig) -> list[float]:
    """The reference: the same workload, global batch and seed in this process, one optimizer
    step per step the run took (warm-up, probe and timed steps)."""
    import torch

    from parbench import workloads
    from parbench.metrics.comm import CommMeter
    from parbench.strategies.base import RankContext
    from parbench.strategies.data_parallel import build_single

    threads = torch.get_num_threads()
    torch.set_num_threads(ref.threads)  # same kernels as the ranks: bitwise-comparable losses
    try:
        ctx = RankContext(config=ref, rank=0, world_size=1, device=torch.device("cpu"),
                          workload=workloads.make(ref.workload, ref.seed), meter=CommMeter(rank=0))
        trainer = build_single(ctx=ctx)
        return [float(trainer.step(i)) for i in range(ref.warmup_steps + 1 + ref.steps)]
    finally:
        torch.set_num_threads(threads)
