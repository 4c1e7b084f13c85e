"""Fault injection (``harness.py``): a dependency chain, and a SOPS (age) Secret, end as they do without faults,
whatever moment the controller dies at, whatever watch event it misses and however far its watch cache lags."""

from tests.integration.faults.harness import fault_tests
from tests.integration.faults.scenarios import DEPENDENCIES, SOPS

test_end_state_survives_faults = fault_tests(DEPENDENCIES, SOPS)
