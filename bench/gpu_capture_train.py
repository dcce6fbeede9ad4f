"""The GPU capture's trainer (`bench/gpu_capture.py --role train`): a bf16 MLP regressing a fixed random
teacher on cuda:0, logging every step through sources.client.GoodputClient, then a hang that looks like a
stuck NCCL collective (alive, a spin kernel resident, memory held, no steps logged)."""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

from gpu_capture_common import RUN_ID, TARGET_STEP_SECONDS, say, write_json  # first: puts the repo on sys.path

from sources.client import GoodputClient, iso_utc  # stdlib only

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
