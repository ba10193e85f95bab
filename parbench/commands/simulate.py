"""``parbench simulate``: predict throughput, memory and communication of one layout at any scale, or
``--search`` every feasible layout for a model and cluster (ranked, with the throughput-memory Pareto front).
Pure Python: no torch, no process group."""

from __future__ import annotations

import argparse
import json

from parbench.config import ConfigError, Schedule, Strategy, WorkloadConfig, WORKLOAD_NAMES


def add_parser(sub) -> None:
    p = sub.add_parser("simulate", help="predict a layout at scale (or --search all layouts)", description=__doc__)
    w = p.add_argument_group("model")
    w.add_argument("--workload", default="transformer", choices=WORKLOAD_NAMES)
    w.add_argument("--layers", type=int, default=0)
    w.add_argument("--hidden", type=int, default=0)
    w.add_argument("--heads", type=int, default=4)
    w.add_argument("--seq", "--seq-len", dest="seq", type=int, default=2048)
    w.add_argument("--vocab", "--vocab-size", dest="vocab", type=int, default=51200)
    w.add_argument("--torch-layout", action="store_true",
                   help="the runner's transformer (separate q/k/v, replicated head) instead of Megatron-LM's")
    c = p.add_argument_group("cluster and layout")
    c.add_argument("--cluster", default="h100-sxm", help="a100-80gb, h100-sxm, local, or a .toml/.json cluster file")
    c.add_argument("--results-dir", default="results", help="where `local` looks for the calibrated profile")
    c.add_argument("--gpus", type=int, default=8)
    c.add_argument("--dp", type=int, default=0, help="0: gpus / (tp x pp)")
    c.add_argument("--tp", type=int, default=1)
    c.add_argument("--pp", type=int, default=1)
    c.add_argument("--micro-batch", type=int, default=1, help="samples per micro-batch")
    c.add_argument("--global-batch", type=int, default=0, help="samples per step (default: dp x micro-batch)")
    c.add_argument("--schedule", default="1f1b", choices=[s.value for s in Schedule])
    c.add_argument("--virtual-stages", type=int, default=1)
    c.add_argument("--zero", type=int, default=0, choices=(0, 1, 2, 3))
    c.add_argument("--recompute", default="none", choices=("none", "selective", "full"))
    c.add_argument("--sequence-parallel", action="store_true")
    c.add_argument("--precision", default="bf16", choices=("bf16", "fp32"))
    p.add_argument("--search", action="store_true", help="enumerate every layout for --gpus and --global-batch")
    p.add_argument("--top", type=int, default=10, help="--search: layouts to show")
    p.add_argument("--format", choices=("table", "json"), default="table")
    p.set_defaults(handler=handle)


def _model(a: argparse.Namespace):
    from parbench.sim.model import model_spec

    try:
        wl = WorkloadConfig(name=a.workload, layers=a.layers, hidden=a.hidden, heads=a.heads, seq_len=a.seq,
                            vocab_size=a.vocab)
    except ConfigError:
        raise
    return model_spec(wl, megatron=not a.torch_layout)


def _layout(a: argparse.Namespace):
    from parbench.sim.layout import PRECISIONS, Layout, Recompute

    if a.gpus % (a.tp * a.pp):
        raise ConfigError(f"tp x pp = {a.tp} x {a.pp} does not divide gpus={a.gpus}")
    dp = a.dp or a.gpus // (a.tp * a.pp)
    if dp * a.tp * a.pp != a.gpus:
        raise ConfigError(f"dp*tp*pp={dp}*{a.tp}*{a.pp}={dp * a.tp * a.pp} != gpus={a.gpus}")
    gb = a.global_batch or dp * a.micro_batch
    if gb % (dp * a.micro_batch):
        raise ConfigError(f"global batch {gb} is not divisible by dp x micro-batch = {dp} x {a.micro_batch}")
    try:
        return Layout(strategy=Strategy.HYBRID, dp=dp, tp=a.tp, pp=a.pp, global_batch_size=gb,
                      micro_batches=gb // (dp * a.micro_batch), schedule=Schedule(a.schedule),
                      virtual_stages=a.virtual_stages, zero=a.zero, recompute=Recompute(a.recompute),
                      sequence_parallel=a.sequence_parallel, precision=PRECISIONS[a.precision])
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def handle(a: argparse.Namespace) -> int:
    from parbench.sim.hardware import load_cluster

    try:
        cluster = load_cluster(a.cluster, results_dir=a.results_dir)
    except (FileNotFoundError, ValueError) as exc:
        raise ConfigError(str(exc)) from None
    model = _model(a)
    if a.search:
        return _search(a, model, cluster)
    from parbench.sim.predict import predict

    layout = _layout(a)
    p = predict(model, layout, cluster)
    if a.format == "json":
        print(json.dumps({"cluster": cluster.name, "layout": _layout_dict(layout), "prediction": p.as_dict()}))
    else:
        _print_prediction(cluster.name, layout, p)
    return 0


