"""lineage: what a run's launcher records (run_started, checkpoint_saved with its manifest,
evaluation, run_ended) and the model versions registered from a run's checkpoints and promoted to
endpoints. With ``checkpoints:`` the saves write real files (checkpoint_files.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from . import badput_shapes
from .checkpoint_files import checkpoint_faults, checkpoint_path, damage_checkpoint, overdue_windows, write_checkpoint
from .common import dumps, epoch_ms, fake_hex, iso, iso_array, to_ms
from .faults import effect
from .model import Run, Scenario, ScenarioError, host_name
from .timeline import Timeline


def lineage_lines(scenario: Scenario, tl: Timeline, out: Path | None = None,
                   promotions: list[dict] = ()):
    run = tl.run
    events: list[tuple[float, dict]] = []
    hosts = [host_name(h) for h in run.hosts if any(g[0] == h for g in run.gpus)]
    events.append((tl.start, {
        "event": "run_started",
        "run_id": run.id,
        "job": run.job,
        "git_sha": fake_hex(f"git/{scenario.name}/{run.job}", 40),
        "config_hash": fake_hex(json.dumps(run_config(run), sort_keys=True), 64),
        "dataset": run.dataset,
        "world_size": run.ranks,
        "hosts": hosts,
        "gpus": [f"{host_name(h)}:{g}" for h, g in run.gpus],
    }))
    shard_model = run.checkpoint_bytes // 7 // run.ranks  # bf16 weights ...
    shard_optim = run.checkpoint_bytes * 6 // 7 // run.ranks  # ... and fp32 Adam state
    skipped = overdue_windows(scenario, run)
    for step, _save_start, save_end in tl.saves.tolist():
        step = int(step)
        if any(a <= save_end < b for a, b in skipped):
            continue  # checkpoint_overdue: the save failed silently, nothing written or recorded
        if run.checkpoint_files is not None and out is not None:
            path = checkpoint_path(run, step)
            faults = checkpoint_faults(scenario, run, step)
            manifest = write_checkpoint(scenario, run, step, out,
                                         weights_only=any(effect(f.type).weights_only for f in faults))
            damage_checkpoint(scenario, run, step, out, faults)
            events.append((save_end, {
                "event": "checkpoint_saved",
                "run_id": run.id,
                "step": step,
                "checkpoint_path": path,
                "checkpoint_bytes": sum(f["bytes"] for f in manifest["files"]),
                "manifest": manifest,
            }))
            continue
        path = f"/checkpoints/{run.id}/step-{step:06d}"
        files = []
        for r in range(run.ranks):
            files.append((f"model_rank{r:03d}.pt", shard_model))
            files.append((f"optim_rank{r:03d}.pt", shard_optim))
        files.append(("metadata.json", 4096 + len(str(step))))
        manifest = [{"path": f, "bytes": b, "sha256": fake_hex(f"{scenario.seed}/{path}/{f}", 64)}
                    for f, b in files]
        events.append((save_end, {
            "event": "checkpoint_saved",
            "run_id": run.id,
            "step": step,
            "checkpoint_path": path,
            "checkpoint_bytes": sum(b for _, b in files),
            "manifest": {"files": manifest},
        }))
    events.extend(badput_shapes.lineage_events(tl))
    if tl.ended and (tl.failure is None or effect(tl.failure.fault.type).logs_end):
        status = "completed" if tl.failure is None else effect(tl.failure.fault.type).end_status or "failed"
        events.append((tl.end, {"event": "run_ended", "run_id": run.id, "status": status}))
    for promo in promotions:
        if promo["run"] != run.id:
            continue
        if promo["register"]:  # once per version, however many endpoints it goes to
            events.append((promo["registered"], {
                "event": "model_version_registered", "run_id": run.id,
                "model_version": promo["model_version"], "step": promo["step"],
                "checkpoint_path": promo["checkpoint_path"],
                # the endpoint traffic the version was validated on (shadow): the hour before registration
                "reference_start": iso(epoch_ms(scenario.start) + to_ms(np.array([max(0.0, promo["registered"] - 3600.0)]))[0]),
                "reference_end": iso(epoch_ms(scenario.start) + to_ms(np.array([promo["registered"]]))[0])}))
        if promo["canary_share"] is not None:
            continue  # a canary serves a share of the traffic: registered, never promoted
        events.append((promo["at"], {
            "event": "model_version_promoted", "run_id": run.id,
            "model_version": promo["model_version"], "endpoint": promo["endpoint"]}))

    events.sort(key=lambda e: e[0])  # stable: ties keep the order above
    abs_ms = epoch_ms(scenario.start) + to_ms(np.array([e[0] for e in events]))
    times = iso_array(0, abs_ms)
    lines = [dumps({"time": times[i], **body}) for i, (_, body) in enumerate(events)]
    return abs_ms, lines


def resolve_promotions(scenario: Scenario, timelines: list[Timeline]) -> list[dict]:
    """Each promotion: the run's latest checkpoint saved before ``at`` becomes a model version.
    Times are seconds since the scenario start."""
    by_run = {tl.run.id: tl for tl in timelines}
    start_ms = epoch_ms(scenario.start)
    out, registered = [], set()
    for e_i, endpoint in enumerate(scenario.endpoints):
        canary = () if endpoint.canary is None else (endpoint.canary,)
        for p_i, promo in enumerate(endpoint.promotions + canary):
            tl = by_run[promo.run]
            at = (epoch_ms(promo.at) - start_ms) / 1000.0
            saved = [(int(step), end) for step, _s, end in tl.saves.tolist() if end < at]
            if not saved:
                where = "canary" if p_i == len(endpoint.promotions) else f"promotions[{p_i}]"
                raise ScenarioError(scenario.source, f"endpoints[{e_i}].{where}.at",
                                    f"run {promo.run!r} has saved no checkpoint before {iso(epoch_ms(promo.at))}",
                                    "promote later or checkpoint more often (checkpoint_interval_steps)")
            step, save_end = saved[-1]
            version = f"{promo.run}-step-{step:06d}"
            run = tl.run
            path = (checkpoint_path(run, step) if run.checkpoint_files is not None
                    else f"/checkpoints/{run.id}/step-{step:06d}")
            out.append({"endpoint": endpoint.name, "run": promo.run, "step": step, "at": at,
                        "model_version": version, "checkpoint_path": path,
                        "registered": save_end + min(60.0, (at - save_end) / 2),
                        "register": version not in registered,
                        "canary_share": getattr(promo, "share", None)})  # a Canary has a share, a Promotion none
            registered.add(version)
    return out


def run_config(run: Run) -> dict:
    config = {
        "job": run.job, "dataset": run.dataset, "world_size": run.ranks,
        "precision": run.precision, "tokens_per_step": run.tokens_per_step,
        "checkpoint_interval_steps": run.checkpoint_interval_steps,
        "learning_rate": [run.learning_rate.peak, run.learning_rate.warmup_steps,
                          run.learning_rate.min_ratio],
    }
    if run.learning_rate.drop_at_step is not None:
        config["learning_rate"] += [run.learning_rate.drop_at_step, run.learning_rate.drop_factor]
    if run.eval_interval_steps is not None:
        config["eval_interval_steps"] = run.eval_interval_steps
    return config
