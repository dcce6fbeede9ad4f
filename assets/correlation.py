"""Correlation of incidents: those overlapping in time on the same run, GPU or host share one id.

Overlap is [onset, last seen + gap] (the resolve gap) on a run or host; on one GPU it is wider,
`GPU_WINDOW`: a failing device shows its faults minutes apart (uncorrectable ECC errors and row
remapping before the XID 79 that drops it off the bus), one event of one piece of hardware.

`correlate` is the definition (every pair); `fast_correlate` gives the same ids in O(n log n) by a
sweep per run, GPU and host, for the incremental fold (tests/test_fold_incremental.py holds them equal).
"""

from __future__ import annotations

import pandas as pd

# One GPU's faults this close belong to one hardware event (ECC errors precede an XID 79/48 by tens
# of minutes); wider than the resolve gap, which only bridges a detector's own flicker.
GPU_WINDOW = pd.Timedelta(minutes=30)


def correlate(incidents: pd.DataFrame, gap: pd.Timedelta) -> list[str | None]:
    """A correlation id per incident: incidents overlapping in time on the same run, GPU or host
    (a host only for host-level evidence without GPUs) share one, named after the earliest.
    Pairwise, O(n^2): the definition `fast_correlate` is tested against."""
    groups = _Groups(len(incidents))
    rows = incidents.to_dict("records")
    for i, a in enumerate(rows):
        for j in range(i + 1, len(rows)):
            if linked(a, rows[j], gap):
                groups.merge(i, j)
    return _named(incidents, groups)


def linked(a: dict, b: dict, gap: pd.Timedelta) -> bool:
    """Whether two incidents are directly correlated (one edge of `correlate`'s graph)."""
    gpu_gap = max(gap, GPU_WINDOW)
    if a["onset"] > b["last_seen"] + gpu_gap or b["onset"] > a["last_seen"] + gpu_gap:
        return False
    near = not (a["onset"] > b["last_seen"] + gap or b["onset"] > a["last_seen"] + gap)
    same_run = _known(a["run_id"]) and a["run_id"] == b["run_id"]
    a_gpus, b_gpus = _items(a["gpus"]), _items(b["gpus"])
    same_gpu = bool(a_gpus & b_gpus)
    same_host = (not a_gpus or not b_gpus) and bool(_items(a["hosts"]) & _items(b["hosts"]))
    return same_gpu or (near and (same_run or same_host))


def _known(value) -> bool:
    return value is not None and not (isinstance(value, float) and pd.isna(value))


def _items(values) -> set:
    return set(values) if values is not None else set()


def fast_correlate(incidents: pd.DataFrame, gap: pd.Timedelta) -> list[str | None]:
    """`correlate`'s ids in O(n log n): within one run, GPU or host, incidents whose
    [onset, last_seen + gap] overlap form runs of a sweep over onset; a host links only pairs where
    one side has no GPUs, so a GPU-holding incident joins every GPU-less stretch it overlaps."""
    groups = _Groups(len(incidents))
    union = groups.merge

    onset = list(incidents["onset"])
    near_end = [ls + gap for ls in incidents["last_seen"]]
    gpu_end = [ls + max(gap, GPU_WINDOW) for ls in incidents["last_seen"]]
    end = near_end
    runs, gpus, hosts_free, hosts_held = {}, {}, {}, {}
    for i, (run, g, h) in enumerate(zip(incidents["run_id"], incidents["gpus"], incidents["hosts"])):
        if run is not None and not (isinstance(run, float) and pd.isna(run)):
            runs.setdefault(run, []).append(i)
        for gpu in set(g if g is not None else []):
            gpus.setdefault(gpu, []).append(i)
        for host in set(h if h is not None else []):
            (hosts_held if (g is not None and len(g)) else hosts_free).setdefault(host, []).append(i)

    def sweep(members, end=near_end):
        """Merged stretches of overlapping intervals: [(start, end, [members])]."""
        blocks = []
        for i in sorted(members, key=lambda m: onset[m]):
            if blocks and onset[i] <= blocks[-1][1]:
                union(i, blocks[-1][2][0])
                blocks[-1][1] = max(blocks[-1][1], end[i])
                blocks[-1][2].append(i)
            else:
                blocks.append([onset[i], end[i], [i]])
        return blocks

    for members in runs.values():
        sweep(members)
    for members in gpus.values():
        sweep(members, gpu_end)
    for host, free in hosts_free.items():
        blocks = sweep(free)
        for i in hosts_held.get(host, []):
            for start, stop, block in blocks:
                if onset[i] <= stop and start <= end[i]:
                    union(i, block[0])
    return _named(incidents, groups)


class _Groups:
    """A union-find over n incidents (`merge(i, j)`, `groups[i]`: its root), with path halving. Not
    scipy's DisjointSet: importing scipy.cluster costs ~0.4 CPU-s, paid by every fold run's process
    (the daemon starts one per run), more than the fold's own work on a week of incidents."""

    def __init__(self, n: int):
        self.parent = list(range(n))

    def __getitem__(self, i: int) -> int:
        parent = self.parent
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def merge(self, i: int, j: int) -> None:
        a, b = self[i], self[j]
        if a != b:
            self.parent[max(a, b)] = min(a, b)


def _named(incidents: pd.DataFrame, groups: _Groups) -> list[str | None]:
    """Each incident's group named after its earliest member (onset, then id): `cor-<that id>`."""
    first: dict = {}
    for i, key in enumerate(zip(incidents["onset"], incidents["incident_id"])):
        root = groups[i]
        if root not in first or key < first[root]:
            first[root] = key
    return ["cor-" + first[groups[i]][1].removeprefix("inc-") for i in range(len(incidents))]
