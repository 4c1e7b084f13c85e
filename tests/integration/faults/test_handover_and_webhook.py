"""Fault injection (``harness.py``): a leader hand-over in the middle of the rollouts (two controllers, the lease
lost and taken), and the conversion webhook's certificate issuance with a Kustomization created through the old
v1beta2 API, end as they do without faults, whatever moment the controller dies at, whatever watch event it
misses and however far its watch cache lags."""

from tests.integration.faults.harness import fault_tests
from tests.integration.faults.scenarios import HANDOVER, WEBHOOK

test_end_state_survives_faults = fault_tests(HANDOVER, WEBHOOK)
