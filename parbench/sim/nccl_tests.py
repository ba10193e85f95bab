"""A GPU cluster's links from nccl-tests logs: the simulator's presets take their bandwidths from datasheets and
deratings; a team with its own cluster has measured it with nccl-tests (github.com/NVIDIA/nccl-tests:
``all_reduce_perf``, ``all_gather_perf``, ``reduce_scatter_perf``). Each log's times are fitted with the model
the simulator prices every collective by (``hardware.collective_cost_s``): t(S) = latency + factor x S / B, where
factor is nccl-tests' bus factor (2(n-1)/n for an all-reduce, (n-1)/n for the others; nccl-tests'
PERFORMANCE.md) and B the bus bandwidth; latency and 1/B are the fitted line's intercept and slope over factor.

A log from one host sets the node's link (``Cluster.intra``; on a node without a switch, its GPU-to-GPU links);
a log across hosts sets the network's per-GPU bandwidth (``Cluster.inter``): with NCCL's multi-rail rings, a
ring of ``rails`` ranks a node crosses it at rails x that bandwidth, so the measured bus bandwidth over rails.
The link's latency is the one that makes the model's latency for that collective (its base latency, its ring
steps and node crossings: ``hardware.collective_latency_s``) equal the fitted intercept.

A fit that is not physical (a bus bandwidth above the device's memory bandwidth, a negative intercept, a held-out
error above 25%: ``fit.unphysical``) is not used: the measured point estimates replace it, and the report says so.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from pathlib import Path

from parbench.metrics import stats
from parbench.sim import fit as fits
from parbench.sim.hardware import (
    Cluster,
    Link,
    algorithm_factors,
    collective_latency_s,
    collective_time_s,
    intra_bandwidth_bytes_per_s,
)

KINDS = {"all_reduce": ("all_reduce", "allreduce"), "all_gather": ("all_gather", "allgather"),
         "reduce_scatter": ("reduce_scatter", "reducescatter"), "all_to_all": ("all_to_all", "alltoall")}
"""The collectives a log can time, and the names their nccl-tests binaries and files carry."""
RANK_LINE = re.compile(r"^#\s*Rank\s+(\d+)\b.*?\bon\s+(\S+)\s+device\s+(\d+)")
FACTOR_TOLERANCE = 0.05
"""How far a log's own busbw / algbw may stand from the bus factor of its collective over its ranks."""
LARGE_BYTES = 64 << 20
"""Sizes from which the report's check of the fitted cluster against the log counts (bandwidth-bound)."""


@dataclass(frozen=True)
class Log:
    """One nccl-tests run: its collective, its ranks by host, and each size's out-of-place time."""

    path: str
    kind: str
    hosts: tuple[str, ...]
    """The host of each rank, in rank order."""
    sizes: tuple[int, ...]
    """Bytes of the full buffer, as nccl-tests prints them (an all-gather's output, a reduce-scatter's input)."""
    times_s: tuple[float, ...]
    bus_factors: tuple[float, ...]
    """Each row's busbw / algbw, as the log printed them (0 where algbw was printed 0)."""

    @property
    def ranks(self) -> int:
        return len(self.hosts)

    @property
    def nodes(self) -> int:
        return len(set(self.hosts))

    @property
    def rails(self) -> int:
        """Ranks a node."""
        return self.ranks // self.nodes


def kind_of(path: str, kind: str | None = None) -> str:
    """``kind`` if given, else the collective the file's name carries (``all_reduce_perf.log``, ``allgather.txt``)."""
    if kind is not None:
        if kind not in KINDS:
            raise ValueError(f"{path}: collective {kind!r} is not one nccl-tests log can set; valid: {', '.join(KINDS)}")
        return kind
    name = Path(path).name.lower().replace("-", "_")
    found = [k for k, names in KINDS.items() if any(n in name for n in names)]
    if len(found) != 1:
        raise ValueError(f"{path}: its name does not say which collective it timed; write KIND=FILE with KIND one of "
                         f"{', '.join(KINDS)}")
    return found[0]


CONCLUDED = re.compile(r"^#\s*Collective test (?:starting|concluded):\s*(\w+?)_perf\b")
"""Newer nccl-tests open and close with the binary's name, which says the collective where the file's name does not."""


