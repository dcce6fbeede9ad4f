"""Deterministic simulator of a GPU training cluster's raw zone.

``simulate(scenario, out_dir)`` writes what the real collectors would write
for the scenario's time span, plus the faults it injected:

* ``raw/gpu_samples/<YYYY-MM-DD>/<HH>/<host>.jsonl`` - one record per GPU per
  sample interval, idle GPUs included (the node exporter on each host);
* ``raw/training_steps/<YYYY-MM-DD>/<HH>/<run>.rank-<r>.jsonl`` - one record
  per rank per completed step (the training-side client in each rank);
* ``raw/lineage/<YYYY-MM-DD>/<HH>/<run>.jsonl`` - run_started,
  checkpoint_saved and run_ended events (the run's launcher);
* with ``endpoints:``, ``raw/serving_metrics/.../<endpoint>.jsonl`` (one
  record per metrics interval, as the Prometheus pull writes them),
  ``raw/predictions/.../<endpoint>.jsonl`` and
  ``raw/prediction_outcomes/.../<endpoint>.jsonl`` (as the predictions
  importer writes them), and model versions registered from a run's checkpoint
  and promoted to an endpoint in that run's lineage;
* with a run's ``checkpoints:``, real tiny checkpoint files and their
  ``goodput-manifest.json`` under ``out_dir/checkpoints/<run>/step-NNNNNN/``;
* ``ground_truth.jsonl`` - one line per injected fault (plus one per effect a
  GPU fault has on the rank using that GPU, marked ``caused_by``).

The hour bucket is the UTC hour of each record's ``time``. Output depends only
on the scenario: every random draw comes from a generator seeded with
(seed, entity label), floats are rounded to fixed decimals and nothing reads
the wall clock, so the same scenario gives byte-identical files.

How a run is modelled: steps are generated in *progress time* (seconds of
useful work since the run started: startup, steps, evaluation and checkpoint
pauses) and then mapped to wall time by inserting each hang's duration at its
onset. That makes a hang stop step records exactly at its onset, resume with
the next step number afterwards and push the run's end later by its duration.
Faults that slow steps (stragglers, throttled GPUs, slow data or network) add
seconds to the steps that start inside them; faults that kill a rank cut the
run at the onset. The physics of every fault is documented in docs/scenario.md.

The pieces: timeline.py (runs in wall time), gpu_samples.py, steps.py, lineage.py,
checkpoint_files.py and serving.py (the records), encode.py (the files), faults/ (the registered
effect of every fault type).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from . import badput_shapes
from .checkpoint_files import checkpoint_root, safetensors_bytes, torch_save_bytes
from .common import dumps, epoch_ms, iso, secs
from .encode import SERVING_SOURCES, SOURCES, Writer
from .faults import effect
from .gpu_samples import gpu_sample_lines
from .lineage import lineage_lines, resolve_promotions
from .model import Scenario, host_name
from .serving import prediction_lines, serving_lines
from .steps import run_series, step_lines
from .timeline import build_timeline

__all__ = ["SERVING_SOURCES", "SOURCES", "safetensors_bytes", "simulate", "torch_save_bytes"]


def simulate(scenario: Scenario, out_dir: str | Path) -> dict:
    """Write the raw zone and ground truth for ``scenario`` under ``out_dir``.

    Replaces ``out_dir/raw/{gpu_samples,training_steps,lineage}`` (and the
    serving sources' folders), ``out_dir/ground_truth.jsonl`` and the
    checkpoint folders of runs with ``checkpoints:`` if present; leaves
    anything else alone. Returns ``{"files", "rows": {source: n}, "faults",
    "start", "end"}`` where ``files`` counts the raw-zone files written,
    ``rows`` has the serving sources only for scenarios with endpoints and
    ``faults`` counts the configured faults.
    """
    out = Path(out_dir)
    writer = Writer(out)
    writer.reset()
    for run in scenario.runs:
        if run.checkpoint_files is not None:
            shutil.rmtree(checkpoint_root(run, out), ignore_errors=True)

    timelines = [build_timeline(scenario, run) for run in scenario.runs]
    timelines = badput_shapes.with_restarts(scenario, timelines, build_timeline, secs)
    promotions = resolve_promotions(scenario, timelines)
    for host in range(scenario.cluster.hosts):
        writer.write("gpu_samples", host_name(host), *gpu_sample_lines(scenario, host, timelines))
    for run in scenario.runs:  # a restarted run's attempts share its producers' files
        attempts = [tl for tl in timelines if tl.run.id == run.id]
        series = [run_series(scenario, tl) for tl in attempts]
        for rank in range(run.ranks):
            writer.write("training_steps", f"{run.id}.rank-{rank}", *badput_shapes.merged(
                [step_lines(scenario, tl, rank, s) for tl, s in zip(attempts, series)]))
        writer.write("lineage", run.id, *badput_shapes.merged(
            [lineage_lines(scenario, tl, out, promotions) for tl in attempts]))
    for endpoint in scenario.endpoints:
        mine = [p for p in promotions if p["endpoint"] == endpoint.name]
        versions = [(p["at"], p["model_version"]) for p in mine if p["canary_share"] is None]
        canary = next((p for p in mine if p["canary_share"] is not None), None)
        writer.write("serving_metrics", endpoint.name, *serving_lines(scenario, endpoint, versions))
        if endpoint.predictions is not None:
            predictions, outcomes = prediction_lines(scenario, endpoint, versions, canary)
            writer.write("predictions", endpoint.name, *predictions)
            writer.write("prediction_outcomes", endpoint.name, *outcomes)

    truth = _ground_truth(scenario)
    badput_shapes.write_truth(out, badput_shapes.truth(scenario, timelines, secs))
    with open(out / "ground_truth.jsonl", "w", encoding="utf-8", newline="\n") as fh:
        for line in truth:
            fh.write(dumps(line) + "\n")

    return {
        "files": writer.files,
        "rows": {source: writer.rows[source]
                 for source in SOURCES + (SERVING_SOURCES if scenario.endpoints else ())},
        "faults": len(scenario.faults),
        "start": iso(epoch_ms(scenario.start)),
        "end": iso(epoch_ms(scenario.end)),
    }


def _ground_truth(scenario: Scenario) -> list[dict]:
    """One line per fault, plus the rank-level effects of GPU faults (marked ``caused_by``)."""
    lines = []
    for f in scenario.faults:
        spec = effect(f.type)
        end = f.end if spec.truth_end is None else spec.truth_end(scenario, f)
        lines.append((f.onset, f.target, f.type, {
            "type": f.type, "entity": f.target, "onset": iso(epoch_ms(f.onset)),
            "end": iso(epoch_ms(min(end, scenario.end))), "magnitude": f.magnitude,
        }))
        caused = None if spec.rank_effect is None else spec.rank_effect(scenario, f)
        if caused is not None:
            ftype, run, rank, onset, end, magnitude = caused
            target = f"rank:{run.id}/rank-{rank}"
            lines.append((onset, target, ftype, {
                "type": ftype, "entity": target, "onset": iso(epoch_ms(onset)),
                "end": iso(epoch_ms(min(end, scenario.end))), "magnitude": magnitude,
                "caused_by": f"{f.type} {f.target}",
            }))
    lines.sort(key=lambda x: x[:3])
    return [x[3] for x in lines]
