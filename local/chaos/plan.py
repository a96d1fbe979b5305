"""What a run will send: the seeded mix of genuine and adversarial deliveries.

Counts are derived from ``deliveries``:

* genuine deliveries, a few packages delivered several times, and some
  ``pkg_missing...`` packages (the MCP server does not know them: ``failed``);
* same-id different-body deliveries (the originals are genuine ones);
* forged signatures and replays of requests signed long ago.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Final

from local.chaos.config import ChaosConfig
from local.sender import Delivery, deliveries_of_package, new_package_id

MISSING_PREFIX: Final = "pkg_missing"  # local/mcp_server.py: "not found", permanently
CONFLICT_PREFIX: Final = "pkg_conflict"  # the package id a conflicting body names
DELIVERIES_PER_SHARED_PACKAGE: Final = 3


@dataclass(frozen=True, slots=True)
class LoadPlan:
    """What will be sent. Genuine deliveries include the originals of the conflicts."""

    genuine: tuple[Delivery, ...]
    missing_ids: frozenset[str]
    shared_packages: dict[str, tuple[str, ...]]  # package id -> its delivery ids
    conflicts: tuple[tuple[Delivery, Delivery], ...]  # (original, same id other body)
    forged: tuple[Delivery, ...]
    replayed: tuple[Delivery, ...]


def plan_load(config: ChaosConfig, *, mcp_url: str, rng: random.Random) -> LoadPlan:
    """The seeded mix of deliveries for ``config.deliveries`` genuine ones."""
    n = config.deliveries
    each = max(1, round(n * config.adversarial_fraction))
    shared_groups = max(1, each // 2)
    regular = n - each - shared_groups * DELIVERIES_PER_SHARED_PACKAGE
    if regular < each:
        raise ValueError("too few deliveries for the adversarial mix")

    def new(**kwargs: Any) -> Delivery:
        return Delivery.new(mcp_url=mcp_url, rng=rng, **kwargs)

    genuine = [new() for _ in range(regular)]
    missing = [new(package_prefix=MISSING_PREFIX) for _ in range(each)]
    shared: dict[str, tuple[str, ...]] = {}
    for _ in range(shared_groups):
        package_id = new_package_id(rng)
        group = deliveries_of_package(package_id, DELIVERIES_PER_SHARED_PACKAGE, mcp_url=mcp_url)
        shared[package_id] = tuple(d.delivery_id for d in group)
        genuine.extend(group)
    genuine.extend(missing)
    rng.shuffle(genuine)
    originals = [d for d in genuine if d.package_id and d.package_id.startswith("pkg_")]
    originals = [d for d in originals if not str(d.package_id).startswith(MISSING_PREFIX)]
    conflicts = tuple(
        (original, original.conflicting(package_id=new_package_id(rng, CONFLICT_PREFIX)))
        for original in rng.sample(originals, each)
    )
    return LoadPlan(
        genuine=tuple(genuine),
        missing_ids=frozenset(d.delivery_id for d in missing),
        shared_packages=shared,
        conflicts=conflicts,
        forged=tuple(new() for _ in range(each)),
        replayed=tuple(new() for _ in range(each)),
    )
