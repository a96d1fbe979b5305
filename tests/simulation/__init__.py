"""The simulator's long runs: the seed contract and runs that spawn processes (not part of
``make unit``; plain ``pytest`` and ``make test`` run them)."""