def concluded_kind(text: str) -> str | None:
    """The collective a log's last lines name (``all_reduce`` for all_reduce_perf), None where they name none."""
    for line in text.splitlines():
        found = CONCLUDED.match(line.strip())
        if found:
            return next((k for k, names in KINDS.items() if found.group(1) in names), found.group(1))
    return None


MIN_TIME_US, MAX_TIME_US = 0.01, 1e12
"""The times a size row can hold: nccl-tests prints microseconds to two decimals; 10^12 us is 11.6 days."""


def parse(text: str, *, path: str, kind: str) -> Log:
    """The ranks and rows of an nccl-tests log (one process's output: rank lines, then one row a size)."""
    ranks: dict[int, str] = {}
    sizes, times, factors = [], [], []
    for number, line in enumerate(text.splitlines(), 1):
        rank = RANK_LINE.match(line.strip())
        if rank:
            ranks[int(rank.group(1))] = rank.group(2)
            continue
        words = line.split()
        if not words or line.lstrip().startswith("#") or not words[0].isdigit():
            continue
        if len(words) < 8:
            raise ValueError(f"{path}:{number}: a size row needs size, count, type, redop, root, time, algbw and "
                             f"busbw; got {line.strip()!r}")
        try:
            size, time_us, algbw, busbw = int(words[0]), float(words[5]), float(words[6]), float(words[7])
        except ValueError:
            raise ValueError(f"{path}:{number}: not an nccl-tests size row: {line.strip()!r}") from None
        if not (MIN_TIME_US <= time_us <= MAX_TIME_US) or not 0 <= size < 2**64:
            raise ValueError(f"{path}:{number}: size {size} B in {time_us} us is not a measurement (nccl-tests prints "
                             f"sizes as 64-bit counts and times from {MIN_TIME_US} us, to two decimals)")
        if size:
            sizes.append(size)
            times.append(time_us * 1e-6)
            factors.append(busbw / algbw if algbw > 0 else 0.0)
    if not ranks:
        raise ValueError(f"{path}: no '#  Rank N ... on HOST device D' lines: the log must keep nccl-tests' header, "
                         "which says how many ranks ran on which hosts")
    if sorted(ranks) != list(range(len(ranks))):
        raise ValueError(f"{path}: rank lines {sorted(ranks)} are not ranks 0 to {len(ranks) - 1}")
    if len(ranks) < 2:
        raise ValueError(f"{path}: one rank; a collective needs two or more")
    if len(sizes) < 4:
        raise ValueError(f"{path}: {len(sizes)} sizes above 0 B; a fit needs at least 4 (nccl-tests -b 8 -e 1G -f 2)")
    hosts = tuple(ranks[r] for r in range(len(ranks)))
    per_host = {h: hosts.count(h) for h in hosts}
    if len(set(per_host.values())) != 1:
        raise ValueError(f"{path}: the hosts run different numbers of ranks ({per_host}); the model's nodes are alike")
    log = Log(path=path, kind=kind, hosts=hosts, sizes=tuple(sizes), times_s=tuple(times), bus_factors=tuple(factors))
    factor = algorithm_factors(kind, log.ranks)[1]
    printed = stats.median([f for f in factors if f > 0]) if any(factors) else factor
    if abs(printed / factor - 1) > FACTOR_TOLERANCE:
        raise ValueError(f"{path}: its busbw / algbw is {printed:.3f}, not the {kind} bus factor {factor:.3f} over "
                         f"{log.ranks} ranks: is it another collective's log?")
    return log


def read(spec: str) -> Log:
    """``FILE`` or ``KIND=FILE``: the log at FILE, its collective from KIND or from the file's name."""
    kind, _, path = spec.partition("=") if spec.split("=", 1)[0] in KINDS else ("", "", spec)
    file = Path(path)
    if not file.is_file():
        raise ValueError(f"nccl-tests log {path} does not exist" if not file.exists() else f"{path} is not a file")
    try:
        text = file.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"nccl-tests log {path} cannot be read: {exc}") from None
    return parse(text, path=path, kind=kind_of(path, kind or concluded_kind(text)))


