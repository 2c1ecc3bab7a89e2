"""Validating user documents (job specs, budget plans) given as YAML text or as plain data.

Owns: turning YAML text into data with a node tree for line numbers (reusing allotment.config's loader: exact
decimals, duplicate keys rejected), validating it against a pydantic model, and translating every pydantic error into
a FieldProblem (dotted field path, line, readable reason, a suggestion for a misspelt key).

Must not: know any one document's schema or rules beyond what its model says.
"""

from __future__ import annotations

import difflib
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails
from yaml.nodes import Node

from allotment.config.errors import ConfigError, Loc, format_path
from allotment.config.load import unwrap_type
from allotment.config.yamlsource import DecimalLoader, check_duplicate_keys, construct, locate
from allotment.service.errors import BadRequest, FieldProblem, Invalid

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True, slots=True)
class Document(Generic[M]):
    """A validated document and, when it came from YAML text, the node tree that gives lines."""

    value: M
    root: Node | None = None

    def line(self, loc: Loc) -> int | None:
        return locate(self.root, loc)[1] if self.root is not None else None

    def problem(self, loc: Loc, reason: str) -> FieldProblem:
        return FieldProblem(format_path(loc), reason, self.line(loc))


def compose_text(text: str, what: str) -> Node | None:
    """Compose YAML text into a node tree; syntax errors and duplicate keys → Invalid with the line."""
    try:
        root = yaml.compose(text, Loader=DecimalLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = int(mark.line) + 1 if mark is not None else None
        reason = " ".join(str(part) for part in (exc.context, exc.problem) if part)
        raise Invalid(f"the {what} is not valid YAML", [FieldProblem("", f"invalid YAML: {reason}", line)]) from None
    except yaml.YAMLError as exc:
        raise BadRequest(f"the {what} is not valid YAML: {exc}") from None
    if root is not None:
        duplicates = check_duplicate_keys(root)
        if duplicates:
            problems = [FieldProblem(p.path, p.reason, p.line) for p in duplicates]
            raise Invalid(f"the {what} has duplicate keys", problems)
    return root


def _keys(model: type[BaseModel], loc: Loc) -> list[str]:
    """The keys (aliases where set) allowed in the mapping at `loc` of `model`."""
    tp: Any = model
    for part in loc:
        tp = unwrap_type(tp)
        origin = typing.get_origin(tp)
        if isinstance(part, int) and origin in (tuple, list):
            tp = typing.get_args(tp)[0]
        elif isinstance(part, str) and isinstance(tp, type) and issubclass(tp, BaseModel):
            found = next((f for n, f in tp.model_fields.items() if (f.alias or n) == part), None)
            if found is None:
                return []
            tp = found.annotation
        elif isinstance(part, str) and origin is dict:
            tp = typing.get_args(tp)[1]
        else:
            return []
    tp = unwrap_type(tp)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return [f.alias or n for n, f in tp.model_fields.items()]
    return []


def reason_of(model: type[BaseModel], error: ErrorDetails, loc: Loc) -> str:
    kind, msg, given = error["type"], str(error["msg"]), error.get("input")
    if kind == "missing":
        return "required field is missing"
    if kind == "extra_forbidden":
        key = str(loc[-1]) if loc else "?"
        allowed = _keys(model, loc[:-1])
        close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        return f"unknown key '{key}'{hint} (allowed: {', '.join(allowed)})" if allowed else f"unknown key '{key}'"
    if kind == "value_error":
        return msg.removeprefix("Value error, ")
    if kind in ("model_type", "dict_type", "model_attributes_type"):
        return f"expected a mapping, got {type(given).__name__}"
    if kind in ("tuple_type", "list_type"):
        return f"expected a list, got {type(given).__name__}"
    if kind == "enum":
        return f"{given!r} is not one of: {error.get('ctx', {}).get('expected', '')}"
    if kind == "string_pattern_mismatch":
        return f"{given!r} is not a valid name (letters, digits, '.', '_', '-'; first a letter or digit)"
    return f"{msg} (got {given!r})"


def validate(model: type[M], data: Any, root: Node | None, what: str) -> Document[M]:
    """Validate plain data against `model`; every problem becomes a FieldProblem with its line (from `root`)."""
    if not isinstance(data, Mapping):
        line = locate(root, ())[1] if root is not None else None
        raise Invalid(f"the {what} must be a mapping", [FieldProblem("", f"the {what} must be a mapping", line)])
    try:
        value = model.model_validate(dict(data))
    except ValidationError as exc:
        problems: list[FieldProblem] = []
        for error in exc.errors():
            loc: Loc = tuple(p for p in error["loc"] if p != "[key]")
            reason = reason_of(model, error, loc)
            if "[key]" in error["loc"]:
                reason = f"key {loc[-1]!r}: {reason}"
            problems.append(FieldProblem(format_path(loc), reason, locate(root, loc)[1] if root is not None else None))
        problems.sort(key=lambda p: (p.line or 0, p.field))
        raise Invalid(f"the {what} is invalid: " + "; ".join(str(p) for p in problems), problems) from None
    return Document(value, root)


def from_text(model: type[M], text: str, what: str) -> Document[M]:
    root = compose_text(text, what)
    try:
        data = construct(root) if root is not None else {}
    except ConfigError as exc:
        problems = [FieldProblem(p.path, p.reason, p.line) for p in exc.problems]
        raise Invalid(f"the {what} is not valid YAML", problems) from None
    return validate(model, data, root, what)


def from_data(model: type[M], data: Any, what: str) -> Document[M]:
    return validate(model, data, None, what)
