"""``bench/scenarios.py``: the pure helpers (percentiles, run summaries, request deltas by method)."""

from __future__ import annotations

import pytest

from bench import scenarios

GET = '{code="200",host="127.0.0.1:6443",method="GET"}'
PATCH = '{code="200",host="127.0.0.1:6443",method="PATCH"}'
PATCH_409 = '{code="409",host="127.0.0.1:6443",method="PATCH"}'
POST = '{code="201",host="127.0.0.1:6443",method="POST"}'
REQ = "rest_client_requests_total"


@pytest.mark.parametrize(
    ("values", "p", "expected"),
    [
        ([7.0], 99, 7.0),
        ([1.0, 2.0, 3.0, 4.0], 50, 2.5),  # even length: between the two middle values
        ([1.0, 2.0, 3.0, 4.0, 5.0], 50, 3.0),
        ([4.0, 1.0, 3.0, 2.0], 0, 1.0),
        ([4.0, 1.0, 3.0, 2.0], 100, 4.0),
        ([4.0, 1.0, 3.0, 2.0], 25, 1.75),  # rank 0.75 between 1 and 2
        ([float(v) for v in range(1, 101)], 99, 99.01),  # rank 98.01 between 99 and 100
        ([10.0, 20.0], 90, 19.0),
    ],
)
def test_percentile_interpolates_linearly(values: list[float], p: float, expected: float) -> None:
    assert scenarios.percentile(values, p) == pytest.approx(expected)


def test_percentile_does_not_reorder_its_input() -> None:
    values = [3.0, 1.0, 2.0]
    assert scenarios.percentile(values, 50) == 2.0
    assert values == [3.0, 1.0, 2.0]


def test_percentile_p99_of_a_latency_sample_with_one_outlier() -> None:
    values = [0.01] * 99 + [1.0]  # 100 samples: p99 lies between the 99th (0.01) and the outlier (1.0)
    assert scenarios.percentile(values, 99) == pytest.approx(0.01 + 0.99 * 0.01)
    assert scenarios.percentile(values, 50) == pytest.approx(0.01)


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([5.0], (5.0, 5.0, 5.0)),
        ([3.0, 1.0, 10.0, 2.0], (2.5, 1.0, 10.0)),
        ([2.0, 9.0, 4.0], (4.0, 2.0, 9.0)),
    ],
)
def test_summarize_is_median_min_max(values: list[float], expected: tuple[float, float, float]) -> None:
    assert scenarios.summarize(values) == expected


def test_delta_by_method_subtracts_per_method_across_status_codes() -> None:
    before = {(REQ, GET): 10.0, (REQ, PATCH): 20.0, (REQ, PATCH_409): 1.0, ("process_cpu_seconds_total", ""): 5.0}
    after = {(REQ, GET): 14.0, (REQ, PATCH): 27.0, (REQ, PATCH_409): 2.0, ("process_cpu_seconds_total", ""): 9.0}
    assert scenarios._delta_by_method(after, before) == {"GET": 4.0, "PATCH": 8.0}


def test_delta_by_method_counts_methods_new_since_before_and_drops_unchanged_ones() -> None:
    before = {(REQ, GET): 10.0, (REQ, PATCH): 20.0}
    after = {(REQ, GET): 10.0, (REQ, PATCH): 20.0, (REQ, POST): 3.0}
    assert scenarios._delta_by_method(after, before) == {"POST": 3.0}


def test_delta_by_method_of_identical_samples_is_empty() -> None:
    samples = {(REQ, GET): 10.0}
    assert scenarios._delta_by_method(samples, dict(samples)) == {}


def test_issue15_variants_repeat_the_fast_ones_interleaved_in_alternating_order() -> None:
    from bench import health_waits

    plan = health_waits.plan_variants(health_waits.STARVATION_VARIANTS, quick=False)
    assert plan == ["released", "no_broken", "no_broken", "released", "released", "no_broken", "held"]
    assert health_waits.plan_variants(health_waits.CHAIN_VARIANTS, quick=True) == ["events", "polling"]
