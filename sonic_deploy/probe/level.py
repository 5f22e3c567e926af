"""One level of a probe run (a closed loop's concurrency, or an open loop's rate) and its split between
workers. The standard library only: the in-VPC protocol reads levels, and the stacks import that protocol
(the S3 keys the task role may write), so a synth must not load the probe's runtime for them."""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Level:
    index: int
    concurrency: int | None = None
    rate: float | None = None
    requests: int = 0
    duration_s: float = 0.0
    warmup: int = 0
    arrivals: str = "poisson"

    def share(self, worker: int, workers: int) -> Level:
        """This worker's part of the level (a local worker process, or an in-VPC task); the parts add up to
        the whole. A closed loop's slots split as evenly as they go, and its requests and warm-ups in
        proportion to each worker's slots, so that every worker runs for about as long and the level holds
        its concurrency to its end (an even split of requests would leave a worker with 1 slot of 3 running
        alone at concurrency 1 for the second half). An open loop: 1/workers of the rate and of the warm-ups."""
        if self.concurrency is None:
            weights = [1] * workers
        else:
            weights = [evenly(self.concurrency, w, workers) for w in range(workers)]
            if not any(weights):  # concurrency 0: nothing to run, the requests go nowhere
                weights = [1] * workers
        return replace(
            self,
            concurrency=None if self.concurrency is None else weights[worker],
            rate=None if self.rate is None else self.rate / workers,
            requests=proportional(self.requests, weights, worker),
            warmup=proportional(self.warmup, weights, worker),
        )


def evenly(total: int, index: int, count: int) -> int:
    """Part `index` of `total` split in `count` parts as evenly as they go (the first ones one more)."""
    return total // count + (1 if index < total % count else 0)


def proportional(total: int, weights: list[int], index: int) -> int:
    """Part `index` of `total` in proportion to `weights` (total x w_i // sum, then the remainder one each to
    the parts with the largest fractions left, the first on a tie): the parts add up to `total`, each less
    than 1 from its exact share, and a part of weight 0 gets nothing."""
    whole = sum(weights)
    if whole <= 0 or weights[index] <= 0:
        return 0
    floors = [total * w // whole for w in weights]
    left = total - sum(floors)
    # The first come first would give 16 slots' 8 calls as 2 to a 2-slot task (its share: 1) and 0 to a
    # 1-slot one (0.5): largest remainders keep every part within 1.
    by_fraction = sorted(
        (i for i, w in enumerate(weights) if w > 0), key=lambda i: (-(total * weights[i] % whole), i)
    )
    return floors[index] + (1 if index in by_fraction[:left] else 0)
