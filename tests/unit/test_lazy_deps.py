"""The per-container dependency holder: built once on first use, replaceable, resettable."""

from __future__ import annotations

import threading

import pytest

from functions.core.lazy_deps import LazyDeps


def test_lazy_deps_builds_on_first_get_and_keeps_the_value() -> None:
    built: list[object] = []

    def factory() -> object:
        built.append(object())
        return built[-1]

    holder = LazyDeps(factory)
    assert built == []  # nothing is built before it is asked for
    first = holder.get()
    assert holder.get() is first
    assert len(built) == 1


def test_lazy_deps_set_replaces_and_reset_rebuilds() -> None:
    holder = LazyDeps(lambda: "built")
    holder.set("wired by a test")
    assert holder.get() == "wired by a test"
    holder.reset()
    assert holder.get() == "built"


def test_lazy_deps_failed_build_is_tried_again() -> None:
    attempts: list[int] = []

    def factory() -> str:
        attempts.append(1)
        if len(attempts) == 1:
            raise ValueError("environment incomplete")
        return "built"

    holder = LazyDeps(factory)
    with pytest.raises(ValueError, match="incomplete"):
        holder.get()
    assert holder.get() == "built"


def test_lazy_deps_builds_once_when_threads_ask_together() -> None:
    calls: list[int] = []
    start = threading.Barrier(4)

    def factory() -> int:
        calls.append(1)
        return len(calls)

    holder = LazyDeps(factory)
    values: list[int] = []

    def ask() -> None:
        start.wait()
        values.append(holder.get())

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert values == [1, 1, 1, 1]
    assert calls == [1]
