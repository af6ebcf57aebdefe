# The two commands of the README. Both create/reuse .venv through scripts/bootstrap.sh.
.PHONY: workbook test lint bootstrap site

bootstrap:
	bash scripts/bootstrap.sh

workbook: bootstrap  ## run every notebook headless, smoke profile, offline
	.venv/bin/python -m tools.workbook run --profile smoke

test: bootstrap  ## lint + the whole test suite (unit tests and the notebooks in smoke mode)
	.venv/bin/ruff check toolrl_lib tools tests benchmarks notebooks
	.venv/bin/python -m pytest -m "not notebooks and not browser"
	.venv/bin/python -m pytest -m browser
	.venv/bin/python -m pytest -m notebooks

lint:
	.venv/bin/ruff check toolrl_lib tools tests benchmarks notebooks

site: bootstrap  ## the course as a static website (site/) from the newest executed workbook run
	.venv/bin/python -m tools.site $(if $(RUN),--run $(RUN))
