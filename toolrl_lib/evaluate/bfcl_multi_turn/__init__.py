"""BFCL's multi-turn benchmark categories: run a model through them, write and score the results.

Not to be confused with ``toolrl_lib.envs``, the multi-turn environments we *train* in. Here
the environment is BFCL's own (its simulated file system, trading bot, ...):

* ``env``: BFCL's executor, its classes hosted in a ``worker`` process, every call validated;
* ``runner``: our inference loop, step for step like BFCL's (``MultiTurnSettings``);
* ``results``: canonical step strings and the sanitiser every result file passes through;
* ``report``: per-entry tables (turns passed, force-terminations) and ``transcript``.

``evaluate.runner.evaluate_bfcl`` calls into this package for the multi-turn categories; nothing
here imports the single-turn runner.
"""
