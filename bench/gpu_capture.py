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
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from sources.client import GoodputClient, iso_utc  # noqa: E402  (stdlib only)

RUN_ID = "h200-capture"
TARGET_STEP_SECONDS = 0.3


def say(message: str) -> None:
    print(f"[gpu_capture {datetime.now(timezone.utc).strftime('%H:%M:%S')}] {message}", flush=True)


def write_json(path: Path, data: dict) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str))
    os.replace(tmp, path)


def parse_iso(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


# =============================================================================== trainer (child process)


def role_train(args) -> int:
    out = Path(args.out)
    phases_path = out / "phases.json"
    phases: dict = {"pid": os.getpid(), "run_id": os.environ.get("GOODPUT_RUN_ID"), "odd": []}

    def save_phases():
        write_json(phases_path, phases)

    import torch

    phases["torch_version"] = torch.__version__
    cuda = torch.cuda.is_available()
    if not cuda and not args.dry_run:
        phases["error"] = "CUDA is not available to torch"
        save_phases()
        say("trainer: CUDA is not available to torch; refusing to run without --dry-run")
        return 2
    device = torch.device("cuda:0" if cuda else "cpu")
    if cuda:
        torch.cuda.init()
        props = torch.cuda.get_device_properties(0)
        phases["gpu_name_torch"] = props.name
        phases["sm_count"] = props.multi_processor_count
        phases["cuda_version"] = torch.version.cuda
        torch.backends.cuda.matmul.allow_tf32 = True
    say(f"trainer pid {os.getpid()} on {device} (torch {torch.__version__}), GOODPUT_RUN_ID={phases['run_id']}")

    client = GoodputClient(run_id=RUN_ID, rank=0, world_size=1, home=out / "home", gpu_index=0,
                           torch_memory_stats=True)
    # Sizes: on the GPU a few wide bf16 layers (real power draw); on the CPU dry run, tiny ones.
    dim, layers, batch = (8192, 6, 16384) if cuda else (256, 3, 512)
    phases.update({"model": f"MLP {layers}x Linear({dim},{dim})+GELU, bf16 autocast, AdamW",
                   "dim": dim, "layers": layers, "micro_batch_rows": batch})
    torch.manual_seed(0)
    blocks = []
    for _ in range(layers):
        blocks += [torch.nn.Linear(dim, dim), torch.nn.GELU()]
    model = torch.nn.Sequential(*blocks[:-1]).to(device)
    teacher = (torch.randn(dim, dim, device=device) / math.sqrt(dim)).to(torch.bfloat16)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.0, betas=(0.9, 0.95))
    peak_lr, warmup = 3e-4, 20
    autocast = torch.autocast(device_type=device.type, dtype=torch.bfloat16)

    def sync():
        if cuda:
            torch.cuda.synchronize()

    def batch_of():
        x = torch.randn(batch, dim, device=device, dtype=torch.bfloat16)
        return x, torch.tanh(x @ teacher)   # a learnable target: loss falls as the MLP fits the teacher

    def micro_step(x, y):
        with autocast:
            loss = torch.nn.functional.mse_loss(model(x).float(), y.float())
        loss.backward()
        return loss

    # Calibrate gradient accumulation so one step takes ~TARGET_STEP_SECONDS.
    x, y = batch_of()
    for _ in range(2):
        micro_step(x, y)
        sync()
    t0 = time.perf_counter()
    micro_step(x, y)
    sync()
    micro = time.perf_counter() - t0
    optimizer.zero_grad(set_to_none=True)
    accum = max(1, min(64, round(TARGET_STEP_SECONDS / max(micro, 1e-4))))
    phases.update({"micro_step_seconds": round(micro, 4), "accumulation": accum,
                   "tokens_per_step": batch * accum})
    say(f"trainer: micro step {micro * 1000:.1f} ms -> {accum} micro batch(es) per step")

    client.run_started(job="gpu-capture", dataset="random-teacher", config_hash=f"mlp-{layers}x{dim}-b{batch}x{accum}",
                       git_sha=None, model=phases["model"])
    phases["train_start"] = iso_utc()
    save_phases()
    start = time.time()
    step, losses = 0, []
    while time.time() - start < args.train_seconds:
        step += 1
        lr = peak_lr * min(1.0, step / warmup)
        for group in optimizer.param_groups:
            group["lr"] = lr
        step_t0 = time.perf_counter()
        data_s = compute_s = 0.0
        loss_sum = 0.0
        for _ in range(accum):
            t = time.perf_counter()
            x, y = batch_of()
            sync()
            data_s += time.perf_counter() - t
            t = time.perf_counter()
            loss = micro_step(x, y)
            loss_sum += float(loss.detach()) / accum   # .item(): syncs
            compute_s += time.perf_counter() - t
        t = time.perf_counter()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        grad_norm = float(grad_norm)
        sync()
        compute_s += time.perf_counter() - t
        step_s = time.perf_counter() - step_t0
        losses.append(loss_sum)
        client.log_step(step, loss=loss_sum, grad_norm=grad_norm, learning_rate=lr, tokens=batch * accum,
                        step_seconds=round(step_s, 6), data_seconds=round(data_s, 6),
                        compute_seconds=round(compute_s, 6))
        if step == 1 or step % 50 == 0:
            say(f"trainer: step {step} loss {loss_sum:.5f} grad_norm {grad_norm:.4f} step {step_s:.3f} s")
    phases["steps"] = step
    phases["first_loss"] = losses[0] if losses else None
    phases["last_loss"] = losses[-1] if losses else None
    phases["hang_start"] = iso_utc()
    save_phases()
    say(f"trainer: {step} steps, loss {phases['first_loss']} -> {phases['last_loss']}; now hanging "
        f"{args.hang_seconds:g} s (spin kernel, no steps)")
    if losses and not (losses[-1] < 0.8 * losses[0]):
        phases["odd"].append(f"loss did not fall by 20%: {losses[0]:.5f} -> {losses[-1]:.5f}")

    # The hang: alive, memory held, one spin kernel resident (like a stuck NCCL collective), no steps.
    hang_end_at = time.time() + args.hang_seconds
    if args.end_by and hang_end_at > args.end_by:   # a slow start (torch import, CUDA init) shortens the hang
        phases["odd"].append(f"hang shortened by {hang_end_at - args.end_by:.1f} s to end by the capture's deadline")
        hang_end_at = args.end_by
    spins = 0
    if cuda:
        torch.cuda._sleep(1_000_000)
        sync()
        t = time.perf_counter()
        torch.cuda._sleep(20_000_000)
        sync()
        cycles_per_s = 20_000_000 / max(time.perf_counter() - t, 1e-6)
        cycles = int(0.1 * cycles_per_s)
        phases["spin_cycles_per_call"] = cycles
        phases["spin_cycles_per_second"] = round(cycles_per_s)
        while time.time() < hang_end_at:
            torch.cuda._sleep(cycles)
            torch.cuda.synchronize()
            spins += 1
    else:
        while time.time() < hang_end_at:   # dry run: no spin kernel on a CPU
            time.sleep(0.1)
            spins += 1
    phases["spin_calls"] = spins
    phases["hang_end"] = iso_utc()
    save_phases()
    say(f"trainer: hang over after {spins} spin calls; exiting without run_ended (as a killed hung job would)")
    client.close()
    return 0


