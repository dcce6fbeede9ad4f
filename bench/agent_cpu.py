"""CPU cost of the NVML agent per sample (all GPUs of the host), as `goodput agent --stats` reports it.

    python bench/agent_cpu.py              # fake NVML (pynvml's names and errors), 8 GPUs: the agent's own cost
    python bench/agent_cpu.py --real       # the real driver on a GPU host: agent + NVML calls

Process CPU time (user + system) around each sample, averaged; writes the records to a temp raw zone
as the agent does.
"""

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from orchestration.progress import Ticker  # noqa: E402
from sources.nvml_agent import NvmlAgent, run_agent  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--real", action="store_true", help="use the real pynvml (needs a GPU and driver)")
    parser.add_argument("--gpus", type=int, default=8, help="GPUs of the fake host (default 8)")
    parser.add_argument("--samples", type=int, default=500)
    args = parser.parse_args()
    if args.real:
        import pynvml as nvml
    else:
        from tests.helpers import FakeGpu, make_fake_nvml
        nvml = make_fake_nvml([FakeGpu(i, xid_events=True, pids=[1]) for i in range(args.gpus)])
    agent = NvmlAgent(nvml, host="bench")
    with Ticker() as ticker, tempfile.TemporaryDirectory() as raw:   # a status line on a terminal only
        agent.open(progress=lambda i, n, what: ticker.update(f"{what} ({i}/{n})"))
        ticker.update(f"{args.samples} samples of {len(agent.gpus)} GPU(s)")
        stats = run_agent(agent, raw, interval=0, count=args.samples, stats_every=0, log=lambda m: None)
    kind = "real NVML" if args.real else "fake NVML"
    print(f"{kind}, {len(agent.gpus)} GPU(s), {stats.samples} samples: CPU {stats.cpu_ms_per_sample:.3f} ms per sample "
          f"({stats.cpu_ms_per_sample / len(agent.gpus):.3f} ms per GPU); at a 10 s interval that is "
          f"{stats.cpu_ms_per_sample / 10_000:.5%} of one core")
    return 0


if __name__ == "__main__":
    sys.exit(main())
