"""Stacking the rows of frames some of which are empty or have a column with no values.

The incremental incident fold (assets/incidents_incremental.py) joins rows read by SQL with rows
built in pandas; either side is often empty, or a column (a clearing time, a run) all missing on one
side. pandas decides the stacked dtypes without those entries and warns that it will count them
(FutureWarning); `stack` keeps today's dtypes and values without the warning.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd


def stack(frames: Iterable[pd.DataFrame], columns: list[str]) -> pd.DataFrame:
    """The rows of `frames` one after another (index renumbered); `columns` only when none has rows.
    Empty frames are left out, and a column all missing in a frame takes the dtype of the frames
    with values in it, where they agree on one that holds a missing value."""
    frames = [f for f in frames if not f.empty]
    if not frames:
        return pd.DataFrame(columns=columns)
    for column in dict.fromkeys(c for f in frames for c in f.columns):
        dtypes = {f[column].dtype for f in frames if column in f and f[column].notna().any()}
        if len(dtypes) != 1:
            continue
        (dtype,) = dtypes
        if isinstance(dtype, np.dtype) and dtype.kind in "iub":   # no missing value: pandas stacks those as objects, and so does this
            continue
        frames = [f.astype({column: dtype}) if column in f and f[column].dtype != dtype else f for f in frames]
    return pd.concat(frames, ignore_index=True)
