import json
from io import StringIO

import pytest
import structlog

from kustomize_controller.runtime.logs import configure_logging, get_logger


@pytest.fixture(autouse=True)
def _reset() -> None:
    yield
    structlog.reset_defaults()
    structlog.contextvars.clear_contextvars()


def test_json_lines_are_flux_shaped() -> None:
    out = StringIO()
    log = get_logger("controller")  # created before configuration: still follows it
    configure_logging(level="info", encoding="json", stream=out)
    with structlog.contextvars.bound_contextvars(reconcile_id="r-1"):
        log.info("server-side apply completed", revision="main@sha1:abc")
    log.debug("hidden")
    [line] = out.getvalue().splitlines()
    data = json.loads(line)
    assert list(data)[:4] == ["level", "ts", "logger", "msg"]
    assert set(list(data)[4:]) == {"reconcile_id", "revision"}
    assert data["level"] == "info" and data["logger"] == "controller"
    assert data["msg"] == "server-side apply completed"
    assert data["ts"].endswith("Z") and len(data["ts"]) == 24


def test_console_encoding_and_debug_level() -> None:
    out = StringIO()
    configure_logging(level="debug", encoding="console", stream=out)
    get_logger("manager").debug("starting", port=8080)
    ts, level, logger, msg, fields = out.getvalue().rstrip("\n").split("\t")
    assert ts.endswith("Z")
    assert (level, logger, msg, json.loads(fields)) == ("DEBUG", "manager", "starting", {"port": 8080})


def test_exceptions_carry_a_stacktrace() -> None:
    out = StringIO()
    configure_logging(level="error", encoding="json", stream=out)
    try:
        raise ValueError("bad")
    except ValueError:
        get_logger("x").exception("failed")
    data = json.loads(out.getvalue())
    assert data["level"] == "error" and "ValueError: bad" in data["stacktrace"]


def test_invalid_settings_are_rejected() -> None:
    with pytest.raises(ValueError, match="log level"):
        configure_logging(level="loud")
    with pytest.raises(ValueError, match="log encoding"):
        configure_logging(encoding="xml")
