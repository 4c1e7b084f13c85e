"""Fault injection (``harness.py``): a health wait released from its worker, and drift detection in ``warn`` mode,
end as they do without faults, whatever moment the controller dies at, whatever watch event it misses and
however far its watch cache lags."""

from tests.integration.faults.harness import fault_tests
from tests.integration.faults.scenarios import DRIFT_WARN, HEALTH

test_end_state_survives_faults = fault_tests(DRIFT_WARN, HEALTH)
