"""Change sets: what one cycle's decisions, or one batch of executor events, mean for durable state — as data.

Owns: the ChangeSet records (job transitions with reasons, runs opened, signalled, ended and repriced, meter advances,
slices, reservations, ledger entries with idempotency keys, pending-reason upserts and deletes, typed intents, usage
and engine keys), the facts a store loads for the rules (records.py), and the pure rules that build change sets:
decisions (decisions.py), executor events and the end of a run (events.py), and the cycle's named steps — period
rollover, usage decay, periodic charging, pending reasons (steps.py). Intents are encoded and decoded in one place
(intents.py). The unit of work a store offers the engine is described here (unit.py), because it speaks change sets.

Must not: touch a database, a clock, files or the network, or price anything itself (allotment.ledger does). A store
only loads the facts and persists the ChangeSet; a second store (issue 20) re-implements none of these rules.
"""
