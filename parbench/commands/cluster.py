"""``parbench cluster run``: a parbench command across N emulated nodes (network namespaces; root).

Example: ``parbench cluster run --nodes 2 --ranks-per-node 2 --rate 1gbit -- run --strategy ddp``.
Everything after ``--`` is a ``parbench run`` or ``parbench sweep`` command line; the node
options (--nnodes, --node-rank, --nproc-per-node, --master-addr, --master-port) are added per node.
"""

from __future__ import annotations

import argparse

from parbench.config import ConfigError


def add_parser(sub) -> None:
    p = sub.add_parser("cluster", help="emulate a multi-node cluster with network namespaces (root)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    csub = p.add_subparsers(dest="cluster_command", required=True, metavar="ACTION")
    r = csub.add_parser("run", help="run a parbench run/sweep across emulated nodes", description=__doc__)
    r.add_argument("--nodes", type=int, default=2, help="emulated nodes (network namespaces)")
    r.add_argument("--ranks-per-node", type=int, default=2, help="rank processes per emulated node")
    r.add_argument("--rate", default=None, help="link rate per node and direction, e.g. 100mbit, 1gbit (tbf); "
                                                "default: unshaped")
    r.add_argument("--timeout", type=float, default=900.0, help="seconds before every node is killed")
    r.add_argument("parbench_args", nargs=argparse.REMAINDER, help="-- run|sweep <options>")
    r.set_defaults(handler=handle)
    m = csub.add_parser("compare", help="simulator's network time vs measured, for shaped cluster runs")
    m.add_argument("--results-dir", default="results", help="where the nodes write their records")
    m.set_defaults(handler=handle_compare)
    c = csub.add_parser("clean", help="remove namespaces left by a cluster whose parbench died")
    c.set_defaults(handler=handle_clean)


def handle(a: argparse.Namespace) -> int:
    from parbench.cluster import netns
    from parbench.cluster.job import run_job

    argv = a.parbench_args[1:] if a.parbench_args[:1] == ["--"] else a.parbench_args
    if not argv or argv[0] not in ("run", "sweep"):
        raise ConfigError("give the job after --: `parbench cluster run [options] -- run|sweep <options>`")
    try:
        spec = netns.ClusterSpec(nodes=a.nodes, rate_bit_per_s=netns.parse_rate(a.rate) if a.rate else None)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if a.ranks_per_node < 1:
        raise ConfigError(f"ranks_per_node={a.ranks_per_node} must be >= 1")
    return run_job(spec, ranks_per_node=a.ranks_per_node, argv=argv, timeout_s=a.timeout)


def handle_clean(a: argparse.Namespace) -> int:
    from parbench.cluster import netns

    reason = netns.unavailable_reason()
    if reason:
        print(f"parbench cluster: {reason}")
        return 2
    removed = netns.cleanup_stale()
    print(f"removed {len(removed)} namespace(s)" + (f": {', '.join(removed)}" if removed else ""))
    return 0


def handle_compare(a: argparse.Namespace) -> int:
    from parbench.cluster.predict import compare
    from parbench.results import read_records

    records, _ = read_records(a.results_dir)
    shaped = [r for r in records if r.get("cluster_emulated") and r.get("cluster_link_rate_bit_per_s")
              and r["status"] == "ok"]
    if not shaped:
        print(f"no ok records of a shaped emulated cluster under {a.results_dir}")
        return 1
    print(f"{'strategy':10} {'rate Mbit/s':>11} {'predicted comm ms':>17} {'exposed comm ms':>15} {'step ms':>8}")
    for rec in sorted(shaped, key=lambda r: (r["strategy"], r["cluster_link_rate_bit_per_s"])):
        try:
            c = compare(rec)
        except (KeyError, TypeError, ValueError) as exc:  # a record edited by hand: named, the others shown
            print(f"{rec['strategy']:10} skipped {rec['run_id']}: {type(exc).__name__}: {exc}")
            continue
        exposed = "-" if c["measured_exposed_comm_time_s"] is None else f"{c['measured_exposed_comm_time_s'] * 1e3:.1f}"
        print(f"{rec['strategy']:10} {c['link_rate_bit_per_s'] / 1e6:11.0f} {c['predicted_comm_time_s'] * 1e3:17.1f} "
              f"{exposed:>15} {c['measured_step_time_s'] * 1e3:8.1f}")
    return 0
