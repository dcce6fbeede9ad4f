"""Capture a real GPU training run, then a hang, into a Goodput raw zone (for one H200/H100 machine).

    python3 bench/gpu_capture.py --out DIR [--train-seconds 120] [--hang-seconds 390] [--interval 2]
    python3 bench/gpu_capture.py --out DIR --dry-run --train-seconds 20 --hang-seconds 10   # no GPU: CPU torch, fake NVML

Standard library + torch + numpy + pynvml only (no dagster, no duckdb). Three processes:

- this one (the "capture"): the NVML agent (sources.nvml_agent.NvmlAgent) sampling every --interval s on a
  thread into DIR/home/raw/gpu_samples, with a job-mapping folder DIR/jobs as the fallback run mapping;
- the trainer (`--role train`, started with GOODPUT_RUN_ID in its environment at exec, so the agent can read it
  from /proc/<pid>/environ): a bf16 MLP regressing a fixed random teacher on cuda:0 for --train-seconds,
  logging every step through sources.client.GoodputClient, then a "hang" for --hang-seconds that looks like a
  stuck NCCL collective: alive, a spin kernel (torch.cuda._sleep) resident, memory held, no steps logged;
- a checkpoint check (`--role ckpt`, CPU only, run during the hang): torch.save, torch.distributed.checkpoint
  and safetensors checkpoints, intact and damaged, through sources.checkpoint_audit -> DIR/checkpoint_audit.json.

Then DIR/truth.json: run id, host, GPU, phase boundaries (ISO UTC like sources.client.iso_utc), step count,
per-phase means of what the agent recorded, and anything odd. Exit 0 when the capture worked (even if the
checkpoint check failed: its error is in its JSON), 1 when it did not, 2 when there is no CUDA/NVML (without
--dry-run).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from gpu_capture_ckpt import role_ckpt  # bench/ is this script's own folder on sys.path
from gpu_capture_common import REPO, RUN_ID, parse_iso, say, write_json  # first: puts the repo on sys.path
from gpu_capture_train import role_train

from sources.client import iso_utc  # stdlib only

# =============================================================================== capture (parent)


def load_nvml(dry_run: bool, trainer_pid_box: dict):
    if not dry_run:
        import pynvml
        return pynvml, None
    from tests.helpers import FakeGpu, make_fake_nvml  # the tests' fake NVML (the dry run only)

    gpu = FakeGpu(0, util=0, power_mw=75_000)
    fake = make_fake_nvml([gpu])
    return fake, gpu


class Sampler(threading.Thread):
    """The NVML agent's own loop (`run_agent`) in a thread, stopped by `stop`; plus a run-mapping diagnostic."""

    def __init__(self, agent, raw_root: Path, interval: float, trainer_pid: dict):
        super().__init__(name="goodput-agent", daemon=True)
        self.agent, self.raw_root, self.interval, self.trainer_pid = agent, raw_root, interval, trainer_pid
        self.stop = threading.Event()
        self.diag = {"samples": 0, "samples_with_trainer_pid": 0, "samples_run_id_from_environ": 0,
                     "samples_with_any_pid": 0, "pids_seen": set(), "errors": []}

    def run(self):
        try:
            from sources.nvml_agent import run_agent
            run_agent(self.agent, self.raw_root, self.interval, stats_every=0, log=say, stop=self.stop,
                      on_sample=self._diagnose)
        except Exception as error:  # noqa: BLE001  (reported in the capture's summary)
            self.diag["errors"].append(f"{type(error).__name__}: {error}")

    def _diagnose(self, _records):
        """Would the run id have been found without the job-mapping fallback?"""
        try:
            self._check_mapping()
        except Exception as error:  # noqa: BLE001
            if len(self.diag["errors"]) < 5:
                self.diag["errors"].append(f"{type(error).__name__}: {error}")

    def _check_mapping(self):
        self.diag["samples"] += 1
        gpu = self.agent.gpus[0]
        if gpu.handle is None:
            return
        procs = self.agent._field(gpu, "nvmlDeviceGetComputeRunningProcesses", gpu.handle) or []
        pids = [p.pid for p in procs]
        if pids:
            self.diag["samples_with_any_pid"] += 1
            self.diag["pids_seen"].update(pids[:8])
        if self.trainer_pid.get("pid") in pids:
            self.diag["samples_with_trainer_pid"] += 1
        mapping, self.agent.job_mapping_dir = self.agent.job_mapping_dir, None
        try:
            if self.agent.run_id_for(gpu, pids) == RUN_ID:
                self.diag["samples_run_id_from_environ"] += 1
        finally:
            self.agent.job_mapping_dir = mapping


