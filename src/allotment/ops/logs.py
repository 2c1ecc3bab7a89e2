"""Structured logging: one JSON object per line with the job, budget, user and node a record is about, and no
secret ever written.

Owns: `JsonFormatter` (time, level, logger, message, exception, and every `extra=` field such as `job`, `budget`),
`redact` and `RedactSecrets` (API tokens `allot_…`, `Bearer …` credentials and passwords in database URLs are
masked in the message, its arguments, extra fields and tracebacks), and `configure_logging`, which installs them on
the root logger for `allot server` (format "json" or "text", chosen by ALLOT_LOG_FORMAT or the caller).

Must not: decide what is logged (the engine and API do) or send logs anywhere but the process's stderr.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
import time
from typing import Any

LOG_FORMAT_ENV = "ALLOT_LOG_FORMAT"
TEXT_FORMAT = "%(asctime)s %(name)s %(levelname)s %(message)s"
_TOKEN = re.compile(r"allot_[A-Za-z0-9_\-]{8,}")
_BEARER = re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=\-]{16,}")
_URL_PASSWORD = re.compile(r"(://[^:/@\s]+:)[^@\s]+@")
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime", "taskName"}


def redact(text: str) -> str:
    """`text` with API tokens, bearer credentials and database URL passwords masked."""
    text = _TOKEN.sub("allot_***", text)
    text = _BEARER.sub(r"\1***", text)
    return _URL_PASSWORD.sub(r"\1***@", text)


def _clean(value: Any) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, int | float | bool) or value is None:
        return value
    return redact(str(value))


class RedactSecrets(logging.Filter):
    """Masks secrets in a record before any handler formats it: the message is rendered with its arguments and
    redacted, extra fields are redacted, and a traceback is rendered and redacted."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = redact(record.getMessage())
        record.args = None
        for key, value in list(vars(record).items()):
            if key not in _STANDARD and isinstance(value, str):
                setattr(record, key, redact(value))
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
            record.exc_info = None
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per record: ts (ISO 8601 UTC), level, logger, msg, the record's extra fields (job, budget,
    user, node, …) and exc (the traceback) when there is one."""

    converter = staticmethod(time.gmtime)

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": redact(record.getMessage()),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                out[key] = _clean(value)
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            out["exc"] = redact(record.exc_text)
        return json.dumps(out, default=str)


def configure_logging(fmt: str | None = None, level: int = logging.INFO) -> None:
    """Log to stderr through the redaction filter, as JSON lines (`fmt` "json") or plain text ("text"); `fmt`
    defaults to $ALLOT_LOG_FORMAT, else text. Replaces the root logger's handlers."""
    chosen = (fmt or os.environ.get(LOG_FORMAT_ENV) or "text").lower()
    if chosen not in {"json", "text"}:
        raise ValueError(f"log format must be json or text, not {chosen!r}")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if chosen == "json" else logging.Formatter(TEXT_FORMAT))
    handler.addFilter(RedactSecrets())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