# =============================================================================== checkpoint check (child)


def role_ckpt(args) -> int:
    out = Path(args.out)
    root = out / "ckpt"
    result: dict = {"started": iso_utc(), "cases": [], "errors": []}
    path = out / "checkpoint_audit.json"
    try:
        _ckpt_check(root, result)
    except Exception as error:  # noqa: BLE001 - recorded, never fatal to the capture
        result["errors"].append(f"{type(error).__name__}: {error}\n{traceback.format_exc()}")
    result["ended"] = iso_utc()
    cases = result["cases"]
    result["summary"] = {"cases": len(cases), "as_expected": sum(c.get("as_expected") is True for c in cases),
                         "not_as_expected": [c["name"] for c in cases if c.get("as_expected") is not True],
                         "errors": len(result["errors"])}
    write_json(path, result)
    say(f"ckpt: {result['summary']}")
    return 0


def _ckpt_check(root: Path, result: dict) -> None:
    import torch

    from sources import checkpoint_audit as ca
    from sources.client import file_manifest

    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    result["torch_version"] = torch.__version__
    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 512),
                                torch.nn.LayerNorm(512))
    state = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}

    def record(name, target, expect_flagged, note=""):
        entry = {"name": name, "path": str(Path(target).relative_to(root.parent)), "expect_flagged": expect_flagged,
                 "note": note}
        try:
            audit = ca.audit_checkpoint(target)
            entry.update({"format": audit.format, "files": audit.files, "bytes": audit.bytes,
                          "flagged": not audit.ok, "kinds": sorted({p.kind for p in audit.problems}),
                          "problems": [asdict(p) for p in audit.problems]})
            entry["as_expected"] = entry["flagged"] == expect_flagged
        except Exception as error:  # noqa: BLE001
            entry.update({"error": f"{type(error).__name__}: {error}", "as_expected": False})
        result["cases"].append(entry)
        say(f"ckpt: {name}: format {entry.get('format')} flagged {entry.get('flagged')} {entry.get('kinds', '')}"
            f" (expected {expect_flagged})")

    def copy(src: Path, name: str) -> Path:
        dst = root / "damaged" / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, dst)
        return dst

    def truncate(f: Path, keep: float = 0.5):
        data = f.read_bytes()
        f.write_bytes(data[: int(len(data) * keep)])

    def flip(f: Path, at: float = 0.5, index: int | None = None):
        data = bytearray(f.read_bytes())
        i = int(len(data) * at) if index is None else index
        data[i] ^= 0xFF
        f.write_bytes(bytes(data))

    # --- torch.save (zip) --------------------------------------------------------------------
    ts = root / "torch_save"
    ts.mkdir()
    pt = ts / "model.pt"
    torch.save(state, pt)
    loaded = torch.load(pt, weights_only=True)
    result["torch_save_roundtrip"] = all(torch.equal(loaded[k], state[k]) for k in state)
    record("torch_save intact (file)", pt, False)
    record("torch_save intact (folder)", ts, False)
    d = copy(pt, "torch_truncated.pt")
    truncate(d)
    record("torch_save truncated to half", d, True)
    d = copy(pt, "torch_flipped.pt")
    flip(d, 0.5)
    record("torch_save one byte flipped mid-file, no manifest", d, False,
           "no checksum without a manifest: a flipped data byte leaves the zip structure intact")
    d = copy(pt, "torch_flipped_central_dir.pt")
    flip(d, index=d.read_bytes().rfind(b"PK\x01\x02"))   # the last central-directory entry's signature
    record("torch_save one byte flipped in the zip central directory", d, True)
    # the same file with the client's goodput-manifest.json (sha256): now a flipped byte is caught
    gm = root / "goodput_manifest"
    gm.mkdir()
    shutil.copy2(pt, gm / "model.pt")
    (gm / ca.MANIFEST_NAME).write_text(json.dumps({"run_id": RUN_ID, "step": 1, **file_manifest(gm)}, indent=1))
    record("goodput manifest intact", gm, False)
    d = copy(gm, "goodput_flipped")
    flip(d / "model.pt", 0.5)
    record("goodput manifest, one byte flipped", d, True)
    d = copy(gm, "goodput_truncated")
    truncate(d / "model.pt")
    record("goodput manifest, truncated", d, True)

    # --- torch.distributed.checkpoint ---------------------------------------------------------
    try:
        import torch.distributed.checkpoint as dcp

        dc = root / "dcp"
        try:
            dcp.save(state, checkpoint_id=str(dc), no_dist=True)
            result["dcp_mode"] = "no_dist=True"
        except TypeError:
            dcp.save(state, checkpoint_id=str(dc))
            result["dcp_mode"] = "no process group"
        result["dcp_files"] = sorted(p.name for p in dc.iterdir())
        back = {k: torch.empty_like(v) for k, v in state.items()}
        try:
            dcp.load(back, checkpoint_id=str(dc), no_dist=True)
        except TypeError:
            dcp.load(back, checkpoint_id=str(dc))
        result["dcp_roundtrip"] = all(torch.equal(back[k], state[k]) for k in state)
        record("dcp intact", dc, False)
        shards = sorted(dc.glob("*.distcp"))
        d = copy(dc, "dcp_shard_deleted")
        (d / shards[0].name).unlink()
        record(f"dcp {shards[0].name} deleted ({len(shards)} shard(s))", d, True)
        d = copy(dc, "dcp_metadata_deleted")
        (d / ".metadata").unlink()
        record("dcp .metadata deleted", d, True)
        d = copy(dc, "dcp_shard_truncated")
        truncate(d / shards[0].name)
        record("dcp shard truncated, no manifest", d, False,
               "the audit reads shard names from .metadata, not sizes: a truncated shard needs a manifest")
    except Exception as error:  # noqa: BLE001
        result["errors"].append(f"dcp: {type(error).__name__}: {error}\n{traceback.format_exc()}")

    # --- safetensors, 2 shards + index -------------------------------------------------------
    try:
        from safetensors.torch import load_file, save_file

        st = root / "safetensors"
        st.mkdir()
        keys = sorted(state)
        half = len(keys) // 2
        weight_map, total = {}, 0
        for i, part in enumerate((keys[:half], keys[half:]), 1):
            name = f"model-{i:05d}-of-00002.safetensors"
            save_file({k: state[k] for k in part}, str(st / name), metadata={"format": "pt"})
            weight_map.update({k: name for k in part})
            total += sum(state[k].numel() * state[k].element_size() for k in part)
        (st / ca.SAFETENSORS_INDEX).write_text(json.dumps({"metadata": {"total_size": total},
                                                           "weight_map": weight_map}, indent=1))
        back = {}
        for name in sorted(set(weight_map.values())):
            back.update(load_file(str(st / name)))
        result["safetensors_roundtrip"] = all(torch.equal(back[k], state[k]) for k in state)
        record("safetensors 2 shards intact", st, False)
        record("safetensors shard file intact", st / "model-00001-of-00002.safetensors", False)
        d = copy(st, "st_shard_deleted")
        (d / "model-00002-of-00002.safetensors").unlink()
        record("safetensors shard 2 deleted", d, True)
        d = copy(st, "st_truncated")
        truncate(d / "model-00001-of-00002.safetensors")
        record("safetensors shard 1 truncated", d, True)
        d = copy(st, "st_header_flipped")
        flip(d / "model-00001-of-00002.safetensors", index=2)   # the u64 header length
        record("safetensors shard 1 byte flipped in the header length", d, True)
        d = copy(st, "st_data_flipped")
        flip(d / "model-00001-of-00002.safetensors", 0.7)
        record("safetensors shard 1 byte flipped in tensor data, no manifest", d, False,
               "safetensors has no checksum: a data byte flip is invisible without a manifest")
    except Exception as error:  # noqa: BLE001
        result["errors"].append(f"safetensors: {type(error).__name__}: {error}\n{traceback.format_exc()}")


# =============================================================================== capture (parent)


def load_nvml(dry_run: bool, trainer_pid_box: dict):
    if not dry_run:
        import pynvml
        return pynvml, None
    from tests.test_nvml_agent import FakeGpu, make_fake_nvml  # needs pytest + nvidia-ml-py (the dry run only)

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
