"""Loading a configuration: YAML file or directory → validated `AllotmentConfig`, or a `ConfigError`.

Owns: the pipeline (compose YAML with positions, reject duplicate keys, validate fields with pydantic, then
the cross-section rules) and the translation of pydantic's errors into field-level problems with lines,
readable reasons and suggestions for misspelt keys.

Must not: build core types (see `convert`) or print anything.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails
from yaml.nodes import Node

from allotment.config.checks import cross_check
from allotment.config.errors import ConfigError, Loc, Problem, format_path
from allotment.config.fields import EMAIL_PATTERN, NAME_PATTERN, UNIX_ACCOUNT_PATTERN
from allotment.config.schema import AllotmentConfig
from allotment.config.yamlsource import check_duplicate_keys, compose_path, construct, locate


def unwrap_type(tp: Any) -> Any:
    """The type inside Annotated[...] and Optional[...] (X | None) wrappers."""
    while True:
        origin = typing.get_origin(tp)
        if origin is typing.Annotated:
            tp = typing.get_args(tp)[0]
        elif origin in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(tp) if a is not type(None)]
            if len(args) != 1:
                return tp
            tp = args[0]
        else:
            return tp


def _model_keys(loc: Loc) -> list[str] | None:
    """The keys allowed in the mapping at `loc`, found by following the schema's type annotations."""
    tp: Any = AllotmentConfig
    for part in loc:
        tp = unwrap_type(tp)
        origin = typing.get_origin(tp)
        if isinstance(part, int) and origin in (tuple, list):
            tp = typing.get_args(tp)[0]
        elif isinstance(part, str) and isinstance(tp, type) and issubclass(tp, BaseModel):
            field = tp.model_fields.get(part)
            if field is None:
                return None
            tp = field.annotation
        elif isinstance(part, str) and origin is dict:
            tp = typing.get_args(tp)[1]
        else:
            return None
    tp = unwrap_type(tp)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return list(tp.model_fields)
    return None


def _reason(error: ErrorDetails, loc: Loc) -> str:
    kind = error["type"]
    msg = str(error["msg"])
    given = error.get("input")
    if kind == "missing":
        return "required field is missing"
    if kind == "extra_forbidden":
        key = str(loc[-1]) if loc else "?"
        allowed = _model_keys(loc[:-1]) or []
        close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        return f"unknown key '{key}'{hint} (allowed: {', '.join(allowed)})" if allowed else f"unknown key '{key}'"
    if kind == "value_error":
        return msg.removeprefix("Value error, ")
    if kind == "string_pattern_mismatch":
        pattern = error.get("ctx", {}).get("pattern")
        if pattern == NAME_PATTERN:
            return f"{given!r} is not a valid name (letters, digits, '.', '_', '-'; first a letter or digit)"
        if pattern == EMAIL_PATTERN:
            return f"{given!r} is not an email address"
        if pattern == UNIX_ACCOUNT_PATTERN:
            return f"{given!r} is not a Unix account name (lower-case letters, digits, '_', '.', '-'; first a letter)"
    if kind in ("too_short", "too_long") and isinstance(given, list | tuple | dict | str):
        return msg
    if kind in ("model_type", "dict_type"):
        return f"expected a mapping, got {type(given).__name__}"
    if kind in ("tuple_type", "list_type"):
        return f"expected a list, got {type(given).__name__}"
    return f"{msg} (got {given!r})"


def _problem(root: Node | None, loc: Loc, reason: str) -> Problem:
    file, line = locate(root, loc)
    return Problem(format_path(loc), reason, line, file)


def parse_config(data: Mapping[str, Any], root: Node | None = None) -> AllotmentConfig:
    """Validate plain data (as YAML would give it) into an AllotmentConfig, or raise ConfigError.

    `root` is the YAML node tree the data came from, used only to report lines."""
    if not isinstance(data, Mapping):
        raise ConfigError([_problem(root, (), "the document must be a mapping of sections")])
    try:
        cfg = AllotmentConfig.model_validate(dict(data))
    except ValidationError as exc:
        problems = []
        errors = exc.errors()
        locs = [tuple(e["loc"]) for e in errors]
        for error in errors:
            raw = tuple(error["loc"])
            if error["type"] == "too_short" and any(len(o) > len(raw) and o[: len(raw)] == raw for o in locs):
                continue  # a list whose items failed is "too short after validation": the items say why
            loc: Loc = tuple(p for p in raw if p != "[key]")
            reason = _reason(error, loc)
            if "[key]" in raw:
                reason = f"key {loc[-1]!r}: {reason}"
            problems.append(_problem(root, loc, reason))
        raise ConfigError(_ordered(problems)) from None
    complaints = cross_check(cfg)
    if complaints:
        raise ConfigError(_ordered([_problem(root, loc, reason) for loc, reason in complaints]))
    return cfg


def _ordered(problems: list[Problem]) -> list[Problem]:
    return sorted(problems, key=lambda p: (p.file or "", p.line if p.line is not None else 0))


def load_config(path: str | Path) -> AllotmentConfig:
    """Load and validate a configuration from one YAML file, or from a directory whose YAML files' sections
    merge (mappings key by key, lists concatenated in file-name order). Raises ConfigError."""
    root = compose_path(Path(path))
    if root is not None:
        duplicates = check_duplicate_keys(root)
        if duplicates:
            raise ConfigError(duplicates)
    return parse_config(construct(root), root)
