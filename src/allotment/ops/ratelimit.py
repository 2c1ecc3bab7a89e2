"""Rate limiting per user: a token bucket per key (decision 53).

Owns: `TokenBuckets` (rate per second and burst per key, thread-safe, O(1) per request, idle buckets forgotten) and
`RateLimited`, the error a refused request raises (ops.http answers it with 429 and Retry-After).

Must not: authenticate or know which routes are limited and by what key (allotment.api.limits does: by the
authenticated user, so a user's many tokens share one bucket).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class TokenBuckets:
    rate: float
    """Requests per second each key may sustain."""
    burst: int
    """Requests a key may make at once after being idle."""
    clock: Callable[[], float] = time.monotonic
    _buckets: dict[str, tuple[float, float]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _sweep_at: float = 0.0

    def __post_init__(self) -> None:
        if self.rate <= 0 or self.burst < 1:
            raise ValueError("a rate limit needs rate > 0 and burst ≥ 1")

    def take(self, key: str) -> float:
        """Spend one request of `key`'s bucket: 0.0 when allowed, else the seconds until one is available."""
        now = self.clock()
        with self._lock:
            tokens, at = self._buckets.get(key, (float(self.burst), now))
            tokens = min(float(self.burst), tokens + (now - at) * self.rate)
            if tokens >= 1.0:
                self._buckets[key] = (tokens - 1.0, now)
                wait = 0.0
            else:
                self._buckets[key] = (tokens, now)
                wait = (1.0 - tokens) / self.rate
            if now >= self._sweep_at:
                self._sweep(now)
        return wait

    def _sweep(self, now: float) -> None:
        full = self.burst / self.rate
        self._buckets = {k: v for k, v in self._buckets.items() if now - v[1] < full}
        self._sweep_at = now + max(full, 60.0)


def retry_after(wait: float) -> str:
    """The Retry-After header value (whole seconds, at least 1) for a wait."""
    return str(max(1, math.ceil(wait)))


class RateLimited(Exception):
    """A request beyond its bucket: `wait` seconds until the next one is allowed."""

    def __init__(self, message: str, wait: float) -> None:
        super().__init__(message)
        self.message, self.wait = message, wait


def spend(buckets: TokenBuckets | None, key: str, what: str) -> None:
    """Spend one request of `key`'s bucket (no limit when `buckets` is None); RateLimited beyond it."""
    if buckets is None:
        return
    wait = buckets.take(key)
    if wait > 0:
        raise RateLimited(f"too many {what}: retry in {wait:.2f}s", wait)
