"""`Principal.strictly_inside_led`, the whole-tree form of `leads(..., strictly=True)` that plan checks use, names
exactly the budgets `leads` accepts, in any tree."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from allotment.service.principal import LEAD, MEMBER, Principal


@given(
    st.lists(st.integers(min_value=0, max_value=40), min_size=1, max_size=40),
    st.sets(st.integers(min_value=0, max_value=40), max_size=6),
)
def test_the_set_form_agrees_with_leads(links: list[int], led: set[int]) -> None:
    parents: dict[str, str | None] = {f"n{i}": (f"n{p}" if p < i else None) for i, p in enumerate(links)}
    roles = {f"n{i}": LEAD for i in led} | {"elsewhere": MEMBER}
    user = Principal("lee", roles)
    expected = {name for name in parents if user.leads(name, parents, strictly=True)}
    assert user.strictly_inside_led(parents) == expected
