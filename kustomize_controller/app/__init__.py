"""The controller process: :func:`run_controller` composes it (:mod:`.run`), :mod:`.watches` feeds it."""

from kustomize_controller.app.run import leader_election_id, run_controller

__all__ = ["leader_election_id", "run_controller"]
