"""Evaluation: mean@k on our own splits, and BFCL v4 with its official scorer.

Modules: ``mean_at_k`` (in-distribution validation, shared with training), ``backends``
(HF / vLLM generation), ``bfcl_results`` (our generations -> BFCL result files),
``scorer`` (the official scorer in its own venv), ``runner`` (generate + score one model),
``analysis`` (tidy tables, call rates, error taxonomy) and ``stats`` (bootstrap, McNemar).
"""
