"""Fault injection (``harness.py``): deleting a Kustomization whose objects include one a person took over (our
owner labels removed) and one excluded from pruning, with ``deletionPolicy`` ``WaitForTermination`` (one object
terminates only when someone else's finalizer goes) and ``Orphan``, ends as it does without faults whatever
write of the finalization the controller dies after, when it dies while waiting for the termination, and when the
restarted controller dies too: everything pruned that should be, nothing that must not be, the finalizer
released only once what was deleted is gone."""

from tests.integration.faults.harness import fault_tests
from tests.integration.faults.scenarios import FINALIZE_ORPHAN, FINALIZE_WAIT

test_end_state_survives_faults = fault_tests(FINALIZE_WAIT, FINALIZE_ORPHAN)
