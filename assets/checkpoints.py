"""The checkpoints asset: audits every checkpoint a run writes, on disk, one hour at a time.

Each hourly partition audits (sources/checkpoint_audit.py) the checkpoints lineage says were saved
in its hour, re-checks each run's newest checkpoints from before it (`recheck_newest`) and every
checkpoint a model version was registered from (a later deletion or bit rot turns up there), and
audits checkpoints found on disk under the configured roots that lineage does not know, in the hour
of their newest file's modification time. A checkpoint outside every root is recorded as
`not_audited` and never read: lineage paths are claims, and the roots bound what Goodput opens.

Roots: `CheckpointsConfig.roots`, each relative to the Goodput home (the warehouse file's folder)
unless absolute; by default `checkpoints` (where the simulator and the training-side client's
examples write). Relative lineage paths are relative to the home too.

It writes `checkpoint_audits`, `checkpoint_problems` and `checkpoint_restart_points` for the hour
and the new entries of the sha256 cache `checkpoint_hashes`, in one transaction; the registered
checkpoint signals (checks/signals_checkpoint.py) run as its asset checks.
"""

import json
from datetime import datetime, timezone
from pathlib import Path

import dagster as dg
import pandas as pd

from orchestration.partitions import hourly, window_params
from orchestration.storage import sql
from orchestration.storage.warehouse import POOL, WarehouseResource, transaction
from sources import checkpoint_audit as ca

AUDIT_COLUMNS = (
    "partition_start", "checkpoint", "path", "recorded_path", "root", "run_id", "step", "format", "saved_at", "tick",
    "is_new", "source", "status", "files", "bytes", "recorded_bytes", "files_hashed", "bytes_hashed", "problems",
    "model_versions", "audited_at",
)
PROBLEM_COLUMNS = ("partition_start", "checkpoint", "kind", "file", "detail")


class CheckpointsConfig(dg.Config):
    roots: list[str] = ["checkpoints"]
    """Folders holding checkpoints, relative to the Goodput home unless absolute. Only files under
    them are ever read."""
    recheck_newest: int = 2
    """Each run's newest checkpoints from before the hour that are audited again (cheap: unchanged
    files are not hashed again): the ones a restart would use."""
    hash_files: bool = True
    """Verify sha256 against the manifest (sizes and structure are always checked)."""


def checkpoint_id(run_id: str | None, path: Path, root: Path | None) -> str:
    """The entity id of a checkpoint: "<run>/<name>" when its run is known, else its path under its root."""
    if run_id:
        return f"{run_id}/{path.name}"
    if root is not None:
        try:
            return path.resolve().relative_to(root.resolve()).as_posix()
        except ValueError:
            pass
    return path.as_posix()


def _root_of(path: Path, roots: list[Path]) -> Path | None:
    resolved = path.resolve()
    for root in roots:
        r = root.resolve()
        if resolved == r or r in resolved.parents:
            return root
    return None


def _naive(moment) -> datetime | None:
    if moment is None or pd.isna(moment):
        return None
    return pd.Timestamp(moment).to_pydatetime().replace(tzinfo=None)


def _newest_mtime(path: Path) -> datetime:
    files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()] or [path]
    newest = max(p.stat().st_mtime_ns for p in files)
    return datetime.fromtimestamp(newest / 1e9, tz=timezone.utc).replace(tzinfo=None)


def read_lineage(con, start: datetime, end: datetime) -> dict:
    """What the partition's audit needs from the warehouse (read before any file is touched)."""
    params = {"start": start, "end": end}
    return {
        "saved": sql.frame(con, "checkpoints/saved", params),
        "horizon": _naive(sql.frame(con, "checkpoints/horizon", params)["horizon"].iloc[0]),
        "known": list(sql.frame(con, "checkpoints/known_paths", {})["checkpoint_path"]),
    }


