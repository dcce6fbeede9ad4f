"""Physics constants of the simulated cluster (docs/scenario.md, "What the simulator models"), shared
by the record builders and the fault effects."""

import numpy as np

# GPU states, in override order (a hang wins over a checkpoint save, etc.).
IDLE, STARTUP, TRAIN, CHECKPOINT, HANG = range(5)
EVAL, ALLOC_IDLE = 5, 6  # drawn from a second stream, so older scenarios keep their bytes

# Physics constants (see docs/scenario.md, "What the simulator models").
STEP_SIGMA = 0.04  # lognormal sigma of step time
SLOW_STEP_P = 0.005  # share of straggler steps ...
SLOW_STEP_FACTOR = (1.5, 3.0)  # ... and how much slower they are
RANK_SKEW_S = 0.005  # ranks finish a synchronous step within a few ms
STARTUP_S = (60.0, 180.0)  # run_started -> first step begins
SAVE_S = (20.0, 60.0)  # checkpoint save pause
EVAL_S = (60.0, 180.0)  # evaluation pause
CONTEXT_BYTES = 550_000_000  # CUDA context etc. on top of the allocator's reservation
IDLE_MEMORY_BYTES = 536_870_912
BOOST_HZ = np.array([1_980_000_000, 1_965_000_000, 1_950_000_000])
IDLE_HZ = 345_000_000
THERMAL_TAU_S = 90.0
LOSS_SCALE = 65536.0
COMPUTE_SHARE = 0.8  # compute_seconds / step time of a healthy step
COLLECTIVE_SHARE = 0.188  # what is left after data (~1.2 %) and compute
# A hung rank's GPU spins in an NCCL kernel that never completes: utilization 100 %, clocks at boost,
# and a draw that is mostly the board's static power. The real H200 capture (tests/fixtures/h200_hang,
# truth.json "phases"."hang") drew 120.5 W of its 700 W limit, 0.171-0.174 of it (p1-p99 of 195 samples);
# static power differs between boards and with temperature by a few hundredths of the limit, so the
# share is drawn from this range around the capture, up to issue 17's "about a fifth".
HANG_POWER_SHARE = (0.16, 0.20)

# fp16 dynamic loss scaling (torch.cuda.amp.GradScaler / Megatron style).
SCALE_GROWTH_INTERVAL = 2000  # steps without overflow before the scale doubles
SCALE_MIN = 1.0
HEALTHY_OVERFLOW_P = 1 / 1500  # at the top scale, with ordinary noise: an occasional overflow

# Fault shapes (see docs/scenario.md, "Fault types").
INF_SHARE = 0.1  # non-finite losses written as "Infinity" rather than "NaN"
LR_DROP_DEPTH = 0.08  # a step LR decay removes this share (x (1 - factor)) of the loss excess ...
LR_DROP_STEPS = 300.0  # ... over about this many steps
FRAG_BYTES = 10e9  # memory_fragmentation: reserved - allocated grows by magnitude x this
THERMAL_LAG_S = 60.0  # thermal_throttle: seconds from onset until the GPU throttles
XID_APP = (13, 31, 43)  # application XIDs (graphics exception, MMU fault, channel reset)
XID_FALLEN_OFF_BUS = 79
# throttle_reasons bits (NVML nvmlClocksThrottleReason*)
# throttle_reasons bits (NVML nvmlClocksThrottleReason*)
SW_POWER_CAP, HW_SLOWDOWN, SW_THERMAL, HW_THERMAL, HW_POWER_BRAKE = 0x4, 0x8, 0x20, 0x40, 0x80
