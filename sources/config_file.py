"""Configuration files as pydantic models: read once, validated at load, and every problem reported
the same way, in one line: `file: key: problem` (ConfigError). Used for thresholds.yaml, the
alerting routes, the sources file and the checks' playbooks, so a syntax error, a binary file, an
unknown name or a value of the wrong shape never surfaces as a bare traceback.

Pure (pyyaml + pydantic): every layer may use it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)


class ConfigError(ValueError):
    """A configuration file that cannot be used: one line saying which file, which key, what is wrong."""


def config_error(path: str | Path | None, key: str, problem: str) -> ConfigError:
    """The one formatter: `file: key: problem` (the key is left out when the whole file is at fault)."""
    where = str(path) if path else "configuration"
    return ConfigError(f"{where}: {key}: {problem}" if key else f"{where}: {problem}")


def _key(loc: tuple, prefix: str = "") -> str:
    return prefix + ".".join(str(p) for p in loc if not str(p).startswith("function-"))


def from_validation(path: str | Path | None, error: ValidationError, prefix: str = "") -> ConfigError:
    """The first problem pydantic found, as `file: key: problem` (+ how many more there are)."""
    problems = error.errors()
    first = problems[0]
    message = str(first["msg"]).removeprefix("Value error, ")   # our validators' messages read alone
    if "input" in first and first["type"] not in ("missing", "extra_forbidden") and not isinstance(first["input"], dict | list):
        message += f" (got {first['input']!r:.60})"
    more = f" (and {len(problems) - 1} more problem(s))" if len(problems) > 1 else ""
    return config_error(path, _key(first["loc"], prefix) or "(top level)", message + more)


def read_yaml(path: str | Path, missing_ok: bool = False) -> Any:
    """A YAML file's content (None for an empty or, with missing_ok, an absent file); ConfigError
    for a file that cannot be read, is not text or is not valid YAML."""
    p = Path(path)
    try:
        text = p.read_bytes().decode("utf-8")
    except FileNotFoundError:
        if missing_ok:
            return None
        raise config_error(p, "", "no such file") from None
    except IsADirectoryError:
        raise config_error(p, "", "is a directory, not a YAML file") from None
    except OSError as error:
        raise config_error(p, "", f"cannot read it ({error.strerror})") from None
    except UnicodeDecodeError as error:
        raise config_error(p, "", f"not UTF-8 text (byte {error.start}): is it the right file?") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise config_error(p, "", f"not valid YAML: {where}{problem}") from None


def load_model(path: str | Path, model: type[M], data: Any = None, prefix: str = "", empty: Any = None) -> M:
    """Validate `data` (read from `path` when None) as `model`; ConfigError `file: key: problem`."""
    if data is None:
        data = read_yaml(path)
    if data is None:
        data = {} if empty is None else empty
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise from_validation(path, error, prefix) from None
