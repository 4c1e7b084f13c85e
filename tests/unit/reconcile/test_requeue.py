import random
from datetime import timedelta

from hypothesis import given
from hypothesis import strategies as st

from kustomize_controller.reconcile.requeue import jittered


@given(st.integers(1, 99), st.integers(1, 86400), st.integers(0, 2**32))
def test_jitter_stays_within_percentage(pct: int, seconds: int, seed: int) -> None:
    interval = timedelta(seconds=seconds)
    out = jittered(interval, percentage=pct, rng=random.Random(seed))
    assert abs(out.total_seconds() - seconds) <= seconds * pct / 100 + 1e-6


def test_zero_percentage_is_no_jitter() -> None:
    assert jittered(timedelta(minutes=5), percentage=0, rng=random.Random(1)) == timedelta(minutes=5)


def test_jitter_spreads_values() -> None:
    rng = random.Random(42)
    values = {jittered(timedelta(minutes=10), percentage=5, rng=rng) for _ in range(50)}
    assert len(values) > 40
    assert min(values) >= timedelta(seconds=570) and max(values) <= timedelta(seconds=630)