@dataclass(frozen=True)
class LinkFit:
    """What one log says about one link, and how well the changed cluster reproduces the log."""

    log: Log
    level: str
    """``intra`` (one host) or ``inter`` (across hosts)."""
    fit: fits.Fit
    reasons: tuple[str, ...]
    """Why the fit is not physical (empty: it is used)."""
    latency_s: float
    """The collective's measured fixed time: the fit's intercept, or the point estimate."""
    bus_bandwidth_bytes_per_s: float
    link: Link
    """The link the cluster now has at ``level``."""
    before: Link
    """The link the cluster had there."""
    notes: tuple[str, ...] = ()
    errors_pct: tuple[float, ...] = ()
    """The changed cluster's time for each of the log's sizes against the log's, in %."""


def fit_log(log: Log, cluster: Cluster) -> tuple[Cluster, LinkFit]:
    """The cluster with the link the log measured set to fit it, and the fit's report."""
    factor = algorithm_factors(log.kind, log.ranks)[1]
    xs, ys = [float(s) for s in log.sizes], list(log.times_s)
    fitted = fits.fit_with_holdout(xs, ys)
    reasons = fits.unphysical(fitted, max_rate=cluster.memory_bandwidth_bytes_per_s / factor)
    alpha, beta = (fitted.alpha, fitted.beta) if not reasons else fits.point_estimates(xs, ys)
    bus = factor / beta
    inter_node, notes = log.nodes > 1, []
    if inter_node and log.kind == "all_to_all":  # no ring: the parts for other hosts leave through each rank's NIC
        level, bandwidth = "inter", bus * (log.ranks - log.rails) / (log.ranks - 1)
        node = intra_bandwidth_bytes_per_s(cluster, log.rails)
        if (log.rails - 1) / node > (log.ranks - log.rails) / bandwidth:
            notes.append(f"the node's link ({node / 1e9:.1f} GB/s) is slower for this exchange's parts within a host "
                         "than the network for the rest: the model prices it there")
        changed = dataclasses.replace(cluster, inter=Link(latency_s=cluster.inter.latency_s, bandwidth_bytes_per_s=bandwidth))
    elif inter_node:
        rails = log.rails if cluster.multi_rail_rings else 1
        level, bandwidth = "inter", bus / rails
        cap = max(intra_bandwidth_bytes_per_s(cluster, log.rails), bandwidth)
        if bandwidth * rails > cap:
            notes.append(f"the ring's {bus / 1e9:.1f} GB/s exceeds what the node's link carries "
                         f"({cap / 1e9:.1f} GB/s): the model caps it there")
        changed = dataclasses.replace(cluster, inter=Link(latency_s=cluster.inter.latency_s, bandwidth_bytes_per_s=bandwidth))
    elif cluster.peer_link_bytes_per_s:  # no switch: the ring's ranks - 1 links carry it
        level, peer = "intra", bus / (log.ranks - 1)
        changed = dataclasses.replace(cluster, peer_link_bytes_per_s=peer,
                                      intra=Link(latency_s=cluster.intra.latency_s,
                                                         bandwidth_bytes_per_s=peer * (cluster.gpus_per_node - 1)))
    else:
        level = "intra"
        changed = dataclasses.replace(cluster, intra=Link(latency_s=cluster.intra.latency_s, bandwidth_bytes_per_s=bus))
    latency = _link_latency_s(changed, log, level, alpha, notes)
    changed = dataclasses.replace(changed, **{level: Link(latency_s=latency, bandwidth_bytes_per_s=getattr(changed, level).bandwidth_bytes_per_s)})
    errors = tuple(100 * (collective_time_s(changed, log.kind, s, log.ranks, inter_node=inter_node, rails=log.rails)
                          / t - 1) for s, t in zip(log.sizes, log.times_s))
    return changed, LinkFit(log=log, level=level, fit=fitted, reasons=tuple(reasons), latency_s=alpha,
                            bus_bandwidth_bytes_per_s=bus, link=getattr(changed, level),
                            before=getattr(cluster, level), notes=tuple(notes),
                            errors_pct=errors)


