"""Executors: the adapters behind the Executor port that make scheduling decisions real.

Owns: the local process executor (one host), the deterministic simulated executor, GPU discovery, the job
environment every executor hands to a job, and (in its own subpackage) the Slurm executor.
Must not: decide anything. Executors start exactly what they are told, where they are told, and report back.
This package imports none of its submodules, so importing one adapter never pulls in another's dependencies.
"""
