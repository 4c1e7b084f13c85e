"""Process log setup: structlog shaped like Flux's zap output.

``configure_logging(level=..., encoding="json"|"console")`` installs a structlog configuration that
writes one line per event:
- json: ``{"level":"info","ts":"2026-01-01T00:00:00.000Z","logger":"...","msg":"...", <fields>}``,
  keys in that order, fields after (Flux uses zap's JSON encoder with ISO 8601 times);
- console: ``<ts>\\t<LEVEL>\\t<logger>\\t<msg>\\t{<fields as JSON>}``.
Context bound with ``structlog.contextvars`` (e.g. ``controller``, ``name``, ``namespace``,
``reconcile_id`` inside a reconcile) is merged into every line. Exceptions logged with
``log.exception`` carry the traceback under ``stacktrace``.

Levels: ``trace`` (treated as debug), ``debug``, ``info``, ``error`` (Flux's ``--log-level`` values)
plus ``warning``. Modules take their logger with ``get_logger(name)``, which stays lazy, so loggers
created before ``configure_logging`` still follow it.

Not promised: zap's ``caller`` field and sampling.
"""

from __future__ import annotations

import json
import logging
import sys
import traceback
from collections.abc import MutableMapping
from datetime import UTC, datetime
from typing import Any, TextIO

import structlog

LEVELS = {
    "trace": logging.DEBUG,
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "warn": logging.WARNING,
    "error": logging.ERROR,
}


def get_logger(name: str, **initial: Any) -> Any:
    """A lazy structlog logger whose lines carry ``logger=<name>`` (kept as ``logger_name`` in the
    event dict: ``logger`` is a reserved argument of structlog's ``get_logger``)."""
    return structlog.get_logger(logger_name=name, **initial)


def _timestamp(_: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    now = datetime.now(UTC)
    event["ts"] = now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"
    return event


def _stacktrace(_: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    exc_info = event.pop("exc_info", None)
    if exc_info:
        if exc_info is True:
            exc_info = sys.exc_info()
        if isinstance(exc_info, BaseException):
            exc_info = (type(exc_info), exc_info, exc_info.__traceback__)
        if isinstance(exc_info, tuple) and exc_info[0] is not None:
            event["stacktrace"] = "".join(traceback.format_exception(*exc_info))
    return event


def _flux_shape(_: Any, __: str, event: MutableMapping[str, Any]) -> dict[str, Any]:
    ordered: dict[str, Any] = {
        "level": event.pop("level", "info"),
        "ts": event.pop("ts", ""),
    }
    logger = event.pop("logger_name", None) or event.pop("logger", None)
    if logger:
        ordered["logger"] = logger
    ordered["msg"] = event.pop("event", "")
    ordered.update(event)
    return ordered


def _json_renderer(_: Any, __: str, event: MutableMapping[str, Any]) -> str:
    return json.dumps(event, default=str, separators=(",", ":"))


def _console_renderer(_: Any, __: str, event: MutableMapping[str, Any]) -> str:
    level = str(event.pop("level", "info")).upper()
    ts = event.pop("ts", "")
    logger = event.pop("logger", "")
    msg = event.pop("msg", "")
    stack = event.pop("stacktrace", None)
    parts = [ts, level]
    if logger:
        parts.append(logger)
    parts.append(str(msg))
    if event:
        parts.append(json.dumps(event, default=str, separators=(",", ":")))
    line = "\t".join(parts)
    return f"{line}\n{stack}" if stack else line


def configure_logging(*, level: str = "info", encoding: str = "json", stream: TextIO | None = None) -> None:
    """Install the process-wide log configuration (called once by the entry point)."""
    if level not in LEVELS:
        raise ValueError(f"invalid log level {level!r}; one of {', '.join(sorted(LEVELS))}")
    if encoding not in ("json", "console"):
        raise ValueError(f"invalid log encoding {encoding!r}; one of json, console")
    renderer = _json_renderer if encoding == "json" else _console_renderer
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            _timestamp,
            _stacktrace,
            _flux_shape,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(LEVELS[level]),
        logger_factory=structlog.PrintLoggerFactory(stream or sys.stderr),
        cache_logger_on_first_use=False,
    )
