"""Job specs: the accepted forms (argv or a shell-like string, durations, defaults) and every problem reported with
its field, line and reason."""

from __future__ import annotations

import pytest

from allotment.core.model import ContractClass, JobKind
from allotment.service.errors import Invalid
from allotment.service.specs import parse_spec, spec_from_data


def test_a_full_spec_parses_with_durations_and_a_split_command() -> None:
    spec = parse_spec(
        "name: eval\nbudget: detection\ncommand: |\n  python eval.py --split 'val 2'\n"
        "resources: {gpus: 2, replicas: 3, clusters: [lab]}\n"
        "contract: {class: opportunistic, slice: 1h30m}\nkind: batch\npriority: -3\ngrace: 90s\n"
        "max_runtime: 2d\nrequeue: false\nworkdir: /scratch\n"
    )
    assert spec.command == ["python", "eval.py", "--split", "val 2"]
    assert (spec.resources.gpus, spec.resources.replicas, spec.total_gpus) == (2, 3, 6)
    assert spec.contract.contract_class is ContractClass.OPPORTUNISTIC and spec.contract.slice == 5400
    assert (spec.priority, spec.grace, spec.max_runtime, spec.requeue) == (-3, 90, 172800, False)
    assert spec.kind is JobKind.BATCH and spec.workdir == "/scratch"


def test_defaults_are_one_gpu_guaranteed_with_the_slice_and_grace_left_to_the_policy() -> None:
    spec = spec_from_data({"budget": "x", "command": ["run"]}).value
    assert (spec.total_gpus, spec.contract.slice, spec.grace, spec.requeue) == (1, None, None, True)
    assert spec.contract.contract_class is ContractClass.GUARANTEED and spec.env == {}


@pytest.mark.parametrize(
    ("text", "field", "line", "reason"),
    [
        ("budget: x\ncommand: [a]\nresources:\n  gpus: 0\n", "resources.gpus", 4, "CPU-only work (0 GPUs) is not"),
        ("budget: x\ncommand: [a]\nresources:\n  gpus: 1.5\n", "resources.gpus", 4, "fractional GPUs are not"),
        ("budget: x\ncommand: [a]\nresources:\n  gpus: -2\n", "resources.gpus", 4, "at least 1 GPU"),
        ("budget: x\ncommand: [a]\nresources: 8\n", "resources", 3, "expected a mapping"),
        ("budget: x\ncommand: [a]\ncontract:\n  klass: guaranteed\n", "contract.klass", 4, "did you mean 'class'"),
        ("budget: x\ncommand: 'unterminated \"quote'\n", "command", 2, "cannot be split"),
        ("budget: x\ncommand: [a]\npriority: 5000\n", "priority", 3, "less than or equal to 1000"),
        ("budget: x\ncommand: [a]\nkind: cron\n", "kind", 3, "not one of"),
        ("budget: x\ncommand: [a]\nenv: {ALLOT_JOB_ID: y}\n", "env", 3, "set by the executor"),
        ("budget: x\ncommand: [a]\nenv: {'bad name': y}\n", "env.bad name", 3, "key 'bad name'"),
        ("budget: 'no spaces'\ncommand: [a]\n", "budget", 1, "not a valid name"),
        ("command: [a]\n", "budget", 1, "required field is missing"),
        ("- budget: x\n", "", 1, "must be a mapping"),
        ("budget: x\ncommand: [a]\nrequeue: maybe\n", "requeue", 3, "valid boolean"),
    ],
)
def test_every_problem_names_its_field_line_and_reason(text: str, field: str, line: int, reason: str) -> None:
    with pytest.raises(Invalid) as caught:
        parse_spec(text)
    matches = [p for p in caught.value.problems if p.field == field]
    assert matches, caught.value.problems
    assert matches[0].line == line and reason in matches[0].reason, matches[0]


def test_all_problems_are_reported_at_once_in_line_order() -> None:
    with pytest.raises(Invalid) as caught:
        parse_spec("budget: x\nuser: mallory\ncommand: []\ngrace: never\n")
    assert [(p.field, p.line) for p in caught.value.problems] == [("user", 2), ("command", 3), ("grace", 4)]
    assert "line 2: user: unknown key 'user'" in str(caught.value)


LAUGHS = "budget: pretrain\ncommand: [x]\nx-laughs:\n" + "".join(
    f"  l{i}: &l{i} [{', '.join(['*l' + str(i - 1)] * 10) if i else ', '.join(['lol'] * 10)}]\n" for i in range(7)
)


@pytest.mark.parametrize(
    ("text", "reason", "line"),
    [
        pytest.param(
            "budget: pretrain\ncommand: [x]\nenv: " + "[" * 5000 + "]" * 5000 + "\n",
            "nested deeper than 32 levels",
            3,
            id="deeper-than-32-levels",
        ),
        pytest.param(LAUGHS, "more than 100000 values once its aliases are expanded", 1, id="billion-laughs"),
        pytest.param(
            "budget: pretrain\ncommand: [x]\npriority: " + "9" * 5000, "too many digits", None, id="5000-digits"
        ),
        pytest.param('budget: pretrain\ncommand: ["a\\0b"]\n', "NUL byte", 2, id="escaped-nul"),
    ],
)
def test_a_yaml_document_out_of_bounds_is_invalid_with_its_line(text: str, reason: str, line: int | None) -> None:
    with pytest.raises(Invalid) as caught:
        parse_spec(text)
    [problem] = caught.value.problems
    assert reason in problem.reason and problem.line == line
