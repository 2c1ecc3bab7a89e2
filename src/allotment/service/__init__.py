"""The service layer: every use case of Allotment's users, with its authorisation.

Owns: the acting principal and its rights (principal), typed errors (errors), job specs (specs), and the use cases
over a sessionmaker — jobs and sessions, budgets and budget plans, nodes, reports and API tokens. Each use case takes
the acting Principal, checks its rights, and either reads, or writes a request the engine acts on in its next cycle
(then sets the wake event).

Must not: import FastAPI or speak HTTP (the api layer maps these errors to status codes), or change scheduling state
itself: the engine is its single writer.
"""
