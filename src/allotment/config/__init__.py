"""Allotment's configuration: a YAML file (or directory) validated with pydantic and converted to core types.

Owns: the public surface of the configuration layer — `load_config`, `parse_config`, `ConfigError`/`Problem`,
the schema models and the conversion to the core's plain data (`to_core`).

Must not: depend on anything above the core (ports, store, engine, API, CLI); it reads files only when asked
to.
"""

from allotment.config.convert import (
    CoreConfig,
    core_budgets,
    core_clusters,
    core_nodes,
    core_policy,
    core_rates,
    core_windows,
    to_core,
)
from allotment.config.errors import ConfigError, Problem
from allotment.config.load import load_config, parse_config
from allotment.config.schema import (
    AllotmentConfig,
    BudgetConfig,
    ClusterConfig,
    Fleet,
    Member,
    NodeGroup,
    NodeOverride,
    Period,
    PeriodLength,
    Policy,
    Role,
    RunAs,
    RunAsMode,
    User,
    WindowConfig,
)

__all__ = [
    "AllotmentConfig",
    "BudgetConfig",
    "ClusterConfig",
    "ConfigError",
    "CoreConfig",
    "Fleet",
    "Member",
    "NodeGroup",
    "NodeOverride",
    "Period",
    "PeriodLength",
    "Policy",
    "Problem",
    "Role",
    "RunAs",
    "RunAsMode",
    "User",
    "WindowConfig",
    "core_budgets",
    "core_clusters",
    "core_nodes",
    "core_policy",
    "core_rates",
    "core_windows",
    "load_config",
    "parse_config",
    "to_core",
]