def audit_partition(lineage: dict, home: Path, config: CheckpointsConfig, start: datetime, end: datetime,
                    cache: ca.HashCache) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(audit rows, problem rows) for one partition, from its lineage (`read_lineage`) and the files on disk."""
    saved, horizon = lineage["saved"], lineage["horizon"]
    known = {str(_resolve(home, p).resolve()) for p in lineage["known"]}
    roots = [_resolve(home, r) for r in config.roots]
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    audits, problems = [], []

    def record(audit: ca.Audit | None, path: Path, root: Path | None, run_id, step, saved_at, is_new, source,
               recorded_path=None, recorded_bytes=None, model_versions=None):
        run_id = run_id or (audit.run_id if audit else None)
        step = step if step is not None and not pd.isna(step) else (audit.step if audit else None)
        cid = checkpoint_id(run_id, path, root)
        status = "not_audited" if audit is None else "ok" if audit.ok else "failed"
        audits.append({
            "partition_start": start, "checkpoint": cid, "path": str(path), "recorded_path": recorded_path,
            "root": str(root) if root else None, "run_id": run_id, "step": None if step is None else int(step),
            "format": audit.format if audit else "unknown", "saved_at": saved_at,
            "tick": max(horizon, saved_at) if horizon else saved_at, "is_new": bool(is_new), "source": source,
            "status": status, "files": audit.files if audit else 0, "bytes": audit.bytes if audit else 0,
            "recorded_bytes": None if recorded_bytes is None or pd.isna(recorded_bytes) else int(recorded_bytes),
            "files_hashed": audit.hashed if audit else 0, "bytes_hashed": audit.hashed_bytes if audit else 0,
            "problems": len(audit.problems) if audit else 0, "model_versions": model_versions, "audited_at": now,
        })
        for p in audit.problems if audit else ():
            problems.append({"partition_start": start, "checkpoint": cid, "kind": p.kind, "file": p.file, "detail": p.detail})

    chosen = saved[saved["is_new"] | (saved["newest_before"] <= config.recheck_newest) | saved["model_versions"].notna()]
    for row in chosen.itertuples():
        path = _resolve(home, row.checkpoint_path)
        root = _root_of(path, roots)
        versions = row.model_versions if isinstance(row.model_versions, str) else None
        common = dict(run_id=row.run_id, step=row.step, saved_at=_naive(row.saved_at), is_new=row.is_new,
                      recorded_path=row.checkpoint_path, recorded_bytes=row.recorded_bytes, model_versions=versions)
        if root is None:
            record(None, path, None, source="lineage", **common)
            continue
        expected = json.loads(row.manifest) if isinstance(row.manifest, str) else None
        audit = ca.audit_checkpoint(path, cache, expected if isinstance(expected, dict) else None, config.hash_files)
        record(audit, path, root, source="both" if path.exists() else "lineage", **common)

    for path in ca.discover(roots):
        if str(path.resolve()) in known:
            continue
        saved_at = _newest_mtime(path)
        if not (start <= saved_at < end):
            continue
        audit = ca.audit_checkpoint(path, cache, None, config.hash_files)
        record(audit, path, _root_of(path, roots), None, None, saved_at, True, "disk")
    return (pd.DataFrame(audits, columns=list(AUDIT_COLUMNS)), pd.DataFrame(problems, columns=list(PROBLEM_COLUMNS)))


def _resolve(home: Path, path: str) -> Path:
    p = Path(path)
    return p if p.is_absolute() else home / p


@dg.asset(
    deps=["lineage_events", "training_steps"],
    partitions_def=hourly,
    group_name="checkpoints",
    kinds={"duckdb"},
    pool=POOL,
)
def checkpoints(context: dg.AssetExecutionContext, config: CheckpointsConfig, warehouse: WarehouseResource) -> dg.MaterializeResult:
    """Audits the hour's checkpoints on disk (Goodput manifests, safetensors shards and index,
    torch.distributed .distcp shards, torch.save zips): files missing or extra, size and sha256,
    truncation, leftover partial writes, incomplete shard sets, manifest paths escaping the root;
    and each run's restart point (newest checkpoint passing every audit, steps and GPU-hours since)."""
    params = window_params(context.partition_time_window)
    home = Path(warehouse.path).parent
    # read, then audit with no connection open (hashing may take a while), then write in one transaction
    with warehouse.connect() as con:
        cache = ca.DuckDBHashCache(con, [str(_resolve(home, r)) for r in config.roots])
        lineage = read_lineage(con, params["start"], params["end"])
    audits, problems = audit_partition(lineage, home, config, params["start"], params["end"], cache)
    with warehouse.connect() as con, transaction(con, new_audits=audits, new_problems=problems):
        cached = cache.save(con)
        sql.run(con, "checkpoints/store", params)
    failed = audits[audits["status"] == "failed"]
    metadata = {
        "audited": len(audits),
        "saved_this_hour": int(audits["is_new"].sum()) if not audits.empty else 0,
        "failed": len(failed),
        "not_audited": int((audits["status"] == "not_audited").sum()) if not audits.empty else 0,
        "files_hashed": int(audits["files_hashed"].sum()) if not audits.empty else 0,
        "bytes_hashed": int(audits["bytes_hashed"].sum()) if not audits.empty else 0,
        "hash_cache_entries_added": cached,
        "roots": dg.MetadataValue.json(list(config.roots)),
    }
    if not problems.empty:
        shown = problems.head(20)
        metadata["problems"] = dg.MetadataValue.md(
            "| checkpoint | kind | file | detail |\n|---|---|---|---|\n"
            + "\n".join(f"| {r.checkpoint} | {r.kind} | {r.file or ''} | {r.detail} |" for r in shown.itertuples()))
    return dg.MaterializeResult(metadata=metadata)
