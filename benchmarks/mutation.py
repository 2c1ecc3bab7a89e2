"""Mutation testing of the core's rule modules: one AST change at a time, each run against the core's tests (issue 19).

Run: PYTHONPATH=src .venv/bin/python -m benchmarks.mutation [--modules core/preemption.py ...] [--limit N]
     [--seed S] [--only ID ...] [--list] [--tests PATH ...] [--pytest-args "..."] [--timeout S] [--out FILE.json]

Owns: the mutation operators (comparison and boolean operator swaps, arithmetic swaps, integer and boolean constants,
`not` removed, `if` conditions negated, `break`/`continue` dropped, `max`/`min` swapped, a `-> bool` function's
return forced to True or False, a `-> X | None` function's return forced to None, one element dropped from a tuple
assigned to a name containing `key` — the per-cycle cache keys), the enumeration of a module's mutants in a stable
order (their ids `module:line:col:operator` do not change while the module does not), a sample of them, and running
each mutant against a test selection in a scratch copy of the `allotment` package.

The default test selection is the core's tests without the equivalence fixture (test_equivalence.py,
test_compiled_core.py), which notices any change of behaviour but checks no promise: a mutant counts as killed only
when a promise or scenario test fails. Fixed-example files run before the property files, with -x, so most kills
cost seconds (the fixed-example files run first, on their own; the property files only for the mutants that
pass them); a surviving mutant costs one whole run of the selection (30 s at the default --examples-scale 0.2 on
an idle core).

Must not: change the working tree (mutants are written only into a temporary copy, put first on PYTHONPATH), or
judge which survivors are equivalent — that is a reading of the code, recorded in docs/measurements/mutation.md.

Why a stdlib `ast` script rather than mutmut 3.8 or cosmic-ray 8.7 (both on the index): neither drops an element of
a cache key (the mutant the issue found: the promised money left out of the funding caches' keys); mutmut first runs
the whole suite to map tests to functions and injects every mutant at once behind a trampoline call in each mutated
function, and cosmic-ray needs a session database and a config per run — on two shared cores, a small script that
takes a module list, a sample size and a test selection does what is needed with no new dependency.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "src" / "allotment"
DEFAULT_MODULES = ("core/funding.py", "core/preemption.py", "core/capacity.py")
EXCLUDED_TESTS = ("test_equivalence.py", "test_compiled_core.py")
DEFAULT_PYTEST_ARGS = "-x -q -n 0 -p no:cacheprovider --hypothesis-seed=0"

_COMPARE_SWAPS: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
}
_BINOP_SWAPS: dict[type[ast.operator], type[ast.operator]] = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.FloorDiv,
    ast.FloorDiv: ast.Mult,
    ast.Div: ast.Mult,
}


@dataclass(frozen=True)
class Mutant:
    """One change to one module: where, which operator, and what it does in words."""

    module: str
    index: int
    """Position of the changed node in ast.walk order (with `variant`, what locates the change)."""
    variant: int
    line: int
    col: int
    operator: str
    description: str

    @property
    def id(self) -> str:
        return f"{self.module}:{self.line}:{self.col}:{self.operator}"


@dataclass
class Outcome:
    mutant: str
    description: str
    status: str
    """killed, survived, timeout (counted as killed), invalid or error (not counted: the mutant does not compile,
    or pytest could not run)."""
    seconds: float
    failed: str
    """The first failing test, when killed."""


Apply = Callable[[ast.AST, dict[int, ast.AST]], None]
"""Changes the node (found again in a fresh parse) in place, given each node's parent by id."""


def _replace_in_parent(parent: ast.AST, old: ast.AST, new: ast.AST) -> None:
    for field, value in ast.iter_fields(parent):
        if value is old:
            setattr(parent, field, new)
            return
        if isinstance(value, list):
            for i, item in enumerate(value):
                if item is old:
                    value[i] = new
                    return
    raise ValueError("node not found in its parent")


def _annotation_ids(tree: ast.AST) -> set[int]:
    """Nodes inside type annotations, docstrings and __slots__: changing them changes no behaviour worth testing."""
    out: set[int] = set()

    def mark(node: ast.AST | None) -> None:
        if node is not None:
            out.update(id(n) for n in ast.walk(node))

    for node in ast.walk(tree):
        if isinstance(node, ast.arg):
            mark(node.annotation)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            mark(node.returns)
        elif isinstance(node, ast.AnnAssign):
            mark(node.annotation)
        elif _is_slots(node) or _is_docstring(node):
            mark(node)
    return out


def _is_slots(node: ast.AST) -> bool:
    return isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__slots__" for t in node.targets)