def _link_latency_s(cluster: Cluster, log: Log, level: str, alpha: float, notes: list[str]) -> float:
    """The link latency at which the model's latency for the log's collective is ``alpha``: that latency is
    affine in it (a base, then one link latency a ring step, the node crossings at the network's)."""
    def at(latency_s: float) -> float:
        link = getattr(cluster, level)
        c = dataclasses.replace(cluster, **{level: Link(latency_s=latency_s, bandwidth_bytes_per_s=link.bandwidth_bytes_per_s)})
        return collective_latency_s(c, log.kind, log.ranks, inter_node=log.nodes > 1, rails=log.rails)

    base, slope = at(0.0), at(1e-6) - at(0.0)
    if alpha < base:
        notes.append(f"the measured fixed time {alpha * 1e6:.1f} us is below the model's for this collective with a "
                     f"zero-latency {level} link ({base * 1e6:.1f} us: its base latency and its ring's steps over the "
                     "other link; NCCL answers small messages with faster algorithms than a ring): latency 0")
        return 0.0
    return (alpha - base) / slope * 1e-6


def apply(cluster: Cluster, logs: list[Log]) -> tuple[Cluster, list[LinkFit]]:
    """The cluster with every log's link set: one-host logs first (a ring across hosts is capped by the node's
    link), at most one log a link."""
    if cluster.collectives:
        raise ValueError(f"cluster {cluster.name} times its collectives from its own measured fits (a calibrated "
                         "profile), not from its links: start from a GPU preset or a cluster file")
    order = sorted(logs, key=lambda log: log.nodes > 1)
    levels = ["inter" if log.nodes > 1 else "intra" for log in order]
    for level in set(levels):
        if levels.count(level) > 1:
            which = ", ".join(log.path for log, lv in zip(order, levels) if lv == level)
            raise ValueError(f"{which} all measure the {level} link; give one log a link "
                             "(across hosts: inter, on one host: intra)")
    for log in order:
        if log.rails > cluster.gpus_per_node:
            raise ValueError(f"{log.path}: {log.rails} ranks on a host, but cluster {cluster.name} has "
                             f"{cluster.gpus_per_node} GPUs a node")
    reports = []
    for log in order:
        cluster, report = fit_log(log, cluster)
        reports.append(report)
    return cluster, reports


def report_lines(reports: list[LinkFit]) -> list[str]:
    """An aligned table: each log's link, fitted bandwidth and latency with their 95% intervals, held-out error,
    status, and how far the changed cluster's times stand from the log's."""
    head = (f"{'log':<28}{'collective':<15}{'ranks':>6}{'nodes':>6}  {'link':<6}{'bus GB/s':>10}{'+-95%':>8}"
            f"{'latency us':>12}{'+-95%':>8}{'held-out %':>11}{'check %':>9}  status")
    lines = [head, "-" * len(head)]
    for r in reports:
        factor = algorithm_factors(r.log.kind, r.log.ranks)[1]
        bw_ci = 1.96 * factor * r.fit.beta_se / r.fit.beta ** 2 if r.fit.beta > 0 else math.nan
        large = [abs(e) for s, e in zip(r.log.sizes, r.errors_pct) if s >= LARGE_BYTES]
        status = "ok" if not r.reasons else "UNPHYSICAL: " + "; ".join(r.reasons) + " -> point estimates used"
        lines.append(f"{Path(r.log.path).name[:27]:<28}{r.log.kind:<15}{r.log.ranks:>6}{r.log.nodes:>6}  {r.level:<6}"
                     f"{r.bus_bandwidth_bytes_per_s / 1e9:>10.2f}{bw_ci / 1e9:>8.2f}{r.latency_s * 1e6:>12.1f}"
                     f"{1.96 * r.fit.alpha_se * 1e6:>8.1f}{r.fit.heldout_error_pct:>11.1f}"
                     f"{max(large) if large else math.nan:>9.1f}  {status}")
        lines += [f"  {note}" for note in r.notes]
        lines.append(f"  {r.level}: {r.link.bandwidth_bytes_per_s / 1e9:.2f} GB/s a GPU and direction, latency "
                     f"{r.link.latency_s * 1e6:.2f} us (it was {r.before.bandwidth_bytes_per_s / 1e9:.2f} GB/s, "
                     f"{r.before.latency_s * 1e6:.2f} us)")
    lines.append("bus GB/s: nccl-tests' bus bandwidth, the fitted line's; check %: the changed cluster's largest "
                 f"|error| on the log's sizes from {LARGE_BYTES >> 20} MiB; held-out %: the fit's median on every "
                 "third size, left out")
    return lines
