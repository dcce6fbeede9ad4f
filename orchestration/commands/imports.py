"""`goodput import KIND PATH...`: convert logs users already have into raw-zone records, and say per
file what was imported (records, lines skipped with reasons, time span covered).

    goodput import megatron train.log --run-id llm-7b [--start-time 2026-11-30T03:00Z | --start-time FILE=TIME]
    goodput import tensorboard runs/ --run-id llm-7b [--tag train/loss=loss]
    goodput import hf-trainer out/trainer_state.json --run-id ft-1 --start-time 2026-11-30T03:00Z
    goodput import nvidia-smi node-1.csv [--host node-1] [--run-id llm-7b]     (--query-gpu CSV or -q text)
    goodput import dcgmi dmon.txt --host node-1 --start-time ... [--interval 1]
    goodput import kernel-xid kern.log --gpu-map gpus.csv [--host node-1] [--start-time BOOT]
    goodput import predictions preds.jsonl outcomes.parquet [--endpoint fraud]

A file of the wrong kind stops the import before anything is written: one line, exit 2. Then run
`goodput backfill --hours-with-data` to process the hours the import filled.
"""

from __future__ import annotations

from orchestration.commands.common import CliError, use_home

KINDS = ["tensorboard", "megatron", "hf-trainer", "predictions", "nvidia-smi", "dcgmi", "kernel-xid"]


def run_import(args, raw) -> dict:
    from sources import importers as im

    default, per_file = im.start_times(args.start_time)
    kind = args.kind
    if kind == "tensorboard":
        return im.import_tensorboard(args.paths, raw, run_id=args.run_id, rank=args.rank,
                                     tag_map=im.parse_tag_map(args.tag or []) or None)
    if kind == "megatron":
        return im.import_megatron(args.paths, raw, run_id=args.run_id, rank=args.rank, start_time=args.start_time)
    if kind == "hf-trainer":
        return im.import_hf_trainer(args.paths, raw, run_id=args.run_id, rank=args.rank, start_time=default,
                                    per_file=per_file, step_seconds=args.step_seconds)
    if kind == "nvidia-smi":
        return im.import_nvidia_smi(args.paths, raw, host=args.host, run_id=args.run_id)
    if kind == "dcgmi":
        return im.import_dcgmi(args.paths, raw, host=args.host, run_id=args.run_id, start_time=default,
                               interval=args.interval)
    if kind == "kernel-xid":
        return im.import_kernel_xids(args.paths, raw, host=args.host, gpu_map_items=args.gpu_map, run_id=args.run_id,
                                     start_time=default)
    return im.import_predictions(args.paths, raw, endpoint=args.endpoint)


def cmd_import(args) -> int:
    from orchestration.config.home import raw_root
    from sources.importers import ImportErrorForUser

    home = use_home(args.home)
    try:
        result = run_import(args, raw_root(home))
    except ImportErrorForUser as error:
        raise CliError(str(error)) from None
    for report in result["reports"]:
        print(f"  {report.line()}")
    print(f"imported {result['records']} record(s) from {result['inputs']} file(s) into {result['files']} raw file(s)"
          + (f"; {result['rejected']} rejected line(s) will be quarantined on ingest" if result.get("rejected") else "")
          + "\nprocess them with: goodput backfill --hours-with-data" + (f" --home {home}" if args.home else ""))
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("import", help="import training, GPU and prediction logs into the raw zone",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("kind", choices=KINDS)
    p.add_argument("paths", nargs="+", help="files or folders to import")
    p.add_argument("--home")
    p.add_argument("--run-id", help="run id: of the step records (training logs), or the job the GPUs served (GPU logs)")
    p.add_argument("--rank", type=int, default=0, help="rank that wrote the log (default 0)")
    p.add_argument("--start-time", action="append", metavar="TIME or FILE=TIME",
                   help="ISO-8601 UTC time a log without timestamps starts at (repeat FILE=TIME for one file's anchor)")
    p.add_argument("--host", help="host the GPU log is from (default: the file name without extension)")
    p.add_argument("--gpu-map", action="append", metavar="CSV or BUS=INDEX",
                   help="kernel-xid: PCI bus id -> GPU index (nvidia-smi --query-gpu=index,pci.bus_id --format=csv)")
    p.add_argument("--interval", type=float, default=1.0, help="dcgmi: seconds between samples (its -d / 1000; default 1)")
    p.add_argument("--step-seconds", type=float, help="hf-trainer: seconds per step when the state has no train_runtime")
    p.add_argument("--tag", action="append", metavar="TAG=FIELD",
                   help="TensorBoard scalar tag -> step field, e.g. train/loss=loss (repeatable; defaults cover common names)")
    p.add_argument("--endpoint", help="endpoint for prediction records that do not name one")
    p.set_defaults(func=cmd_import)
