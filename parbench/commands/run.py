"""``parbench run``: one real training run, a summary on screen, one record in the results directory."""

from __future__ import annotations

import argparse
import sys

from parbench.multinode import add_node_options, layout_from_args, node_command
from parbench.config import (Backend, DataMode, DataParallelMode, RunConfig, Schedule, Strategy,
                             WorkloadConfig, WORKLOAD_NAMES, DATASETS)


def add_run_options(p: argparse.ArgumentParser) -> None:
    """The options that describe one run (``sweep`` reuses the workload ones)."""
    names = lambda e: [m.value for m in e]  # noqa: E731
    g = p.add_argument_group("strategy")
    g.add_argument("--strategy", default="single", help=f"one of: {', '.join(names(Strategy))}")
    g.add_argument("--world-size", type=int, default=1)
    g.add_argument("--backend", default="gloo", help=f"one of: {', '.join(names(Backend))}")
    g.add_argument("--device", default="cpu", help="cpu or cuda")
    g.add_argument("--precision", default="fp32", help="fp32, tf32 (cuda) or bf16 (autocast, bf16 gradient traffic)")
    g.add_argument("--micro-batches", type=int, default=1)
    g.add_argument("--schedule", default="1f1b", help=f"one of: {', '.join(names(Schedule))}")
    g.add_argument("--virtual-stages", type=int, default=1)
    g.add_argument("--dp", type=int, default=0, help="hybrid: data-parallel degree")
    g.add_argument("--tp", type=int, default=0, help="hybrid: tensor-parallel degree")
    g.add_argument("--pp", type=int, default=0, help="hybrid: pipeline degree")
    g.add_argument("--ep", type=int, default=0, help="ep: expert-parallel degree (default world size; "
                   "ep < world size: ep groups inside data parallelism)")
    g.add_argument("--dp-mode", default="ddp", help=f"hybrid dp dimension: {', '.join(names(DataParallelMode))}")
    g.add_argument("--servers", type=int, default=1, help="ps: parameter-server ranks")
    w = p.add_argument_group("workload")
    w.add_argument("--workload", default="mlp",
                   help=f"one of: {', '.join(WORKLOAD_NAMES)}, an installed plugin (parbench workloads), "
                        "package.module:factory or path/to/file.py:factory")
    w.add_argument("--layers", type=int, default=0, help="default: mlp 1, transformer 4")
    w.add_argument("--hidden", type=int, default=0, help="default: mlp 512, transformer 64")
    w.add_argument("--heads", type=int, default=4)
    w.add_argument("--seq-len", type=int, default=32)
    w.add_argument("--vocab-size", type=int, default=256)
    w.add_argument("--experts", type=int, default=4, help="moe: experts per MoE layer")
    w.add_argument("--top-k", type=int, default=2, help="moe: experts per token")
    w.add_argument("--capacity-factor", type=float, default=1.25,
                   help="moe: capacity ceil(factor x seq_len x top_k / experts) per expert per sequence")
    w.add_argument("--moe-every", type=int, default=1, help="moe: every k-th block has experts")
    w.add_argument("--router", default="learned", help="moe: learned or balanced (forced uniform routing)")
    w.add_argument("--aux-loss-weight", type=float, default=0.01, help="moe: load-balancing loss weight")
    w.add_argument("--dataset", default="synthetic", help=f"mlp data: {', '.join(DATASETS)}")
    w.add_argument("--dataset-path", default=None, help="MNIST IDX directory for --dataset mnist")
    t = p.add_argument_group("training")
    t.add_argument("--global-batch-size", type=int, default=64)
    t.add_argument("--steps", type=int, default=10)
    t.add_argument("--warmup-steps", type=int, default=2)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--threads", type=int, default=1, help="intra-op threads per rank")
    t.add_argument("--data-mode", default="sharded", help=f"one of: {', '.join(names(DataMode))}")
    d = p.add_argument_group("input pipeline")
    d.add_argument("--data-in-step", action="store_true",
                   help="make each step's input inside the timed step (end-to-end); default: just before it, "
                        "timed apart as time_data_s")
    d.add_argument("--loader-workers", type=int, default=0,
                   help="DataLoader worker processes per rank for dataset workloads (default 0: in the rank)")
    d.add_argument("--pin-memory", action="store_true", help="DataLoader pin_memory (device cuda only)")
    d.add_argument("--prefetch-factor", type=int, default=2, help="batches each loader worker loads ahead")
    t.add_argument("--lr", type=float, default=0.0)
    t.add_argument("--timeout", type=float, default=300.0, help="seconds before every rank is killed")


def config_from_args(a: argparse.Namespace) -> RunConfig:
    workload = WorkloadConfig(name=a.workload, layers=a.layers, hidden=a.hidden, heads=a.heads,
                              seq_len=a.seq_len, vocab_size=a.vocab_size, dataset=a.dataset,
                              dataset_path=a.dataset_path, experts=a.experts, top_k=a.top_k,
                              capacity_factor=a.capacity_factor, moe_every=a.moe_every, router=a.router,
                              aux_loss_weight=a.aux_loss_weight)
    return RunConfig(strategy=a.strategy, world_size=a.world_size, backend=a.backend, device=a.device,
                     precision=a.precision,
                     workload=workload, global_batch_size=a.global_batch_size, micro_batches=a.micro_batches,
                     schedule=a.schedule, virtual_stages=a.virtual_stages, dp=a.dp, tp=a.tp, pp=a.pp, ep=a.ep,
                     dp_mode=a.dp_mode, servers=a.servers, steps=a.steps, warmup_steps=a.warmup_steps,
                     seed=a.seed, threads=a.threads, data_mode=a.data_mode, lr=a.lr, timeout_s=a.timeout,
                     data_in_step=a.data_in_step, loader_workers=a.loader_workers, pin_memory=a.pin_memory,
                     prefetch_factor=a.prefetch_factor)


def add_parser(sub) -> None:
    p = sub.add_parser("run", help="one real training run", description=__doc__)
    add_run_options(p)
    add_node_options(p)
    p.add_argument("--results-dir", default="results")
    p.add_argument("--no-save", action="store_true", help="print the summary, write no record")
    p.set_defaults(handler=handle)


def handle(a: argparse.Namespace) -> int:
    from parbench.launch import measure_run, save
    from parbench.results import check_writable, is_storage_error
    from parbench.summary import print_run

    layout = layout_from_args(a)  # --nnodes > 1: torchrun on every node (parbench.multinode)
    cfg = config_from_args(a)  # ConfigError -> exit 2 before anything is spawned
    if not a.no_save:
        check_writable(a.results_dir)  # a measurement must never be lost to an unwritable directory
    if layout is not None:
        return node_command(cfg, layout, results_dir=None if a.no_save else a.results_dir)
    record, ranks = measure_run(cfg)
    if not a.no_save:
        try:
            save(a.results_dir, record, ranks)
        except OSError as exc:
            if not is_storage_error(exc):
                raise
            print_run(record, None)  # the measurement is at least on screen
            print(f"parbench run: error: the record could not be written: {exc.strerror} ({exc.filename}); "
                  "the summary above is all that is kept of this run", file=sys.stderr)
            return 1
    print_run(record, None if a.no_save else a.results_dir)
    return 0 if record["status"] == "ok" else 1
