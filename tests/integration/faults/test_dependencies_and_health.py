"""Fault injection (``harness.py``): a dependency chain, and a health wait released from its worker, end as they do
without faults, whatever moment the controller dies at, whatever watch event it misses and however far its watch
cache lags."""

from tests.integration.faults.harness import fault_tests
from tests.integration.faults.scenarios import DEPENDENCIES, HEALTH

test_end_state_survives_faults = fault_tests(DEPENDENCIES, HEALTH)
