"""Prints the decisions of the equivalence cases (test_equivalence.build_cases) in a canonical JSON form, for
comparing the pure core with its mypyc-compiled build (test_compiled_core.py), and those of every baseline policy
on the same cases (the build compiles allotment.policies too). Run from the repository root:

    PYTHONPATH=. .venv/bin/python -m tests.core.compiled_check             # whichever core is imported
    PYTHONPATH=build/compiled-core:. .venv/bin/python -m tests.core.compiled_check

It also prints, per case, how many objects the cycle left in reference cycles: none, in either build (a compiled
closure that keeps state would make one with its environment).
Numbers are written as floats (a value annotated float may be an int in pure Python and a float when compiled)."""

from __future__ import annotations

import dataclasses
import gc
import json
import pickle
import sys
from enum import Enum
from typing import Any

import allotment.core.cycle
import allotment.policies.kueue
from allotment.core.cycle import AllotmentPolicy
from allotment.policies import make_policy, policy_names
from tests.core.test_equivalence import build_cases


def canon(x: Any) -> Any:
    if x is None or isinstance(x, (bool, str)):
        return x
    if isinstance(x, (int, float)):
        return repr(float(x))
    if isinstance(x, Enum):
        return x.value
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return {f.name: canon(getattr(x, f.name)) for f in dataclasses.fields(x)}
    if isinstance(x, dict):
        return [[canon(k), canon(v)] for k, v in x.items()]  # order kept: it is part of the decision
    if isinstance(x, (list, tuple)):
        return [canon(v) for v in x]
    raise TypeError(f"cannot write {type(x).__name__}")


def main() -> None:
    cases: dict[str, Any] = {}
    garbage: dict[str, int] = {}
    built = build_cases()
    gc.collect()
    gc.disable()
    for name, snap, at in built:
        decisions = AllotmentPolicy().decide(snap, at)
        cases[name] = canon(decisions)
        del decisions
        garbage[name] = gc.collect()  # what the cycle left in reference cycles (test_cycle_garbage.py: nothing)
    baselines = {
        policy: {name: canon(make_policy(policy).decide(snap, at)) for name, snap, at in built}
        for policy in policy_names()
    }
    json.dump(
        {
            "core": allotment.core.cycle.__file__,
            "policies": allotment.policies.kueue.__file__,
            "cases": cases,
            "baselines": baselines,
            "cyclic_garbage": garbage,
            "records": _records_check(),
        },
        sys.stdout,
    )


def _records_check() -> dict[str, bool]:
    """Per decision record type (decision 44): does assigning to a field fail, and does a pickle round trip give an
    equal record? mypy forbids the assignment in our code; the compiled core must also refuse it at run time."""
    from tests.core.test_records import RECORDS

    out: dict[str, bool] = {}
    for name, record in RECORDS.items():
        field = dataclasses.fields(record)[0].name
        try:
            setattr(record, field, getattr(record, field))
            refused = False
        except AttributeError:
            refused = True
        out[f"{name}: refuses assignment"] = refused
        out[f"{name}: pickles"] = pickle.loads(pickle.dumps(record)) == record
    return out


if __name__ == "__main__":
    main()
