"""Ports: the small Protocols the engine talks through, and the plain records that cross them.

Owns: the Clock, Executor and Store contracts and their data (launch specs, executor events).
Must not: implement any of them. Adapters live in allotment.executors, allotment.store and the simulator.
"""
