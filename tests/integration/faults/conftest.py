"""The controller tests' ``env`` fixture, for the fault-injection tests (``harness.py``)."""

from tests.integration.controller.conftest import env

__all__ = ["env"]
