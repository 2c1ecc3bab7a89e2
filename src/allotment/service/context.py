"""What every use case runs against: the database, the clock, the wake event, and the deployment's settings.

Owns: the Context (sessions, now(), wake, the executor's data directory, the configuration with its policy, rates
and period calendar, whether local open login is allowed, the run-as mode) and small shared look-ups (the current
period).

Must not: hold request state or decide rights.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from sqlalchemy.orm import Session, sessionmaker

from allotment.config import AllotmentConfig, to_core
from allotment.core.model import Micro, PolicyConfig, Seconds
from allotment.engine.setup import period_spec
from allotment.executors.accounts import RunAs
from allotment.ledger.periods import Period, PeriodSpec, period_at

DEFAULT_TOKEN_TTL: Seconds = 30 * 24 * 3600
DEFAULT_MAX_TOKENS = 100


class Wake(Protocol):
    """How a use case tells the engine to cycle now: the engine's own threading.Event when the API shares its
    process, an ops.wake.WakeSender from an API worker process."""

    def set(self) -> None: ...


@dataclass
class Context:
    sessions: sessionmaker[Session]
    config: AllotmentConfig
    data_dir: Path
    now: Callable[[], Seconds]
    wake: Wake | None = None
    open_login: bool = False
    """Local servers only: POST /auth/login issues a token for any configured user without credentials."""
    token_ttl: Seconds = DEFAULT_TOKEN_TTL
    max_tokens: int = DEFAULT_MAX_TOKENS
    """Live (unexpired, unrevoked) tokens one user may hold; issuing one more is refused (409)."""
    executor: str = "local"
    """The executor kind the engine runs jobs with (it decides how a session is reached)."""
    run_as: RunAs = field(default_factory=RunAs)
    """Whose Unix account jobs run as: in owner mode a user with no account cannot submit."""
    policy: PolicyConfig = field(init=False)
    rates: Mapping[str, Micro] = field(init=False)
    periods: PeriodSpec = field(init=False)

    def __post_init__(self) -> None:
        core = to_core(self.config)
        self.policy, self.rates, self.periods = core.policy, core.rates, period_spec(self.config)

    def notify(self) -> None:
        """Tell the engine a request is waiting: its next cycle starts now."""
        if self.wake is not None:
            self.wake.set()

    def period(self, at: Seconds | None = None) -> Period:
        return period_at(self.periods, self.now() if at is None else at)

    @property
    def executor_dir(self) -> Path:
        return self.data_dir / "executor"
