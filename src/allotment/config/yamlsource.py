"""YAML input with positions: composing files into node trees, merging them, and mapping paths to lines.

Owns: the YAML loader (floats become `Decimal`, so credits never pass through binary floating point), the
composition of one file or a directory of files into a single node tree (mappings merge key by key, sequences
concatenate), duplicate-key detection, and `locate()` which turns a data path into a file and line.

Must not: know the configuration's schema; it deals in YAML nodes and plain data only.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from allotment.config.errors import ConfigError, Loc, Problem, format_path

YAML_SUFFIXES = (".yaml", ".yml")


class DecimalLoader(yaml.SafeLoader):
    """A safe loader whose floats are `Decimal`s, exactly as written."""


def _construct_decimal(loader: yaml.SafeLoader, node: ScalarNode) -> Decimal:
    text = str(loader.construct_scalar(node)).replace("_", "").strip()
    special = {".inf": "Infinity", "+.inf": "Infinity", "-.inf": "-Infinity", ".nan": "NaN"}
    if text.lower() in special:
        return Decimal(special[text.lower()])
    try:
        return Decimal(text)
    except InvalidOperation:  # YAML 1.1 sexagesimal floats and other oddities: go through the stock parser
        return Decimal(repr(loader.construct_yaml_float(node)))


def _construct_timestamp(loader: yaml.SafeLoader, node: ScalarNode) -> Any:
    """Dates and datetimes as PyYAML builds them; an impossible one (2026-11-31) stays a string, so that
    validation reports it at its field instead of the whole load failing."""
    try:
        return loader.construct_yaml_timestamp(node)
    except ValueError:
        return str(loader.construct_scalar(node))


DecimalLoader.add_constructor("tag:yaml.org,2002:float", _construct_decimal)
DecimalLoader.add_constructor("tag:yaml.org,2002:timestamp", _construct_timestamp)


def _line(node: Node) -> int:
    return int(node.start_mark.line) + 1


def _file(node: Node) -> str | None:
    name = str(node.start_mark.name)
    return None if name.startswith("<") else name


def compose_file(path: Path) -> Node | None:
    """Compose one YAML file into a node tree (None for an empty document); syntax errors → ConfigError."""
    try:
        with path.open(encoding="utf-8") as stream:
            return yaml.compose(stream, Loader=DecimalLoader)
    except OSError as exc:
        raise ConfigError([Problem("", f"cannot read the file: {exc.strerror or exc}", None, str(path))]) from exc
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = int(mark.line) + 1 if mark is not None else None
        reason = " ".join(str(part) for part in (exc.context, exc.problem) if part)
        raise ConfigError([Problem("", f"invalid YAML: {reason}", line, str(path))]) from exc
    except yaml.YAMLError as exc:
        raise ConfigError([Problem("", f"invalid YAML: {exc}", None, str(path))]) from exc


def config_files(path: Path) -> list[Path]:
    """The YAML files that make up a configuration: the file itself, or a directory's *.yaml/*.yml by name."""
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix in YAML_SUFFIXES)
        if not files:
            raise ConfigError([Problem("", "the directory holds no .yaml or .yml files", None, str(path))])
        return files
    if not path.exists():
        raise ConfigError([Problem("", "no such file or directory", None, str(path))])
    return [path]


def _where(node: Node) -> str:
    return f"{_file(node) or '<input>'}:{_line(node)}"


def _merge(a: Node, b: Node, loc: Loc, problems: list[Problem]) -> Node:
    if isinstance(a, MappingNode) and isinstance(b, MappingNode):
        merged: list[tuple[Node, Node]] = list(a.value)
        index = {str(k.value): i for i, (k, _) in enumerate(merged) if isinstance(k, ScalarNode)}
        for key, value in b.value:
            name = str(key.value) if isinstance(key, ScalarNode) else None
            if name is None or name not in index:
                merged.append((key, value))
                if name is not None:
                    index[name] = len(merged) - 1
                continue
            old_key, old_value = merged[index[name]]
            if isinstance(old_value, MappingNode | SequenceNode) and type(old_value) is type(value):
                merged[index[name]] = (old_key, _merge(old_value, value, (*loc, name), problems))
            else:
                problems.append(
                    Problem(
                        format_path((*loc, name)),
                        f"defined in two files ({_where(old_key)} and {_where(key)}); only mappings and lists merge",
                        _line(key),
                        _file(key),
                    )
                )
        return MappingNode(a.tag, merged, a.start_mark, a.end_mark, a.flow_style)
    if isinstance(a, SequenceNode) and isinstance(b, SequenceNode):
        return SequenceNode(a.tag, [*a.value, *b.value], a.start_mark, a.end_mark, a.flow_style)
    raise AssertionError("only mapping and sequence nodes merge")  # callers check the kinds first


def compose_path(path: Path) -> Node | None:
    """Compose a file, or every YAML file of a directory merged into one tree (mappings merge key by key,
    lists concatenate in file-name order; the same scalar key in two files is a problem)."""
    roots: list[Node] = []
    problems: list[Problem] = []
    for file in config_files(path):
        root = compose_file(file)
        if root is None:
            continue
        if not isinstance(root, MappingNode):
            problems.append(Problem("", "the document must be a mapping of sections", _line(root), str(file)))
            continue
        roots.append(root)
    if problems:
        raise ConfigError(problems)
    if not roots:
        return None
    merged = roots[0]
    for root in roots[1:]:
        merged = _merge(merged, root, (), problems)
    if problems:
        raise ConfigError(problems)
    return merged


def check_duplicate_keys(node: Node, loc: Loc = ()) -> list[Problem]:
    """YAML silently keeps the last of two equal keys; a configuration must not."""
    problems: list[Problem] = []
    seen_nodes: set[int] = set()

    def walk(n: Node, here: Loc) -> None:
        if id(n) in seen_nodes:  # anchors and aliases share nodes
            return
        seen_nodes.add(id(n))
        if isinstance(n, MappingNode):
            seen: dict[str, Node] = {}
            for key, value in n.value:
                name = str(key.value) if isinstance(key, ScalarNode) else None
                if name is not None and name in seen:
                    problems.append(
                        Problem(
                            format_path((*here, name)),
                            f"duplicate key '{name}' (first at line {_line(seen[name])})",
                            _line(key),
                            _file(key),
                        )
                    )
                elif name is not None:
                    seen[name] = key
                walk(value, (*here, name) if name is not None else here)
        elif isinstance(n, SequenceNode):
            for i, item in enumerate(n.value):
                walk(item, (*here, i))

    walk(node, loc)
    return problems


def construct(node: Node | None) -> Any:
    """Build plain Python data from a node tree (with Decimal floats)."""
    if node is None:
        return {}
    loader = DecimalLoader("")
    try:
        return loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = int(mark.line) + 1 if mark is not None else None
        name = None if mark is None or str(mark.name).startswith("<") else str(mark.name)
        raise ConfigError([Problem("", f"invalid YAML: {exc.problem}", line, name)]) from exc
    finally:
        loader.dispose()


def locate(root: Node | None, loc: Loc) -> tuple[str | None, int | None]:
    """File and 1-based line of the deepest node along `loc` (a mapping key's line for keys, the parent's line
    for a key that is missing)."""
    if root is None:
        return None, None
    node: Node = root
    where: Node = root
    for part in loc:
        if isinstance(node, MappingNode) and isinstance(part, str):
            for key, value in node.value:
                if isinstance(key, ScalarNode) and str(key.value) == part:
                    where, node = key, value
                    break
            else:
                break
        elif isinstance(node, SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
            node = node.value[part]
            where = node
        else:
            break
    return _file(where), _line(where)
