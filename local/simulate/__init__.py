"""Deterministic simulation: the real core on an in-memory world, one fault schedule per seed.

:func:`~local.simulate.run.run_seed` runs one seed and checks the invariants;
:func:`~local.simulate.campaign.simulate` runs many and shrinks what failed;
``relaylink-receiver simulate`` (:mod:`local.simulate.cli`) is the command.
``docs/simulation.md`` explains the fault model and the invariants.
"""
