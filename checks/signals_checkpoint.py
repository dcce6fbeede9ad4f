"""The checkpoint signals, registered once (see checks/registry.py).

Each runs as an asset check on the `checkpoints` asset (assets/checkpoints.py), which audits the
files on disk. Integrity (SEV1): a corrupt or missing checkpoint turns a recoverable failure into
a full restart, and it is cheapest to fix while the run that wrote it still holds its state in
memory and can save again — so it pages now. Freshness and size (SEV2): nothing is lost yet, only
the restart cost grows by one interval at a time, so they can wait hours. Entity ids: a
checkpoint is "<run>/<folder or file name>" (the overdue signal speaks of the run). Threshold
reasons are in docs/signals.md, "Checkpoint signals".
"""

from checks import detectors_checkpoint as d
from checks.registry import REGISTRY, Signal

_AUDIT = {"family": "checkpoint", "entity": "checkpoint", "tier": "SEV1", "owner": "platform", "asset": "checkpoints",
          "inputs": ("lineage_events",), "query": "detect/checkpoint_audits", "entity_column": "checkpoint",
          "thresholds": {"min_problems": 1.0}}

REGISTRY.register(Signal(
    name="checkpoint_file_mismatch",
    title="Checkpoint files missing or extra",
    description=(
        "A file the checkpoint's manifest, safetensors index or .metadata lists is not on disk, or a "
        "file is there that it does not list: a restart from it fails or loads the wrong state."
    ),
    detector=d.problems_detector(("missing", "extra")),
    fault_types=("checkpoint_missing_shard",),
    **_AUDIT,
))

REGISTRY.register(Signal(
    name="checkpoint_corrupt",
    title="Checkpoint size or checksum mismatch",
    description=(
        "A checkpoint file's size or sha256 differs from its manifest, or the manifest or index "
        "itself is unreadable: the bytes a restart would load are not the ones the run saved."
    ),
    detector=d.problems_detector(("size_mismatch", "sha256_mismatch", "manifest_invalid")),
    fault_types=("checkpoint_bit_flip", "checkpoint_truncated"),
    **_AUDIT,
))

REGISTRY.register(Signal(
    name="checkpoint_truncated",
    title="Checkpoint file empty or truncated",
    description=(
        "A checkpoint file is empty, or its own structure says it was cut short (safetensors header "
        "length and tensor offsets past the end of the file; a torch.save zip without its directory)."
    ),
    detector=d.problems_detector(("zero_byte", "truncated")),
    fault_types=("checkpoint_truncated",),
    **_AUDIT,
))

REGISTRY.register(Signal(
    name="checkpoint_partial_write",
    title="Checkpoint with a leftover partial write",
    description=(
        "A temporary or partial file (.tmp, .partial, .incomplete) is left in the checkpoint: the "
        "save was interrupted and the checkpoint may be older or thinner than the run believes."
    ),
    detector=d.problems_detector(("partial_write",)),
    fault_types=("checkpoint_partial_write",),
    **_AUDIT,
))

REGISTRY.register(Signal(
    name="checkpoint_shards_incomplete",
    title="Checkpoint shard set incomplete",
    description=(
        "The checkpoint's shard set has a hole (a rank's .distcp shard, a -0000N-of-0000M safetensors "
        "shard, or the .metadata file): no rank can load it."
    ),
    detector=d.problems_detector(("shards_incomplete",)),
    fault_types=("checkpoint_missing_shard",),
    **_AUDIT,
))

REGISTRY.register(Signal(
    name="checkpoint_path_escape",
    title="Checkpoint manifest path escapes its folder",
    description=(
        "The checkpoint's manifest or index names a path outside the checkpoint folder "
        "(../../etc/passwd, an absolute path): never read; the manifest is wrong or tampered with."
    ),
    detector=d.problems_detector(("path_escape",)),
    fault_types=("checkpoint_path_escape",),
    **_AUDIT,
))

REGISTRY.register(Signal(
    name="checkpoint_overdue",
    family="checkpoint",
    entity="run",
    tier="SEV2",
    owner="platform",
    title="Checkpoint overdue",
    description=(
        "The run has progressed well past its own checkpoint interval (in steps) since its last "
        "save: a save failed or was switched off, and a restart would lose ever more work."
    ),
    asset="checkpoints",
    inputs=("training_baselines", "lineage_events"),   # step_ends: the baselines write it
    query="detect/checkpoint_overdue",
    detector=d.checkpoint_overdue,
    thresholds={
        "overdue_factor": 1.5,          # half an interval past a save that did not happen
        "min_overdue_seconds": 900.0,   # and 15 minutes: a restart losing less is not worth a ticket
        "min_saves": 2.0,               # two saves give the run's own interval
        "lookback_seconds": 3600.0,
    },
    fault_types=("checkpoint_overdue",),
))

REGISTRY.register(Signal(
    name="checkpoint_size_anomaly",
    direction="outside",
    family="checkpoint",
    entity="checkpoint",
    tier="SEV2",
    owner="platform",
    title="Checkpoint size anomaly",
    description=(
        "A checkpoint is much smaller or larger than its run's previous ones: the optimizer state "
        "or a shard was not saved, or the model or its precision changed."
    ),
    asset="checkpoints",
    inputs=("lineage_events",),
    query="detect/checkpoint_size",
    detector=d.checkpoint_size_anomaly,
    thresholds={
        "min_ratio": 0.8,           # same model, same optimizer: sizes agree to well under 1 %
        "max_ratio": 1.25,
        "predecessors": 5.0,
        "min_predecessors": 2.0,
    },
    fault_types=("checkpoint_weights_only",),
    entity_column="checkpoint",
))
