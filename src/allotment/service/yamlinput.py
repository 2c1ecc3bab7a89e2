"""Validating user documents (job specs, budget plans) given as YAML text or as plain data.

Owns: turning YAML text into data with a node tree for line numbers (reusing allotment.config's loader: exact
decimals, duplicate keys rejected), within bounds (config.limits: at most MAX_YAML_DEPTH levels of nesting, checked
while composing so a deep document never recurses; at most MAX_YAML_VALUES values once aliases are expanded),
refusing any text with a NUL byte at its field, validating the data against a pydantic model, and translating every
pydantic error into a FieldProblem (dotted field path, line, readable reason, a suggestion for a misspelt key).

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
from yaml.composer import ComposerError
from yaml.nodes import MappingNode, Node, SequenceNode

from allotment.config.errors import ConfigError, Loc, format_path
from allotment.config.limits import MAX_YAML_DEPTH, MAX_YAML_VALUES, NUL_REASON
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


class BoundedLoader(DecimalLoader):
    """The configuration's loader, refusing nesting deeper than MAX_YAML_DEPTH while it composes (PyYAML's composer
    recurses once per level: a deeper document would exhaust the stack)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.depth = 0

    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        self.depth += 1
        try:
            if self.depth > MAX_YAML_DEPTH:
                mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
                raise ComposerError(None, None, f"nested deeper than {MAX_YAML_DEPTH} levels", mark)
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def expanded_values(root: Node) -> int:
    """How many values the node tree holds once its aliases are expanded (a shared node counts at each use)."""
    sizes: dict[int, int] = {}
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        if id(node) in sizes:
            continue
        children = _children(node)
        if done or not children:
            sizes[id(node)] = 1 + sum(sizes[id(c)] for c in children)
            if sizes[id(node)] > MAX_YAML_VALUES:
                return sizes[id(node)]
            continue
        stack.append((node, True))
        stack.extend((c, False) for c in children if id(c) not in sizes)
    return sizes[id(root)]


def _children(node: Node) -> list[Node]:
    if isinstance(node, MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, SequenceNode):
        return list(node.value)
    return []


def compose_text(text: str, what: str) -> Node | None:
    """Compose YAML text into a node tree; syntax errors, duplicate keys, too deep or too large a document and NUL
    bytes → Invalid with the line."""
    if "\x00" in text:
        at = text.count("\n", 0, text.index("\x00")) + 1
        raise Invalid(f"the {what} {NUL_REASON}", [FieldProblem("", NUL_REASON, at)])
    try:
        root = yaml.compose(text, Loader=BoundedLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = int(mark.line) + 1 if mark is not None else None
        reason = " ".join(str(part) for part in (exc.context, exc.problem) if part)
        raise Invalid(f"the {what} is not valid YAML", [FieldProblem("", f"invalid YAML: {reason}", line)]) from None
    except yaml.YAMLError as exc:
        raise BadRequest(f"the {what} is not valid YAML: {exc}") from None
    if root is not None:
        if expanded_values(root) > MAX_YAML_VALUES:
            reason = f"the document holds more than {MAX_YAML_VALUES} values once its aliases are expanded"
            raise Invalid(f"the {what} is too large: {reason}", [FieldProblem("", reason, 1)])
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


def _has_nul(data: Any) -> bool:
    """Whether any string (value or key) in `data` holds a NUL byte: the fast scan every document gets."""
    stack = [data]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            if "\x00" in value:
                return True
        elif isinstance(value, Mapping):
            for key, item in value.items():
                if isinstance(key, str) and "\x00" in key:
                    return True
                stack.append(item)
        elif isinstance(value, list | tuple):
            stack.extend(value)
    return False


def nul_fields(data: Any) -> list[Loc]:
    """The paths of every string (value or key) in `data` holding a NUL byte, walked without recursion."""
    if not _has_nul(data):
        return []
    found: list[Loc] = []
    stack: list[tuple[Loc, Any]] = [((), data)]
    while stack:
        loc, value = stack.pop()
        if isinstance(value, str):
            if "\x00" in value:
                found.append(loc)
        elif isinstance(value, Mapping):
            for key, item in value.items():
                if isinstance(key, str) and "\x00" in key:
                    found.append((*loc, key.replace("\x00", "\\0")))
                else:
                    stack.append(((*loc, key), item))
        elif isinstance(value, list | tuple):
            stack.extend(((*loc, i), item) for i, item in enumerate(value))
    return sorted(found, key=str)


def validate(model: type[M], data: Any, root: Node | None, what: str) -> Document[M]:
    """Validate plain data against `model`; every problem becomes a FieldProblem with its line (from `root`)."""
    if not isinstance(data, Mapping):
        line = locate(root, ())[1] if root is not None else None
        raise Invalid(f"the {what} must be a mapping", [FieldProblem("", f"the {what} must be a mapping", line)])
    nul = nul_fields(data)
    if nul:
        found = [FieldProblem(format_path(loc), NUL_REASON, locate(root, loc)[1] if root else None) for loc in nul]
        raise Invalid(f"the {what} is invalid: " + "; ".join(str(p) for p in found), found)
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
    except ValueError:  # an integer of more digits than Python converts (4300)
        reason = "a number in the document has too many digits to be read"
        raise Invalid(f"the {what} cannot be read: {reason}", [FieldProblem("", reason, None)]) from None
    return validate(model, data, root, what)


def from_data(model: type[M], data: Any, what: str) -> Document[M]:
    return validate(model, data, None, what)
