"""Fault injection (``harness.py``): two controllers with leader election; the leader loses its lease in the
middle of an apply (its renewals never reach the API server from some write on, or someone deletes the Lease)
while a newer revision arrives. Whoever leads in the end, the end state is the newer revision's, as without the
fault: the old leader stops writing before the new one starts, and the new one applies everything again."""

from tests.integration.faults.harness import fault_tests
from tests.integration.faults.scenarios import HANDOVER_APPLY

test_end_state_survives_faults = fault_tests(HANDOVER_APPLY)
