"""The peak FLOPs table: dense peak FLOP/s per GPU model and precision, the denominator of MFU.

The maintained table is `orchestration/config/peak_flops.yaml`; a site adds GPUs or corrects figures in
`GOODPUT_HOME/peak_flops.yaml` (same shape, merged over it by `match`). Both are validated once at
load with pydantic; a bad file is one line naming the file, the key and the fix.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import pydantic

from sources.config_file import ConfigError, load_model

DEFAULT_TABLE = Path(__file__).with_name("peak_flops.yaml")
PRECISIONS = ("bf16", "fp16", "fp8", "tf32", "fp32")


class PeakFlopsError(ConfigError):
    """A peak FLOPs file that does not validate: `file: key: problem; fix`."""


class GpuPeak(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")

    match: str = pydantic.Field(min_length=2)
    tflops: dict[Literal["bf16", "fp16", "fp8", "tf32", "fp32"], pydantic.PositiveFloat]

    @pydantic.field_validator("match")
    @classmethod
    def _lower(cls, value: str) -> str:
        return value.strip().lower()


class PeakTable(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")

    gpus: list[GpuPeak]


def _load(path: Path) -> PeakTable:
    try:
        return load_model(path, PeakTable, empty={"gpus": []})
    except ConfigError as error:
        raise PeakFlopsError(f"{error}; write `gpus: [{{match: \"h100\", tflops: {{bf16: 989.4}}}}]` "
                             f"with precisions from {', '.join(PRECISIONS)}") from None


def peak_table(home: str | Path | None = None) -> dict[tuple[str, str], float]:
    """{(match, precision): peak FLOP/s per GPU}: the maintained table, then the home's file over it."""
    table: dict[tuple[str, str], float] = {}
    paths = [DEFAULT_TABLE] + ([Path(home) / "peak_flops.yaml"] if home is not None else [])
    for path in paths:
        if not path.exists():
            continue
        for gpu in _load(path).gpus:
            for precision, tflops in gpu.tflops.items():
                table[(gpu.match, precision)] = tflops * 1e12
    return table


def as_params(table: dict[tuple[str, str], float]) -> dict[str, list]:
    """The table as the `$peak_*` list parameters the badput SQL zips back into rows."""
    keys = sorted(table)
    return {"peak_patterns": [m for m, _ in keys], "peak_precisions": [p for _, p in keys],
            "peak_flops": [table[k] for k in keys]}