def phase_stats(samples: list[dict], start: float | None, end: float | None) -> dict:
    rows = [r for r in samples if r.get("gpu_index") == 0 and (start is None or r["_t"] >= start)
            and (end is None or r["_t"] < end)]

    def mean(key, scale=1.0):
        vals = [r[key] for r in rows if isinstance(r.get(key), (int, float))]
        return round(sum(vals) / len(vals) * scale, 4) if vals else None

    def span(key):
        vals = [r[key] for r in rows if isinstance(r.get(key), (int, float))]
        return [min(vals), max(vals)] if vals else None

    return {"samples": len(rows), "power_watts_mean": mean("power_watts"), "power_watts_min_max": span("power_watts"),
            "utilization_ratio_mean": mean("utilization_ratio"), "utilization_min_max": span("utilization_ratio"),
            "sm_clock_mhz_mean": mean("sm_clock_hertz", 1e-6), "temperature_celsius_mean": mean("temperature_celsius"),
            "memory_used_gib_mean": mean("memory_used_bytes", 1 / (1 << 30)),
            "throttle_reasons_seen": sorted({r["throttle_reasons"] for r in rows if r.get("throttle_reasons") is not None}),
            "run_ids": sorted({str(r.get("run_id")) for r in rows})}


def read_raw(raw: Path, source: str) -> list[dict]:
    out = []
    for f in sorted(raw.glob(f"{source}/*/*/*.jsonl")):
        for line in f.read_text().splitlines():
            if line.strip():
                record = json.loads(line)
                record["_t"] = parse_iso(record["time"])
                record["_file"] = str(f.relative_to(raw))
                out.append(record)
    return out


