"""Fault injection (``harness.py``): deleting a Kustomization with the ``Delete`` and ``Orphan`` deletion policies
ends as they do without faults, whatever moment the controller dies at, whatever watch event it misses and
however far its watch cache lags."""

from tests.integration.faults.harness import fault_tests
from tests.integration.faults.scenarios import DELETE, ORPHAN

test_end_state_survives_faults = fault_tests(DELETE, ORPHAN)
