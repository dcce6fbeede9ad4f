"""Physical ranges of raw-zone values, as SQL the ingest's parse and fast path both apply.

A record can be well-typed JSON and still impossible: `gpu_index: 1.5` (DuckDB's cast would round
it to GPU 2), a negative counter, power or utilization, a KV-cache ratio of 7.5. Such a line is
quarantined with a reason naming the field and the value, never loaded:

- integer columns take only integral numbers: they are parsed as DOUBLE and cast only when whole
  (and within the column's type);
- `*_ratio` columns lie in [0, 1] (NaN, the contract's "no value", passes);
- counters (`*_total`), sizes (`*_bytes`), power (`*_watts`), clocks (`*_hertz`), durations
  (`*_seconds`) and the counts and indexes below are never negative.

The rules follow the column's name and type (sql/migrations), so a new column of a known kind is
checked without a line here. Column names are plain identifiers (assets/ingest.py checks them).
"""

INTEGER_TYPES = frozenset({"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT"})
NUMBER_TYPES = INTEGER_TYPES | {"DOUBLE", "FLOAT", "REAL"}
NON_NEGATIVE_SUFFIXES = ("_total", "_bytes", "_watts", "_hertz", "_seconds", "_ratio")
NON_NEGATIVE = frozenset({"gpu_index", "rank", "world_size", "step", "tokens", "requests_waiting", "requests_running",
                          "throttle_reasons", "last_xid"})


def parsed_type(kind: str) -> str:
    """The type a field is parsed as: integers as DOUBLE, so that 1.5 is seen rather than rounded."""
    return "DOUBLE" if kind in INTEGER_TYPES else kind


def value(ref: str, name: str, kind: str) -> str:
    """The field as its column's type (an integer only when the number is whole)."""
    return f"TRY_CAST({ref}.{name} AS {kind})" if kind in INTEGER_TYPES else f"{ref}.{name}"


def _rules(ref: str, fields: dict[str, str]) -> list[tuple[str, str, str]]:
    """(field, SQL condition true when the value breaks the rule, why) for every checked field."""
    out = []
    for name, kind in fields.items():
        if kind not in NUMBER_TYPES:
            continue
        v, rules = f"{ref}.{name}", []
        if kind in INTEGER_TYPES:
            rules.append((f"{v} IS NOT NULL AND ({v} <> floor({v}) OR TRY_CAST({v} AS {kind}) IS NULL)", "not an integer"))
        if name.endswith("_ratio"):
            # NaN (allowed by the raw-zone contract: "no value") sorts above every number in DuckDB
            rules.append((f"({v} < 0 OR {v} > 1) AND NOT isnan({v})", "not in [0, 1]"))
        elif name.endswith(NON_NEGATIVE_SUFFIXES) or name in NON_NEGATIVE:
            rules.append((f"{v} < 0", "negative"))
        out += [(name, condition, why) for condition, why in rules]
    return out


def problems(ref: str, fields: dict[str, str]) -> list[str]:
    """One SQL expression per rule: NULL when the value is fine (or absent), else '<field> <value> (<why>)'."""
    return [f"CASE WHEN {condition} THEN '{name} ' || {ref}.{name}::VARCHAR || ' ({why})' END"
            for name, condition, why in _rules(ref, fields)]


def all_in_range_sql(ref: str, fields: dict[str, str]) -> str:
    """True when no rule is broken (the fast path's guard: a boolean, no text built per row)."""
    conditions = [f"coalesce({condition}, false)" for _name, condition, _why in _rules(ref, fields)]
    return f"NOT ({' OR '.join(conditions)})" if conditions else "true"


def reasons_sql(ref: str, fields: dict[str, str]) -> str:
    """The out-of-range fields of a row, comma-separated ('' when none)."""
    return f"concat_ws(', ', {', '.join(problems(ref, fields)) or 'NULL'})"