def role_capture(args) -> int:
    out = Path(args.out).resolve()
    home = out / "home"
    raw = home / "raw"
    out.mkdir(parents=True, exist_ok=True)
    for stale in ("home", "jobs", "ckpt", "phases.json", "truth.json", "checkpoint_audit.json"):
        p = out / stale
        if p.is_dir():
            shutil.rmtree(p)
        elif p.exists():
            p.unlink()
    t_begin = time.time()
    truth: dict = {"run_id": RUN_ID, "host": socket.gethostname(), "dry_run": args.dry_run,
                   "capture_started": iso_utc(t_begin), "args": vars(args), "odd": []}
    trainer_pid: dict = {}

    # -- the agent ----------------------------------------------------------------------------
    from sources.nvml_agent import AgentError, NvmlAgent

    try:
        nvml, fake_gpu = load_nvml(args.dry_run, trainer_pid)
    except ImportError as error:
        say(f"cannot import NVML bindings: {error}")
        return 2
    jobs = out / "jobs"
    jobs.mkdir()
    agent = NvmlAgent(nvml, host=truth["host"], job_mapping_dir=jobs)
    try:
        agent.open()
    except AgentError as error:
        say(f"no GPU to capture: {error}" + ("" if args.dry_run else " (use --dry-run on a machine without one)"))
        return 2
    gpu0 = agent.gpus[0]
    truth.update({"gpu_index": 0, "gpu_uuid": gpu0.uuid, "gpu_name": gpu0.name, "gpu_count": len(agent.gpus),
                  "xid_events_supported": gpu0.xid_supported})
    try:
        truth["driver"] = agent._text(nvml.nvmlSystemGetDriverVersion())
    except Exception:  # noqa: BLE001
        truth["driver"] = None
    (jobs / "0").write_text(RUN_ID + "\n")   # fallback: dcgm-exporter style job mapping for GPU index 0
    if gpu0.uuid:
        (jobs / gpu0.uuid).write_text(RUN_ID + "\n")
    say(f"agent: {len(agent.gpus)} GPU(s), GPU 0 {gpu0.name} {gpu0.uuid}, driver {truth['driver']}, "
        f"sampling every {args.interval:g} s into {raw / 'gpu_samples'}")
    sampler = Sampler(agent, raw, args.interval, trainer_pid)
    sampler.start()
    time.sleep(min(2 * args.interval, 4))   # a couple of idle samples before the trainer starts

    # -- the trainer --------------------------------------------------------------------------
    env = {**os.environ, "GOODPUT_RUN_ID": RUN_ID, "GOODPUT_HOME": str(home), "PYTHONUNBUFFERED": "1",
           "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES", "0")}
    end_by = t_begin + args.train_seconds + args.hang_seconds + 42   # the trainer's hang ends by then at the latest
    cmd = [sys.executable, str(Path(__file__).resolve()), "--role", "train", "--out", str(out),
           "--train-seconds", str(args.train_seconds), "--hang-seconds", str(args.hang_seconds),
           "--end-by", str(end_by)]
    if args.dry_run:
        cmd.append("--dry-run")
    trainer = subprocess.Popen(cmd, env=env, cwd=str(REPO))
    trainer_pid["pid"] = trainer.pid
    if fake_gpu is not None:
        fake_gpu.pids = [trainer.pid]   # the dry run's fake NVML names the trainer as the GPU's process
    truth["trainer_pid"] = trainer.pid
    say(f"trainer started, pid {trainer.pid}")

    # -- the checkpoint check, once the hang has begun (CPU only; overlaps the hang) ------------
    ckpt_proc = None
    deadline = end_by + 8   # then the trainer is killed; leaves ~10 s for the wrap-up
    phases_path = out / "phases.json"
    phases: dict = {}
    while trainer.poll() is None and time.time() < deadline:
        try:
            phases = json.loads(phases_path.read_text())
        except (OSError, ValueError):
            pass
        if fake_gpu is not None:   # dry run: make the fake GPU look busy, then stuck
            if phases.get("hang_start"):
                fake_gpu.util, fake_gpu.power_mw = 100, 120_000
            elif phases.get("train_start"):
                fake_gpu.util, fake_gpu.power_mw = 98, 650_000
        if ckpt_proc is None and phases.get("hang_start") and not args.skip_ckpt:
            ckpt_proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--role", "ckpt",
                                          "--out", str(out)], cwd=str(REPO), env={**env, "CUDA_VISIBLE_DEVICES": ""})
            say(f"checkpoint check started, pid {ckpt_proc.pid}")
        time.sleep(0.5)
    if trainer.poll() is None:
        truth["odd"].append("trainer still running at the deadline: killed")
        say("trainer still running at the deadline: killing it")
        trainer.kill()
    trainer_rc = trainer.wait()
    truth["trainer_exit_status"] = trainer_rc
    if ckpt_proc is None and not args.skip_ckpt:   # the trainer never reached the hang: still check checkpoints
        ckpt_proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--role", "ckpt",
                                      "--out", str(out)], cwd=str(REPO), env={**env, "CUDA_VISIBLE_DEVICES": ""})
    time.sleep(min(2 * args.interval, 4))   # a couple of samples after the trainer is gone
    sampler.stop.set()
    sampler.join(timeout=10)   # run_agent closes the agent as it ends
    if ckpt_proc is not None:
        try:
            ckpt_proc.wait(timeout=max(5.0, t_begin + args.train_seconds + args.hang_seconds + 55 - time.time()))
        except subprocess.TimeoutExpired:
            ckpt_proc.kill()
            ckpt_proc.wait()
            write_json(out / "checkpoint_audit.json", {"errors": ["checkpoint check timed out and was killed"]})
        if not (out / "checkpoint_audit.json").exists():
            write_json(out / "checkpoint_audit.json",
                       {"errors": [f"checkpoint check exited {ckpt_proc.returncode} without writing its result"]})

    # -- truth ----------------------------------------------------------------------------------
    try:
        phases = json.loads(phases_path.read_text())
    except (OSError, ValueError):
        phases = {}
    samples = read_raw(raw, "gpu_samples")
    steps = read_raw(raw, "training_steps")
    lineage = read_raw(raw, "lineage")
    ts, hs, he = (parse_iso(phases[k]) if phases.get(k) else None for k in ("train_start", "hang_start", "hang_end"))
    diag = sampler.diag
    diag["pids_seen"] = sorted(diag["pids_seen"])
    truth.update({
        "train_start": phases.get("train_start"), "hang_start": phases.get("hang_start"),
        "hang_end": phases.get("hang_end"), "capture_ended": iso_utc(),
        "steps": len(steps), "last_step": max((s["step"] for s in steps), default=None),
        "torch_version": phases.get("torch_version"), "cuda_version": phases.get("cuda_version"),
        "gpu_name_torch": phases.get("gpu_name_torch"), "model": phases.get("model"),
        "accumulation": phases.get("accumulation"), "tokens_per_step": phases.get("tokens_per_step"),
        "first_loss": phases.get("first_loss"), "last_loss": phases.get("last_loss"),
        "spin_cycles_per_call": phases.get("spin_cycles_per_call"), "spin_calls": phases.get("spin_calls"),
        "gpu_samples": len(samples), "lineage_events": [e.get("event") for e in lineage],
        "raw_files": sorted({r["_file"] for r in samples + steps + lineage}),
        "run_mapping": {**diag, "job_mapping_dir": str(jobs),
                        "note": "samples_run_id_from_environ counts samples whose run id the agent found in the "
                                "trainer's /proc/<pid>/environ alone (no job mapping); the raw records use both"},
        "phases": {"before_train": phase_stats(samples, None, ts),
                   "train": phase_stats(samples, ts, hs),
                   "hang": phase_stats(samples, hs, he),
                   "after": phase_stats(samples, he, None)},
        "agent_stats": {"samples": agent.stats.samples, "cpu_ms_per_sample": round(agent.stats.cpu_ms_per_sample, 3),
                        "null_fields": agent.stats.unsupported, "lost_gpus": agent.stats.lost_gpus},
    })
    step_s = sorted(s["step_seconds"] for s in steps if isinstance(s.get("step_seconds"), (int, float)))
    if step_s:
        truth["step_seconds_median"] = step_s[len(step_s) // 2]
        truth["step_seconds_min_max"] = [step_s[0], step_s[-1]]
    odd = truth["odd"] + list(phases.get("odd", []))
    if phases.get("error"):
        odd.append(f"trainer: {phases['error']}")
    if trainer_rc != 0:
        odd.append(f"trainer exited with status {trainer_rc}")
    train, hang = truth["phases"]["train"], truth["phases"]["hang"]
    if not args.dry_run:
        if hang["utilization_ratio_mean"] is not None and hang["utilization_ratio_mean"] < 0.9:
            odd.append(f"hang utilization reads {hang['utilization_ratio_mean']} (<0.9): the spin kernel did not look busy")
        if train["power_watts_mean"] and hang["power_watts_mean"] and hang["power_watts_mean"] > 0.6 * train["power_watts_mean"]:
            odd.append(f"hang power {hang['power_watts_mean']} W is not well below training's {train['power_watts_mean']} W")
        if truth.get("step_seconds_median") and not 0.1 <= truth["step_seconds_median"] <= 1.0:
            odd.append(f"median step {truth['step_seconds_median']} s outside 0.1..1 s")
    if diag["samples_run_id_from_environ"] == 0:
        odd.append("the agent never found GOODPUT_RUN_ID through /proc/<pid>/environ (NVML pids seen: "
                   f"{diag['pids_seen'][:8]}, trainer pid {trainer.pid}): run ids in gpu_samples come from the job mapping")
    if diag["errors"]:
        odd.append(f"sampler errors: {diag['errors']}")
    if any(s["_t"] > hs for s in steps) if hs else False:
        odd.append("steps were logged after hang_start")
    truth["odd"] = odd
    for r in samples + steps + lineage:
        r.pop("_t", None)
        r.pop("_file", None)
    write_json(out / "truth.json", truth)

    ok = trainer_rc == 0 and len(steps) > 0 and len(samples) > 0 and bool(phases.get("hang_end"))
    ck = {}
    try:
        ck = json.loads((out / "checkpoint_audit.json").read_text()).get("summary", {})
    except (OSError, ValueError):
        pass
    say("summary: " + json.dumps({
        "ok": ok, "steps": len(steps), "gpu_samples": len(samples), "loss": [truth["first_loss"], truth["last_loss"]],
        "step_seconds_median": truth.get("step_seconds_median"),
        "train": {k: train[k] for k in ("samples", "power_watts_mean", "utilization_ratio_mean", "sm_clock_mhz_mean")},
        "hang": {k: hang[k] for k in ("samples", "power_watts_mean", "utilization_ratio_mean", "sm_clock_mhz_mean")},
        "run_id_from_environ_samples": diag["samples_run_id_from_environ"], "checkpoint_audit": ck,
        "odd": odd, "seconds": round(time.time() - t_begin, 1)}, default=str))
    return 0 if ok else 1


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="output folder (DIR/home/raw is the Goodput raw zone)")
    p.add_argument("--train-seconds", type=float, default=120.0)
    p.add_argument("--hang-seconds", type=float, default=390.0)
    p.add_argument("--interval", type=float, default=2.0, help="agent sampling interval (s)")
    p.add_argument("--dry-run", action="store_true", help="no GPU: CPU torch and the tests' fake NVML")
    p.add_argument("--skip-ckpt", action="store_true", help="skip the checkpoint check")
    p.add_argument("--end-by", type=float, default=None, help=argparse.SUPPRESS)
    p.add_argument("--role", choices=["capture", "train", "ckpt"], default="capture", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.role == "train":
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        return role_train(args)
    if args.role == "ckpt":
        return role_ckpt(args)
    return role_capture(args)


if __name__ == "__main__":
    sys.exit(main())
