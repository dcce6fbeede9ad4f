"""The raw-zone sensor's run requests for a home with shards (orchestration/shards.py).

An hour whose raw files changed gets one `detect_shard` run per shard whose files changed (a GPU samples
file named after a host of the shard; a file no shard's pattern names, e.g. `prometheus.jsonl`, is every
shard's), run key `<hour>|<shard>@<data version>`, and the hour is remembered in the cursor. At a later
tick, once no shard run of that hour is queued or running, it gets its hour-level `detect` run (run key
`<hour>@<data version>`, as without shards), which reads every shard's rows. An hour whose changed files
are none of a shard's (training steps, lineage, serving) gets its `detect` run at once. While any run of
an hour (either job) is in flight, or its `detect` waits for its shards, newer data for it waits, so at
most one run per partition is ever in flight (sensors_raw.py).
"""

from __future__ import annotations

import dagster as dg

from orchestration.jobs import DETECT_SHARD, detect_job
from orchestration.shards import HOUR, SHARDED_SOURCE, Shard, file_owner, partition_key
from orchestration.storage.raw_zone import VERSION_TAG

HOUR_TAG = f"dagster/partition/{HOUR}"


def shards_to_run(changed: list[str], shards: tuple[Shard, ...]) -> list[str]:
    """The shards (names, in configuration order) that must read again after `changed` (relative paths)."""
    names: set[str] = set()
    for relative in changed:
        if relative.split("/", 1)[0] != SHARDED_SOURCE:
            continue
        owner = file_owner(relative, shards)
        names |= {owner} if owner else {s.name for s in shards}
    return [s.name for s in shards if s.name in names]


def shard_hours_in_flight(instance: dg.DagsterInstance | None, statuses: list) -> set[str]:
    """Hours with a `detect_shard` run queued or running."""
    if instance is None:
        return set()
    runs = instance.get_run_records(dg.RunsFilter(job_name=DETECT_SHARD, statuses=statuses), limit=1000)
    return {r.dagster_run.tags.get(HOUR_TAG) for r in runs} - {None}


def detect_request(hour: str, version: str) -> dg.RunRequest:
    """The hour-level `detect` run of `hour`'s data `version` (run key `<hour>@<version>`), sharded or not."""
    return dg.RunRequest(partition_key=hour, run_key=f"{hour}@{version}", tags={VERSION_TAG: version},
                         job_name=detect_job.name)


def requests(planned: list[tuple[str, str, dict, list[str]]], shards: tuple[Shard, ...], waiting: dict[str, str],
             shard_busy: set[str]) -> tuple[list[dg.RunRequest], dict[str, str]]:
    """(run requests, hours still waiting for their shards -> data version) for one tick: the `detect` runs
    of the hours in `waiting` whose shard runs are done, then the runs of the hours `planned` this tick."""
    out, still = [], {}
    for hour, version in sorted(waiting.items()):
        if hour in shard_busy:
            still[hour] = version
        else:
            out.append(detect_request(hour, version))
    for hour, version, _files, changed in planned:
        names = shards_to_run(changed, shards)
        if not names:
            out.append(detect_request(hour, version))
            continue
        out += [dg.RunRequest(partition_key=partition_key(hour, name), run_key=f"{hour}|{name}@{version}",
                              tags={VERSION_TAG: version}, job_name=DETECT_SHARD) for name in names]
        still[hour] = version
    return out, still
