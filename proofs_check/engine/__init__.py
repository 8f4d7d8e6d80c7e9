"""verify's engine: the registry, the runner and its pool, studies, power, reports and coverage.

The engine knows the toolkit's claims only as module names (:data:`.content.DEFAULT_CONTENT`) and
imports them by name; it never imports :mod:`attneb.proofs_check.topics` statically. Modules:

- :mod:`.registry`: claims, checks, wrong theories (alternatives and swaps), evidence, context;
- :mod:`.derivations`: a derivation of :mod:`attneb.theory` as a check, its mutants as wrong theories;
- :mod:`.content`: which modules register the content, and loading them (and a user's own);
- :mod:`.runner` and :mod:`.shared_pool`: running checks, in one process or a pool;
- :mod:`.studies`: experiments whose runs are stored and whose figures are redrawn from the store;
- :mod:`.replication`: seed pools, subsets, per-seed slopes and floor fits that experiments share;
- :mod:`.plotting` and :mod:`.finite_differences`: helpers the content shares;
- :mod:`.power`: size and power of every check; :mod:`.coverage`: which checks cover which function;
- :mod:`.report`: ``report.json`` and ``report.md``; :mod:`.show`: one claim with everything about it.
"""