def _is_docstring(node: ast.AST) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


def _returns(fn: ast.FunctionDef) -> str:
    return "" if fn.returns is None else ast.unparse(fn.returns)


def _function_returns(tree: ast.AST) -> dict[int, str]:
    """Each return statement's enclosing function's return annotation, by the return's id."""
    out: dict[int, str] = {}
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef):
            todo: list[ast.AST] = list(fn.body)
            while todo:
                node = todo.pop()
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
                    continue
                if isinstance(node, ast.Return):
                    out[id(node)] = _returns(fn)
                todo.extend(ast.iter_child_nodes(node))
    return out


def _key_tuples(tree: ast.AST) -> set[int]:
    """Tuples assigned to a name containing `key` (the per-cycle cache keys)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Tuple)
            and any(isinstance(t, ast.Name) and "key" in t.id for t in node.targets)
        ):
            out.add(id(node.value))
    return out


def _points(tree: ast.AST) -> Iterator[tuple[ast.AST, int, str, str, Apply]]:
    """(node, variant, operator, description, apply) for every mutation of the module, in ast.walk order."""
    skip = _annotation_ids(tree)
    returns = _function_returns(tree)
    keys = _key_tuples(tree)
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Compare):
            for i, op in enumerate(node.ops):
                new = _COMPARE_SWAPS.get(type(op))
                if new is not None:

                    def swap_cmp(n: ast.AST, _: dict[int, ast.AST], i: int = i, new: type[ast.cmpop] = new) -> None:
                        assert isinstance(n, ast.Compare)
                        n.ops[i] = new()

                    yield (
                        node,
                        i,
                        f"cmp-{type(op).__name__}-{new.__name__}",
                        f"{type(op).__name__} → {new.__name__}",
                        swap_cmp,
                    )
        elif isinstance(node, ast.BoolOp):
            other: type[ast.boolop] = ast.Or if isinstance(node.op, ast.And) else ast.And

            def swap_bool(n: ast.AST, _: dict[int, ast.AST], other: type[ast.boolop] = other) -> None:
                assert isinstance(n, ast.BoolOp)
                n.op = other()

            yield (
                node,
                0,
                f"bool-{other.__name__}",
                f"{type(node.op).__name__.lower()} → {other.__name__.lower()}",
                swap_bool,
            )
        elif isinstance(node, ast.BinOp) and type(node.op) in _BINOP_SWAPS:
            new_op = _BINOP_SWAPS[type(node.op)]

            def swap_bin(n: ast.AST, _: dict[int, ast.AST], new_op: type[ast.operator] = new_op) -> None:
                assert isinstance(n, ast.BinOp)
                n.op = new_op()

            yield node, 0, f"binop-{new_op.__name__}", f"{type(node.op).__name__} → {new_op.__name__}", swap_bin
        elif isinstance(node, ast.Constant) and isinstance(node.value, bool):
            flipped = not node.value

            def flip(n: ast.AST, _: dict[int, ast.AST], flipped: bool = flipped) -> None:
                assert isinstance(n, ast.Constant)
                n.value = flipped

            yield node, 0, "const-bool", f"{node.value} → {flipped}", flip
        elif isinstance(node, ast.Constant) and isinstance(node.value, int):
            for variant, value in enumerate(sorted({node.value + 1, node.value - 1} - {node.value})):

                def set_int(n: ast.AST, _: dict[int, ast.AST], value: int = value) -> None:
                    assert isinstance(n, ast.Constant)
                    n.value = value

                yield node, variant, f"const-int{value - node.value:+d}", f"{node.value} → {value}", set_int
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):

            def drop_not(n: ast.AST, parents: dict[int, ast.AST]) -> None:
                assert isinstance(n, ast.UnaryOp)
                _replace_in_parent(parents[id(n)], n, n.operand)

            yield node, 0, "not-dropped", "`not` removed", drop_not
        elif isinstance(node, ast.If | ast.While | ast.IfExp):

            def negate(n: ast.AST, _: dict[int, ast.AST]) -> None:
                assert isinstance(n, ast.If | ast.While | ast.IfExp)
                n.test = ast.UnaryOp(ast.Not(), n.test)

            yield node, 0, "cond-negated", "condition negated", negate
        elif isinstance(node, ast.Break | ast.Continue):

            def to_pass(n: ast.AST, parents: dict[int, ast.AST]) -> None:
                _replace_in_parent(parents[id(n)], n, ast.Pass())

            yield node, 0, f"{type(node).__name__.lower()}-dropped", f"{type(node).__name__.lower()} → pass", to_pass
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("max", "min"):
            swapped = "min" if node.func.id == "max" else "max"

            def swap_call(n: ast.AST, _: dict[int, ast.AST], swapped: str = swapped) -> None:
                assert isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                n.func.id = swapped

            yield node, 0, f"call-{swapped}", f"{node.func.id} → {swapped}", swap_call
        elif isinstance(node, ast.Return) and node.value is not None:
            ann = returns.get(id(node), "")
            forced: list[bool | None] = []
            if ann == "bool":
                forced = [True, False]
            elif ann.endswith("| None"):
                forced = [None]
            for variant, result in enumerate(forced):
                if isinstance(node.value, ast.Constant) and node.value.value is result:
                    continue

                def force(n: ast.AST, _: dict[int, ast.AST], result: bool | None = result) -> None:
                    assert isinstance(n, ast.Return)
                    n.value = ast.Constant(result)

                yield node, variant, f"return-{result}", f"return forced to {result}", force
        elif isinstance(node, ast.Tuple) and id(node) in keys and len(node.elts) > 1:
            for variant, elt in enumerate(node.elts):

                def drop(n: ast.AST, _: dict[int, ast.AST], variant: int = variant) -> None:
                    assert isinstance(n, ast.Tuple)
                    del n.elts[variant]

                yield node, variant, f"key-drop{variant}", f"cache key without `{ast.unparse(elt)}`", drop


def mutants_of(module: str) -> list[Mutant]:
    tree = ast.parse((PACKAGE / module).read_text())
    out: list[Mutant] = []
    index = {id(n): i for i, n in enumerate(ast.walk(tree))}
    for node, variant, op, desc, _ in _points(tree):
        line, col = getattr(node, "lineno", 0), getattr(node, "col_offset", 0)
        out.append(Mutant(module, index[id(node)], variant, line, col, op, desc))
    return out


def mutated_source(m: Mutant) -> str:
    tree = ast.parse((PACKAGE / m.module).read_text())
    parents = {id(c): p for p in ast.walk(tree) for c in ast.iter_child_nodes(p)}
    nodes = list(ast.walk(tree))
    for node, variant, op, _, apply in _points(tree):
        if node is nodes[m.index] and variant == m.variant and op == m.operator:
            apply(node, parents)
            return ast.unparse(ast.fix_missing_locations(tree))
    raise LookupError(f"mutant {m.id} not found (has the module changed?)")


def default_tests() -> list[str]:
    """The core's test files without the equivalence fixture: the promise boundaries first, then the other fixed
    examples, the property files last."""
    files = sorted(p for p in (ROOT / "tests" / "core").glob("test_*.py") if p.name not in EXCLUDED_TESTS)
    files.sort(key=lambda p: (not p.name.startswith("test_promise_"), p.name.startswith("test_properties_")))
    return [str(p.relative_to(ROOT)) for p in files]


def _run(
    scratch: Path, tests: list[str], pytest_args: list[str], timeout: float, scale: float
) -> tuple[int | None, str, float]:
    env = dict(os.environ, PYTHONPATH=f"{scratch}{os.pathsep}{ROOT}")
    env["ALLOT_TEST_EXAMPLES_SCALE"] = str(scale)
    cmd = [sys.executable, "-m", "pytest", *pytest_args, *tests]
    began = time.monotonic()
    try:
        done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return None, "", time.monotonic() - began
    failed = next((ln.split(" ")[1] for ln in done.stdout.splitlines() if ln.startswith(("FAILED ", "ERROR "))), "")
    return done.returncode, failed, time.monotonic() - began


def _run_staged(
    scratch: Path, tests: list[str], pytest_args: list[str], timeout: float, scale: float
) -> tuple[int | None, str, float]:
    """The fixed-example files first and, only if they all pass, the property files: most mutants die in the first
    run, which collects a third of the modules."""
    fixed = [t for t in tests if "test_properties_" not in t]
    rest = [t for t in tests if "test_properties_" in t]
    if not fixed or not rest:
        return _run(scratch, tests, pytest_args, timeout, scale)
    rc, failed, secs = _run(scratch, fixed, pytest_args, timeout, scale)
    if rc != 0:
        return rc, failed, secs
    rc, failed, more = _run(scratch, rest, pytest_args, max(1.0, timeout - secs), scale)
    return rc, failed, secs + more


def _forget_bytecode(module: Path) -> None:
    """Drop the cached bytecode of a module whose source was changed back: a .pyc is checked against the source's
    mtime in whole seconds and its size, which a mutant written and restored within one second may share."""
    for pyc in (module.parent / "__pycache__").glob(f"{module.stem}.*.pyc"):
        pyc.unlink()


def _scratch_copy() -> Path:
    scratch = Path(tempfile.mkdtemp(prefix="allotment-mutants-"))
    shutil.copytree(PACKAGE, scratch / "allotment", ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    env = dict(os.environ, PYTHONPATH=f"{scratch}{os.pathsep}{ROOT}")
    probe = "import allotment.core; print(allotment.core.__file__)"
    where = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    if not where.stdout.startswith(str(scratch)):
        raise SystemExit(f"the scratch copy is not the one imported: {where.stdout.strip()}")
    return scratch


def _stop(signum: int, frame: object) -> None:
    raise SystemExit(f"stopped by signal {signum}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--modules", nargs="+", default=list(DEFAULT_MODULES), help="paths under src/allotment")
    ap.add_argument("--limit", type=int, default=0, help="a random sample of this many mutants (0: all)")
    ap.add_argument("--seed", type=int, default=19, help="seed of the sample")
    ap.add_argument("--only", nargs="*", default=[], help="mutant ids to run (as printed by --list)")
    ap.add_argument("--list", action="store_true", help="print the mutants and stop")
    ap.add_argument("--tests", nargs="*", default=None, help="test paths (default: the core's, no equivalence)")
    ap.add_argument("--pytest-args", default=DEFAULT_PYTEST_ARGS)
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per mutant; a timeout counts as killed")
    ap.add_argument(
        "--examples-scale", type=float, default=0.2, help="hypothesis examples per property, times this (tests/core)"
    )
    ap.add_argument("--no-baseline", action="store_true", help="skip the run of the unmutated code")
    ap.add_argument("--out", type=Path, default=None, help="write every outcome as JSON here")
    args = ap.parse_args()

    mutants = [m for mod in args.modules for m in mutants_of(mod)]
    if args.only:
        wanted = set(args.only)
        mutants = [m for m in mutants if m.id in wanted]
    elif args.limit and args.limit < len(mutants):
        mutants = sorted(random.Random(args.seed).sample(mutants, args.limit), key=lambda m: (m.module, m.line, m.col))
    if args.list:
        for m in mutants:
            print(f"{m.id:55} {m.description}")
        print(f"{len(mutants)} mutants")
        return
    tests = args.tests if args.tests is not None else default_tests()
    pytest_args = args.pytest_args.split()
    scratch = _scratch_copy()
    signal.signal(signal.SIGTERM, _stop)  # clean up the scratch copy when stopped
    try:
        if not args.no_baseline:
            rc, failed, secs = _run(scratch, tests, pytest_args, args.timeout, args.examples_scale)
            print(f"baseline: rc={rc} in {secs:.0f} s {failed}", flush=True)
            if rc != 0:
                raise SystemExit("the unmutated code fails the selection: fix that first")
        outcomes: list[Outcome] = []
        for n, m in enumerate(mutants, 1):
            target = scratch / "allotment" / m.module
            original = target.read_text()
            try:
                source = mutated_source(m)
                compile(source, str(target), "exec")
            except (SyntaxError, ValueError, LookupError) as exc:
                outcomes.append(Outcome(m.id, m.description, "invalid", 0.0, str(exc)))
                continue
            target.write_text(source)
            try:
                rc, failed, secs = _run_staged(scratch, tests, pytest_args, args.timeout, args.examples_scale)
            finally:
                target.write_text(original)
                _forget_bytecode(target)
            # pytest exits 1 when a test fails and 2 when collecting fails (a mutant that breaks an import); any
            # other status means the run itself went wrong, which says nothing about the mutant
            status = "timeout" if rc is None else "survived" if rc == 0 else "killed" if rc in (1, 2) else "error"
            outcomes.append(Outcome(m.id, m.description, status, round(secs, 1), failed))
            if args.out is not None:  # after every mutant, so that a run stopped early keeps what it found
                args.out.write_text(json.dumps([asdict(o) for o in outcomes], indent=1, ensure_ascii=False) + "\n")
            print(f"[{n}/{len(mutants)}] {status:8} {secs:5.0f}s {m.id:50} {m.description}  {failed}", flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    counted = [o for o in outcomes if o.status not in ("invalid", "error")]
    killed = sum(o.status in ("killed", "timeout") for o in counted)
    print(f"\nkilled {killed} / {len(counted)} ({len(outcomes) - len(counted)} invalid or not run)")
    for o in counted:
        if o.status == "survived":
            print(f"  survived: {o.mutant:50} {o.description}")


if __name__ == "__main__":
    main()
