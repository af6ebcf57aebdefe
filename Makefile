# The two commands of the README. Both create/reuse .venv through scripts/bootstrap.sh.
.PHONY: workbook test lint bootstrap

bootstrap:
	bash scripts/bootstrap.sh

workbook: bootstrap  ## run every notebook headless, smoke profile, offline
	.venv/bin/toolrl workbook run --profile smoke

test: bootstrap  ## lint + the whole test suite (unit tests and the notebooks in smoke mode)
	.venv/bin/ruff check toolrl_lib tests benchmarks notebooks
	.venv/bin/python -m pytest -m "not notebooks"
	.venv/bin/python -m pytest -m notebooks

lint:
	.venv/bin/ruff check toolrl_lib tests benchmarks notebooks
