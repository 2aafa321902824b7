"""Headless Debian Chromium for the browser tests, driven by Playwright (never `playwright install`).

Without chromium or playwright a browser test skips, except in CI (CI=true), where it fails: there the
browser checks must run.
"""
import contextlib

import pytest
from requirements import require


@contextlib.contextmanager
def chromium(what="this browser test", extra_args=()):
    "A headless Chromium browser (Playwright's Browser), closed afterwards; `extra_args` go to its command line."
    path = require("chromium", what)
    require("playwright", what)
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=path, headless=True,
                                    args=["--no-sandbox", "--disable-gpu", "--disable-background-networking", *extra_args])
        try:
            yield browser
        finally:
            browser.close()


def serve_formgrader(cli, course):
    "(server process, its address) of `tinytorch formgrade course`, once it answers; the test fails if it doesn't."
    import subprocess
    server = subprocess.Popen([cli, "formgrade", course], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = server.stdout.readline()                       # the address, once the server answers
    if not first.startswith("formgrader: "):
        server.kill()
        pytest.fail(f"tinytorch formgrade printed no address: {first!r}\n{server.stderr.read()[-2000:]}")
    return server, first.split(": ", 1)[1].strip()