def _layout_dict(layout) -> dict:
    d = {k: (v.value if hasattr(v, "value") else v) for k, v in vars(layout).items() if k != "precision"}
    d["precision"] = dict(vars(layout.precision))
    d["micro_batch_size"] = layout.micro_batch_size
    return d


def _print_prediction(name: str, layout, p) -> None:
    from parbench.sim.search import describe

    gib = 2**30
    print(f"{name}: {p.world_size} ranks, {describe(layout)}")
    print(f"  step time        {p.step_time_s:.4g} s  (compute {p.compute_time_s:.4g}, bubble {p.bubble_time_s:.4g}, "
          f"communication on the critical path {p.comm_time_s:.4g})")
    print(f"  throughput       {p.throughput_samples_per_s:.4g} samples/s, {p.tokens_per_s:.4g} tokens/s, MFU {p.mfu:.1%}")
    m = p.memory
    print(f"  memory per rank  {p.peak_memory_bytes / gib:.2f} GiB: params {m.param_bytes / gib:.2f}, grads "
          f"{m.grad_bytes / gib:.2f}, optimizer {m.optim_bytes / gib:.2f}, activations {m.activation_bytes / gib:.2f}")
    print("  bytes sent per rank per step: " + ", ".join(f"{k} {v:,}" for k, v in p.comm_bytes.items()))
    for key, v in p.comm_by_collective.items():
        print(f"    {key:<28}{v:>22,}")
    if not p.feasible:
        print("  DOES NOT FIT: " + "; ".join(p.reasons))


def _search(a: argparse.Namespace, model, cluster) -> int:
    from parbench.sim.layout import PRECISIONS
    from parbench.sim.search import describe, pareto_front, search

    gb = a.global_batch or a.gpus
    cands = search(model, cluster, gpus=a.gpus, global_batch=gb, precision=PRECISIONS[a.precision])
    feasible = [c for c in cands if c.feasible]
    front = pareto_front(cands)
    rejected: dict[str, int] = {}
    for c in cands:
        if not c.feasible:
            key = c.reason.split(" (")[0] if c.reason.startswith("needs") else c.reason
            key = "does not fit in memory" if key.startswith("needs") else key
            rejected[key] = rejected.get(key, 0) + 1
    if a.format == "json":
        row = lambda c: {"layout": describe(c.layout), **c.prediction.as_dict()}  # noqa: E731
        print(json.dumps({"evaluated": len(cands), "feasible": len(feasible), "top": [row(c) for c in feasible[:a.top]],
                          "pareto": [row(c) for c in front], "rejected": rejected,
                          "rejected_examples": [{"layout": describe(c.layout) if c.layout else None, "reason": c.reason}
                                                for c in cands if not c.feasible][:20]}))
        return 0
    print(f"{len(cands)} layouts, {len(feasible)} fit in {cluster.memory_bytes / 2**30:.0f} GiB per device")
    for reason, n in sorted(rejected.items(), key=lambda kv: -kv[1]):
        print(f"  rejected {n:>5}: {reason}")
    example = next((c for c in cands if c.reason.startswith("needs")), None)
    if example:
        print(f"  e.g. {describe(example.layout)}: {example.reason}")
    _table(f"top {a.top} by throughput", feasible[:a.top])
    _table("throughput-memory Pareto front", front)
    return 0


def _table(title: str, cands) -> None:
    from parbench.sim.search import describe

    print(f"\n{title}:\n{'samples/s':>11}{'MFU':>7}{'GiB':>7}  layout")
    for c in cands:
        p = c.prediction
        print(f"{p.throughput_samples_per_s:>11.4g}{p.mfu:>7.1%}{p.peak_memory_bytes / 2**30:>7.1f}  {describe(c.layout)}")
