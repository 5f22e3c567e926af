"""`Level.share` and the turn's `Load.share`, the one split of a load between local worker processes
(--workers) and in-VPC tasks: the parts add up to the whole, and each part's requests (calls) are in
proportion to its slots, so that every part runs for about as long and a level holds its concurrency."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sonic_deploy.probe.level import Level
from sonic_deploy.turn.run import Load
from tests.fuzz import examples


def _within_one_of_proportional(parts: list[int], slots: list[int], total: int) -> bool:
    whole = sum(slots)
    return all(abs(part * whole - total * slot) < whole for part, slot in zip(parts, slots, strict=True))


@settings(max_examples=examples(300))
@given(
    concurrency=st.integers(1, 600),
    requests=st.integers(0, 10_000),
    warmup=st.integers(0, 600),
    workers=st.integers(1, 100),
)
def test_a_closed_levels_shares_sum_to_it_in_proportion_to_slots(
    concurrency: int, requests: int, warmup: int, workers: int
) -> None:
    level = Level(0, concurrency=concurrency, requests=requests, warmup=warmup)
    shares = [level.share(w, workers) for w in range(workers)]
    slots = [int(s.concurrency or 0) for s in shares]
    assert sum(slots) == concurrency and max(slots) - min(slots) <= 1
    assert sum(s.requests for s in shares) == requests
    assert sum(s.warmup for s in shares) == warmup
    assert _within_one_of_proportional([s.requests for s in shares], slots, requests)
    assert _within_one_of_proportional([s.warmup for s in shares], slots, warmup)
    assert all(s.requests == s.warmup == 0 for s in shares if not s.concurrency)


@settings(max_examples=examples(200))
@given(rate=st.floats(0.1, 500), warmup=st.integers(0, 100), workers=st.integers(1, 100))
def test_an_open_levels_shares_sum_to_it(rate: float, warmup: int, workers: int) -> None:
    level = Level(0, rate=rate, duration_s=10, warmup=warmup)
    shares = [level.share(w, workers) for w in range(workers)]
    assert abs(sum(float(s.rate or 0) for s in shares) - rate) < 1e-9 * rate * workers
    assert sum(s.warmup for s in shares) == warmup


@settings(max_examples=examples(300))
@given(concurrency=st.integers(1, 600), calls=st.integers(0, 10_000), tasks=st.integers(1, 100))
def test_a_closed_turn_loads_shares_sum_to_it_in_proportion_to_slots(
    concurrency: int, calls: int, tasks: int
) -> None:
    load = Load(calls=calls, concurrency=concurrency)
    shares = [load.share(i, tasks) for i in range(tasks)]
    slots = [s.concurrency for s in shares]
    assert sum(slots) == concurrency and sum(s.calls for s in shares) == calls
    assert _within_one_of_proportional([s.calls for s in shares], slots, calls)
    assert [(s.task, s.tasks) for s in shares] == [(i, tasks) for i in range(tasks)]


def test_the_reviews_examples() -> None:
    """Concurrency 3 on 2 parts: 2 slots and 1, so 2/3 of the requests and 1/3 (not half each); the one left
    over goes to the larger fraction (66.7 -> 67), and 8 calls on 16 slots of 9 tasks give the 1-slot tasks
    their half where the first task would have had two (hypothesis found it)."""
    level = Level(0, concurrency=3, requests=200)
    assert [(s.concurrency, s.requests) for s in (level.share(0, 2), level.share(1, 2))] == [
        (2, 133),
        (1, 67),
    ]
    nine = [Load(calls=8, concurrency=16).share(i, 9).calls for i in range(9)]
    assert nine == [1, 1, 1, 1, 1, 1, 1, 1, 0]
    load = Load(calls=10, concurrency=3)
    assert [(s.concurrency, s.calls) for s in (load.share(0, 2), load.share(1, 2))] == [(2, 7), (1, 3)]
