"""Fault injection (``harness.py``): creating a Kustomization, and a new revision that updates, adds and prunes,
end as they do without faults, whatever moment the controller dies at, whatever watch event it misses and
however far its watch cache lags."""

from tests.integration.faults.harness import fault_tests
from tests.integration.faults.scenarios import CREATE, REVISION

test_end_state_survives_faults = fault_tests(CREATE, REVISION)
