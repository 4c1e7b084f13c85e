"""Requeue timing: the interval jitter of fluxcd/pkg ``runtime/jitter``.

A successful reconcile is requeued after ``interval ± percentage`` (uniformly random), so that many
Kustomizations created together do not stay in lock-step and hit the API server at the same moment.
A percentage of 0 disables jitter. Randomness comes from an injected ``random.Random`` (tests seed it).
"""

from __future__ import annotations

import random
from datetime import timedelta


def jittered(interval: timedelta, *, percentage: int, rng: random.Random) -> timedelta:
    if percentage <= 0 or percentage >= 100:
        return interval
    fraction = percentage / 100.0
    factor = 1 + fraction * (2 * rng.random() - 1)
    return timedelta(seconds=interval.total_seconds() * factor)
