"""Charge lines: ledger entries as people read them. The engine charges a running job every few seconds (one entry
per piece, memo `16000000 µ/h at 1000‰ for [a, b)`); a line coalesces the consecutive pieces of one run at one
rate and price into GPUs × time × rate × price = credits. Every other entry is a line of its own.

Owns: the coalescing rule (consecutive: the next piece starts where the line ends, same run, budget, period, rate
and price), and a budget subtree's lines page by page (GET /dashboard/budgets/{name}/charge-lines). The raw memos
stay in the entries (GET /jobs/{id} `charges`, GET /dashboard/budgets/{name}/charges); a line keeps one only when it
is one entry.

Rights: a budget's lines are visible to its members, leads above it, operators and administrators (as its charges).

Must not: price anything (the amounts are the entries' own, summed) or write anything.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from allotment.ledger import EntryKind
from allotment.ledger.charges import Piece, read_charge_memo
from allotment.ledger.tree import ancestors
from allotment.service.context import Context
from allotment.service.errors import BadRequest, Forbidden, Invalid, NotFound
from allotment.service.principal import Principal, budget_parents
from allotment.service.views import ChargeLine, View
from allotment.store.db import reading
from allotment.store.statements import run_gpus, subtree_entries
from allotment.store.tables import LedgerEntryRow

DEFAULT_SCAN = 2000
MAX_SCAN = 10_000


class ChargeLinePage(View):
    items: list[ChargeLine]
    """Newest first."""
    next_cursor: str | None
    """Continues with older entries; a run's line cut at the page boundary continues on the next page."""


@dataclass
class _Open:
    first: LedgerEntryRow
    last_id: int
    piece: Piece | None
    end: int
    amount: int
    entries: int


def _extends(line: _Open, e: LedgerEntryRow, piece: Piece) -> bool:
    if line.piece is None:
        return False
    f = line.first
    return (
        e.kind == f.kind
        and e.budget == f.budget
        and e.period_id == f.period_id
        and (piece.rate, piece.price) == (line.piece.rate, line.piece.price)
        and piece.start == line.end
    )


def charge_lines(entries: Iterable[LedgerEntryRow], gpus: Mapping[str, int]) -> list[ChargeLine]:
    """`entries` coalesced into lines, oldest first (by each line's first entry). `gpus`: run id → GPUs held."""
    lines: list[_Open] = []
    open_of: dict[str, _Open] = {}
    for e in sorted(entries, key=lambda r: r.id):
        piece = read_charge_memo(e.memo) if e.kind == EntryKind.CHARGE.value and e.run_id else None
        line = open_of.get(e.run_id or "") if piece is not None else None
        if line is not None and piece is not None and _extends(line, e, piece):
            line.last_id, line.end, line.entries = e.id, piece.end, line.entries + 1
            line.amount += e.amount_micro
            continue
        line = _Open(e, e.id, piece, piece.end if piece is not None else e.at, e.amount_micro, 1)
        lines.append(line)
        if piece is not None and e.run_id:
            open_of[e.run_id] = line
    return [_view(line, gpus) for line in lines]


def _view(line: _Open, gpus: Mapping[str, int]) -> ChargeLine:
    f, piece = line.first, line.piece
    held = gpus.get(f.run_id or "") if piece is not None else None
    return ChargeLine(
        kind=f.kind,
        budget=f.budget,
        period=f.period_id,
        job_id=f.job_id,
        run_id=f.run_id,
        start=piece.start if piece is not None else None,
        end=line.end,
        gpus=held,
        seconds=line.end - piece.start if piece is not None else None,
        gpu_rate_micro=piece.rate // held if piece is not None and held else None,
        price=piece.price if piece is not None else None,
        amount_micro=line.amount,
        entries=line.entries,
        first_id=f.id,
        last_id=line.last_id,
        memo=f.memo if line.entries == 1 else None,
    )


def budget_charge_lines(
    ctx: Context, principal: Principal, budget: str, *, limit: int = DEFAULT_SCAN, cursor: str | None = None
) -> ChargeLinePage:
    """The lines of `budget`'s subtree from up to `limit` ledger entries (newest first); `cursor` continues."""
    if not 1 <= limit <= MAX_SCAN:
        raise Invalid.of("limit", f"must be between 1 and {MAX_SCAN}")
    before: int | None = None
    if cursor:
        if not cursor.isdigit():
            raise BadRequest(f"cursor {cursor!r} is not one this server handed out")
        before = int(cursor)
    with reading(ctx.sessions) as session:
        parents = budget_parents(session)
        if budget not in parents:
            raise NotFound(f"no budget {budget!r}")
        if not principal.may_view_budget_jobs(budget, parents):
            raise Forbidden(f"{principal.user} may not see the charges of {budget}: members, leads and operators only")
        subtree = [n for n in parents if n == budget or budget in ancestors(n, parents)]
        rows = subtree_entries(session, subtree, before=before, limit=limit + 1)
        more = len(rows) > limit
        rows = rows[:limit]
        gpus = run_gpus(session, [r.run_id for r in rows if r.run_id])
    lines = charge_lines(rows, gpus)
    lines.sort(key=lambda line: line.last_id, reverse=True)
    return ChargeLinePage(items=lines, next_cursor=str(rows[-1].id) if more and rows else None)
