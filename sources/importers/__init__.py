"""Importers for logs users already have, into raw-zone records (the same JSONL the agent and the
client write; never the warehouse directly). One module per format:

- tensorboard: TensorBoard event files -> training_steps
- megatron: Megatron-LM / Megatron-DeepSpeed / NeMo iteration lines -> training_steps
- hf_trainer: Hugging Face Trainer trainer_state.json -> training_steps
- predictions: prediction logs (JSONL, Parquet) -> predictions, prediction_outcomes
- nvidia_smi: `nvidia-smi --query-gpu ... --format=csv` and `nvidia-smi -q` logs -> gpu_samples
- dcgmi: `dcgmi dmon` output -> gpu_samples
- kernel_xid: `NVRM: Xid` lines of dmesg / journalctl -> gpu_samples

An import rewrites its own producer files (`<run or host>.<kind>-<digest of the input path>`), so
importing the same log again replaces what it wrote instead of doubling it. Every importer returns
one `FileReport` per file (records, lines skipped with reasons, time span); see common.py for the
rules on bad records and files of the wrong kind.
"""

from sources.importers.common import FileReport, ImportErrorForUser, start_times
from sources.importers.dcgmi import import_dcgmi
from sources.importers.hf_trainer import import_hf_trainer
from sources.importers.kernel_xid import import_kernel_xids
from sources.importers.megatron import import_megatron, megatron_steps
from sources.importers.nvidia_smi import import_nvidia_smi
from sources.importers.predictions import import_predictions
from sources.importers.tensorboard import DEFAULT_TAG_MAP, import_tensorboard, parse_tag_map, tensorboard_steps

__all__ = [
    "DEFAULT_TAG_MAP", "FileReport", "ImportErrorForUser", "import_dcgmi", "import_hf_trainer", "import_kernel_xids",
    "import_megatron", "import_nvidia_smi", "import_predictions", "import_tensorboard", "megatron_steps",
    "parse_tag_map", "start_times", "tensorboard_steps",
]
