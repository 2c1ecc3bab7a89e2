"""Ports: the small Protocols the engine talks through, and the plain records that cross them.

Owns: the Clock, Executor (with its ExecutorUnavailable error), Store and fleet (FleetSource, FleetSyncStore)
contracts, their data (launch specs, executor events, discovered nodes, node records), and the pure rules that give
a port's vocabulary its meaning (`fleet.action_for`).
Must not: implement any of them. Adapters live in allotment.executors, allotment.store and the simulator; only the
engine's composition root (engine/setup.py) names them (decision 47).
"""
