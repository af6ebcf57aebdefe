"""Course tooling, run from the checkout and not part of the library: ``python -m tools.workbook``
runs the notebooks headless, ``python -m tools.site`` builds the course website from an executed
run, ``tools.browser`` drives JupyterLab in Chromium for the browser tests."""
