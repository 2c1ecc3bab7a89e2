"""Operations: what an on-call engineer needs around the scheduler — Prometheus metrics, structured JSON logs with
secrets redacted, leader election between server instances, per-token rate limiting of submissions, and the
process's role and liveness for the health probes.

Must not: schedule, authorise or own rows: it observes the engine and the API, and guards who may cycle.
"""
