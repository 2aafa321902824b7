"""The docs site: built once from the executed notebooks, then checked as files and in a
real browser (Debian's headless Chromium driven by Playwright, never a downloaded browser).

What must hold: the build passes with warnings as errors; no published file holds
a line of a solution region, a hidden test or an instructor note, nor a notebook source; every page
loads with no console error and no failed request, every image has loaded and has alt text, every
internal link (and its #fragment) resolves, every page can be reached by navigation; the embeddings
page shows the positional-encoding heatmap and the `Embedding` API entry; site search works, and
finds nothing for words that only occur inside module 11's solution regions. The sidebar leads to every
part (Lesson, Guides, Internals: the executed tooling notebooks, Performance and API), the home page holds
the README's sections for each reader (included, not copied), and docs/cli.md is what the `tinytorch`
command's own argument parser gives today.

With CI=true a missing chromium, Playwright or Sphinx is a failure; elsewhere those tests skip and
say why. Screenshots of the embeddings page and of the navigation are kept in .artifacts/docs/ (git-ignored).
"""
import html
import http.server
import json
import re
import threading
import time
import urllib.parse
from functools import partial
from pathlib import Path

import pytest
from browser import chromium
from requirements import require

ROOT = Path(__file__).resolve().parents[1]
NBS = ROOT / "nbs"
ARTIFACTS = ROOT / ".artifacts" / "docs"
BROWSER_WAIT_MS = 120_000    # a limit for a hung page, with room for a busy machine (Playwright's default: 30 s)

BEGIN_SOLUTION, END_SOLUTION = "### BEGIN SOLUTION", "### END SOLUTION"
BEGIN_HIDDEN, END_HIDDEN = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"
ANSWER = re.compile(r"^\s*<!--\s*answer:", re.I)


# ---------------------------------------------------------------- what must not be published
def _source(cell):
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def _split(notebook):
    """(public text, {'solution': lines, 'hidden': lines, 'notes': lines}) of a source notebook."""
    nb = json.loads(Path(notebook).read_text(encoding="utf-8"))
    public, secret = [], {"solution": [], "hidden": [], "notes": []}
    for cell in nb["cells"]:
        src = _source(cell)
        if cell["cell_type"] == "markdown" and ANSWER.match(src):
            secret["notes"] += src.splitlines()[1:]
            continue
        region = None
        for line in src.splitlines():
            mark = line.strip()
            if mark in (BEGIN_SOLUTION, BEGIN_HIDDEN):
                region = "solution" if mark == BEGIN_SOLUTION else "hidden"
            elif mark in (END_SOLUTION, END_HIDDEN):
                region = None
            elif region:
                secret[region].append(line)
            else:
                public.append(line)
    return "\n".join(public), secret


@pytest.fixture(scope="module")
def secrets():
    """Secret lines (> 30 characters, not comments) and solution-only words, computed from the sources."""
    notebooks = _notebooks()
    parts = {nb.stem: _split(nb) for nb in notebooks}
    public = "\n".join(p for p, _ in parts.values())
    public += "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "docs").glob("*.md"))
    lines = {kind: set() for kind in ("solution", "hidden", "notes")}
    for _, secret in parts.values():
        for kind, found in secret.items():
            for line in found:
                text = line.strip()
                if len(text) > 30 and not text.startswith("#") and text not in public:
                    lines[kind].add(text)
    # Words (identifiers of 6+ characters) of module 11's solution code that occur nowhere in public:
    # no prose, test, docstring or other notebook mentions them, so no page may contain them.
    code = "\n".join(parts["11_embeddings"][1]["solution"])
    code = re.sub(r"#.*", "", re.sub(r"'[^'\n]*'|\"[^\"\n]*\"", "", code))
    lowered = public.lower()
    words = sorted({w for w in re.findall(r"\b[A-Za-z_][A-Za-z0-9_]{5,}\b", code) if w.lower() not in lowered})
    return {"lines": lines, "words": words}


def test_solution_only_strings_exist(secrets):
    assert secrets["lines"]["solution"], "no solution lines found: the leak checks would check nothing"
    assert secrets["lines"]["notes"], "no instructor notes found in written-answer cells"
    assert secrets["words"], "module 11 has no solution-only identifiers to search for"


# ---------------------------------------------------------------- the build
@pytest.fixture(scope="module")
def site(tmp_path_factory):
    for module in ("sphinx", "myst_nb", "sphinx_book_theme", "nbclient"):
        require(module, "the docs site")
    from tinytorch.course.site.docs import build_docs
    tmp = tmp_path_factory.mktemp("docs")
    start = time.perf_counter()
    out = build_docs(out_dir=tmp / "site", nbs_dir=NBS, docs_dir=ROOT / "docs", work_dir=tmp / "proc", verbose=False)
    return {"dir": out, "seconds": time.perf_counter() - start, "work": tmp / "proc"}


def _site_files(site_dir):
    return sorted(p for p in site_dir.rglob("*") if p.is_file())


def _views(path):
    try:
        raw = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return []
    return [raw, html.unescape(re.sub(r"<[^>]+>", "", raw))]


def _text(path):
    "A page's text as a reader sees it: tags removed, entities decoded, runs of white space made one space."
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", path.read_text(encoding="utf-8"))).replace("\u2019", "'").split())


def _article(path):
    "The HTML of a page's article, without the navigation around it."
    text = path.read_text(encoding="utf-8")
    return text[text.index('<article class="bd-article"'):text.index("</article>")]


def _notebooks():
    "The lesson's notebooks (numbered, at the top of nbs/), then the tooling's (in its folders)."
    nested = (p for p in NBS.glob("*/**/*.ipynb") if ".ipynb_checkpoints" not in p.parts)
    return sorted(NBS.glob("[0-9]*.ipynb")) + sorted(nested)


def _tooling_notebooks():
    """Paths in nbs/, without `.ipynb`, of the notebooks that export a module outside `core`: the course
    tooling, the Internals pages (`internals/<path>.html`)."""
    stems = []
    for path in _notebooks():
        text = "\n".join(_source(c) for c in json.loads(path.read_text(encoding="utf-8"))["cells"])
        m = re.search(r"^#\|\s*default_exp\s+(\S+)", text, re.M)
        if m and not m.group(1).startswith("core."):
            stems.append(path.relative_to(NBS).with_suffix("").as_posix())
    return stems


GUIDES = ("index.html", "student_guide.html", "instructor_guide.html", "cli.html", "contributing.html",
          "performance.html", "api.html", "api_tooling.html")


def test_build_is_complete(site):
    print(f"docs build: {site['seconds']:.0f} s")    # reported, never asserted: the machine may be busy
    pages = {p.relative_to(site["dir"]).as_posix() for p in site["dir"].rglob("*.html")}
    tooling = _tooling_notebooks()
    assert len(tooling) >= 10 and "course/site/docs" in tooling and "course/grading/grading" in tooling, tooling
    expected = list(GUIDES) + ["search.html", "modules/01_tensor.html", "modules/02_nn.html",
                               "modules/10_tokenization.html", "modules/11_embeddings.html"]
    for page in expected + [f"internals/{stem}.html" for stem in tooling]:
        assert page in pages, f"{page} missing from the site: {sorted(pages)}"
    assert (site["dir"] / "searchindex.js").exists()


def test_a_notebook_that_fails_stops_the_build_and_is_named(tmp_path):
    "The build is the suite's check that every notebook runs top to bottom: a failing one is named, with its error."
    require("nbclient", "the docs site")
    from tinytorch.course.site.docs import _publish_pages
    (tmp_path / "nbs").mkdir()
    (tmp_path / "src").mkdir()
    broken = tmp_path / "nbs" / "50_broken.ipynb"
    broken.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": "code", "id": "a", "metadata": {}, "outputs": [], "execution_count": None,
         "source": "#| default_exp core.broken\nraise ValueError('the probe cell fails')"}]}))
    with pytest.raises(RuntimeError) as failed:
        _publish_pages([(broken, "core.broken", "modules")], tmp_path / "src", tmp_path / "nbs", {}, 120, 1, False)
    message = str(failed.value)
    assert "50_broken.ipynb fails when run top to bottom" in message and "the probe cell fails" in message, message


def test_internals_pages_are_executed_notebooks(site):
    """Each tooling notebook is a page with its title; its examples ran for the page (they take seconds)."""
    for stem in _tooling_notebooks():
        cells = json.loads((NBS / f"{stem}.ipynb").read_text(encoding="utf-8"))["cells"]
        title = next(_source(c).splitlines()[0].lstrip("# ").strip() for c in cells if c["cell_type"] == "markdown")
        title = title.replace("`", "")
        page = _text(site["dir"] / "internals" / f"{stem}.html")
        assert title in page, f"internals/{stem}.html lacks its title {title!r}"
    docs_page = (site["dir"] / "internals" / "course/site/docs_api.html").read_text(encoding="utf-8")
    assert ".. autoclass:: tinytorch.core.embeddings.Embedding" in html.unescape(docs_page), \
        "the api_markdown example's output is missing from the course/site/docs_api page"


def test_home_page_holds_the_readmes_sections(site):
    """The README's sections for each reader are included in the home page, not copied: one text, two places."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    start, end = readme.index("<!-- readers: start -->"), readme.index("<!-- readers: end -->")
    headings = re.findall(r"^## (.+)$", readme[start:end], re.M)
    assert headings == ["For students", "For instructors", "For readers", "For contributors"], headings
    home = html.unescape(re.sub(r"<[^>]+>", "", (site["dir"] / "index.html").read_text(encoding="utf-8")))
    for heading in headings:
        assert heading in home, f"the home page lacks the README's section {heading!r}"
    assert "pip install '.[course]'" in home
    index_md = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    assert "For instructors" not in index_md, "docs/index.md holds its own copy of a README section"


def test_readme_names_the_two_commands():
    "CI's .ci/run calls scripts/test.sh and scripts/demo.sh as the README tells a new user to."
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "bash scripts/demo.sh" in readme and "bash scripts/test.sh" in readme
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "scripts/test.sh" in ci and "scripts/demo.sh" in ci


# ---------------------------------------------------------------- the command reference
def test_cli_reference_is_the_parsers():
    """docs/cli.md is what `cli_reference` writes from today's argument parser: a changed option, default or
    help text without a new page fails here."""
    from tinytorch.cli import build_parser
    from tinytorch.course.site.cli_reference import cli_reference
    committed = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    today = cli_reference(build_parser())
    if committed != today:
        import difflib
        diff = "\n".join(list(difflib.unified_diff(committed.splitlines(), today.splitlines(), "docs/cli.md",
                                                   "the parser", lineterm=""))[:40])
        pytest.fail("docs/cli.md differs from the tinytorch command's parser; write it again with\n"
                    "  .venv/bin/python -c \"from tinytorch.cli import build_parser; "
                    "from tinytorch.course.site.cli_reference import write_cli_reference; "
                    "write_cli_reference(build_parser())\"\n" + diff)


def test_cli_page_lists_every_command_and_option(site):
    """Read independently of `cli_reference`: every subcommand and every option of the parser is on the page."""
    import argparse
    from tinytorch.cli import build_parser
    page = _text(site["dir"] / "cli.html")
    rows = "".join(re.findall(r'<td><p><code[^>]*>(<span class="pre">[^<]*</span>)</code></p></td>',
                              (site["dir"] / "cli.html").read_text(encoding="utf-8")))     # the argument cells
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert len(sub.choices) >= 8, sorted(sub.choices)
    for name, parser in sub.choices.items():
        assert f"tinytorch {name}" in page, f"tinytorch {name} is not on the command reference page"
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            for option in action.option_strings:
                assert option in page, f"tinytorch {name} {option} is not on the command reference page"
                assert rows.count(f'<span class="pre">{option}</span>') >= 1, f"tinytorch {name} {option} has no row"
            if action.help and action.help != argparse.SUPPRESS:
                words = " ".join(action.help.replace("`", "").split())[1:40]    # [1:]: the page capitalises it
                assert words in page, f"the help of tinytorch {name} {action.option_strings or action.dest} is not on the page"


def test_api_reference_lists_every_exported_name(site):
    import importlib
    api = (site["dir"] / "api.html").read_text(encoding="utf-8")
    internals = (site["dir"] / "api_tooling.html").read_text(encoding="utf-8")
    for path in _notebooks():
        m = re.search(r"^#\|\s*default_exp\s+(\S+)", "\n".join(_source(c) for c in json.loads(path.read_text())["cells"]), re.M)
        if not m:
            continue
        module = importlib.import_module(f"tinytorch.{m.group(1)}")
        page = api if m.group(1).startswith("core.") else internals
        for name in module.__all__:
            assert f'id="{module.__name__}.{name}"' in page, f"{module.__name__}.{name} has no API entry"
    # docstrings are rendered by autodoc, and a backticked exported name in one links to its entry
    entry = api[api.index('id="tinytorch.core.parallel.run_parallel"'):]
    entry = entry[:entry.index("</dd>")]
    assert 'href="#tinytorch.core.parallel.worker_count"' in entry, "run_parallel's docstring does not link `worker_count()`"
    assert "``" not in html.unescape(re.sub(r"<[^>]+>", "", entry)), "a docstring's code was not rendered as code"


def test_only_html_is_published(site):
    for path in _site_files(site["dir"]):
        rel = path.relative_to(site["dir"]).as_posix()
        assert path.suffix != ".ipynb" and not rel.startswith(("_sources/", "jupyter_execute/", ".doctrees/")), rel
    # MyST-NB's executed copies and the staging folder exist, outside the published folder
    assert (site["work"] / "jupyter_execute").is_dir() and (site["work"] / "docs").is_dir()
    assert not any(site["dir"].rglob("jupyter_execute"))


def test_no_solution_hidden_test_or_instructor_note_is_published(site, secrets):
    words = [re.compile(rf"\b{re.escape(w)}\b") for w in secrets["words"]]
    for path in _site_files(site["dir"]):
        rel = path.relative_to(site["dir"]).as_posix()
        for text in _views(path):
            for kind, lines in secrets["lines"].items():
                found = sorted(line for line in lines if line in text)
                assert not found, f"{rel} publishes {kind} line(s): {found[:3]}"
            hits = sorted({w.pattern for w in words if w.search(text)})
            assert not hits, f"{rel} contains solution-only identifier(s) {hits[:5]}"


def test_written_answers_are_neutral(site):
    page = (site["dir"] / "modules" / "11_embeddings.html").read_text(encoding="utf-8")
    cells = json.loads((NBS / "11_embeddings.ipynb").read_text(encoding="utf-8"))["cells"]
    answers = sum(c["cell_type"] == "markdown" and bool(ANSWER.match(_source(c))) for c in cells)
    assert answers and page.count("Your answer goes here in the assignment") == answers
    assert "Instructor notes" not in page and "answer:" not in page


# ---------------------------------------------------------------- in a real browser
class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def server(site):
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(_Quiet, directory=str(site["dir"])))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="module")
def browser():
    with chromium("the docs site") as b:
        yield b


class _Page:
    """A page of the browser with every console error, page error and failed request recorded."""

    def __init__(self, browser, base):
        self.base, self.problems = base, []
        self.page = browser.new_page(viewport={"width": 1280, "height": 900})
        self.page.set_default_timeout(BROWSER_WAIT_MS)
        self.page.on("console", lambda m: m.type == "error" and self.problems.append(
            f"console error: {m.text} ({m.location.get('url')})"))
        self.page.on("pageerror", lambda e: self.problems.append(f"page error: {e}"))
        # net::ERR_ABORTED is the browser cancelling a request, e.g. the favicon of a page left before it came: a
        # missing or broken file fails otherwise (an HTTP error below, a net error here), and images are checked loaded
        self.page.on("requestfailed", lambda r: r.failure != "net::ERR_ABORTED" and self.problems.append(
            f"request failed: {r.url} {r.failure}"))
        self.page.on("response", lambda r: r.status >= 400 and self.problems.append(f"HTTP {r.status}: {r.url}"))
        self.page.on("request", lambda r: not r.url.startswith((base, "data:", "blob:"))
                     and self.problems.append(f"request outside the site (must work offline): {r.url}"))

    def open(self, rel):
        response = self.page.goto(self.base + rel, wait_until="load")
        self.page.wait_for_load_state("networkidle")
        assert response is not None and response.status == 200, f"{rel}: {response and response.status}"
        return self.page


def _ids(path, cache={}):
    if path not in cache:
        text = path.read_text(encoding="utf-8")
        cache[path] = {html.unescape(i) for i in re.findall(r'\b(?:id|name)="([^"]*)"', text)}
    return cache[path]


@pytest.fixture(scope="module")
def visited(site, server, browser):
    """Every page of the site opened once, in one browser page: what each check of a page needs, recorded while it
    is loaded (the images, the internal links, the figures of the module pages) and every problem the browser saw."""
    site_dir = site["dir"]
    pages = sorted(p.relative_to(site_dir).as_posix() for p in site_dir.rglob("*.html"))
    viewer = _Page(browser, server)
    images, hrefs, figures = {}, {}, {}
    for rel in pages:
        page = viewer.open(rel)
        images[rel] = page.eval_on_selector_all(
            "img", "els => els.map(e => ({src: e.currentSrc || e.src, ok: e.complete && e.naturalWidth > 0, alt: e.alt}))")
        hrefs[rel] = page.eval_on_selector_all("a[href]", "els => els.map(e => e.href)")
        if rel.startswith("modules/"):
            figures[rel] = page.eval_on_selector_all("div.cell_output img", "els => els.map(e => e.alt)")
    viewer.page.close()
    return {"pages": pages, "images": images, "hrefs": hrefs, "figures": figures, "problems": viewer.problems}


def test_every_page_loads_with_images_and_working_links(site, server, visited):
    site_dir, pages = site["dir"], visited["pages"]
    assert not [p for p in pages if p.startswith("_static/")], "theme template files were published as pages"
    linked, broken = set(), []
    for rel in pages:
        for img in visited["images"][rel]:
            assert img["ok"], f"{rel}: image did not load: {img['src']}"
            assert img["alt"].strip(), f"{rel}: image without alt text: {img['src']}"
        for href in visited["hrefs"][rel]:
            if not href.startswith(server):
                continue
            url = urllib.parse.urlsplit(href)
            target = urllib.parse.unquote(url.path[len(urllib.parse.urlsplit(server).path):])
            target_file = site_dir / (target or "index.html")
            if target_file.is_dir():
                target_file = target_file / "index.html"
            if not target_file.is_file():
                broken.append(f"{rel} -> {href} (no such file)")
                continue
            linked.add(target_file.relative_to(site_dir).as_posix())
            fragment = urllib.parse.unquote(url.fragment)
            if fragment and target_file.suffix == ".html" and fragment not in _ids(target_file):
                broken.append(f"{rel} -> {href} (no element with id {fragment!r})")
    assert not visited["problems"], "\n".join(visited["problems"][:20])
    assert not broken, "broken internal links:\n" + "\n".join(broken[:20])
    unreachable = sorted(set(pages) - linked - {"index.html"})
    assert not unreachable, f"pages no link leads to: {unreachable}"


def test_embeddings_page_shows_heatmap_and_api(site, server, browser):
    viewer = _Page(browser, server)
    page = viewer.open("modules/11_embeddings.html")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "embeddings-top.png"))

    heatmap = page.locator("img[alt*='Sinusoidal positional encoding']")
    assert heatmap.count() == 1, "the positional-encoding heatmap is missing"
    assert "heatmap" in heatmap.get_attribute("alt").lower()
    heatmap.scroll_into_view_if_needed()
    assert heatmap.is_visible()
    assert heatmap.evaluate("e => e.complete && e.naturalWidth > 300 && e.naturalHeight > 100")
    page.evaluate("window.scrollBy(0, -120)")
    page.screenshot(path=str(ARTIFACTS / "embeddings.png"))
    for title in ("A few sine columns", "Lookups are bandwidth-bound", "Embedding memory grows"):
        assert page.locator(f"img[alt*='{title}']").count() == 1, f"figure {title!r} missing"

    entry = page.locator("dl.py.class > dt", has_text="Embedding(vocab_size")
    assert entry.count() >= 1, "no Embedding API entry on the embeddings page"
    entry.first.scroll_into_view_if_needed()
    assert entry.first.is_visible()
    body = entry.first.locator("xpath=following-sibling::dd[1]")
    assert "forward" in body.inner_text(), "Embedding's methods are missing from its API entry"
    page.screenshot(path=str(ARTIFACTS / "embeddings-api.png"))
    assert not viewer.problems, "\n".join(viewer.problems)
    page.close()


def _fig_alts(notebook):
    "The `#| fig-alt` texts of a notebook's cells, in order."
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    return [m.group(1).strip() for c in cells for m in [re.search(r"^#\|\s*fig-alt:\s*(.+)$", _source(c), re.M)] if m]


def test_each_figure_has_the_alt_text_its_notebook_gives(site, visited):
    seen = 0
    for page_file in sorted((site["dir"] / "modules").glob("*.html")):
        expected = _fig_alts(NBS / (page_file.stem + ".ipynb"))
        figures = visited["figures"][f"modules/{page_file.name}"]
        assert figures == expected, f"{page_file.name}: figures' alt text {figures} != the notebook's #| fig-alt {expected}"
        seen += len(figures)
    assert seen >= 6, f"only {seen} figures on the module pages"
    assert not visited["problems"], "\n".join(visited["problems"])


def _search(viewer, query):
    page = viewer.open("search.html?q=" + urllib.parse.quote(query))
    page.wait_for_function(
        "() => { const s = document.querySelector('#search-results .search-summary');"
        " return s && /finished|did not match/i.test(s.innerText); }", timeout=BROWSER_WAIT_MS)
    return page.eval_on_selector_all("#search-results ul.search > li a", "els => els.map(e => e.getAttribute('href'))")


def test_search_finds_the_lesson_but_no_solution(site, server, browser, secrets):
    viewer = _Page(browser, server)
    hits = _search(viewer, "Embedding")
    assert any("modules/11_embeddings" in h for h in hits), f"search for Embedding found {hits}"
    assert any("api" in h for h in hits), f"search for Embedding found {hits}"
    for word in secrets["words"][:5]:
        found = _search(viewer, word)
        assert found == [], f"search for solution-only {word!r} found {found}"
    assert not viewer.problems, "\n".join(viewer.problems)
    viewer.page.close()


NAV = "nav.bd-docs-nav"


def test_navigation_reaches_every_part(site, server, browser):
    """The sidebar of the home page has the book's parts in order, and a link to every guide, module page,
    Internals page and API page; a screenshot of it is kept in .artifacts/docs/navigation.png."""
    viewer = _Page(browser, server)
    page = viewer.open("index.html")
    captions = page.eval_on_selector_all(f"{NAV} p.caption", "els => els.map(e => e.innerText.trim())")
    assert captions == ["Lesson", "Guides", "Internals", "Performance and API"], captions
    links = page.eval_on_selector_all(f"{NAV} a.reference.internal",
                                      "els => els.map(e => [e.getAttribute('href'), e.innerText.trim()])")
    hrefs = [href.split("#")[0] for href, _ in links]
    titles = dict((href.split("#")[0], text) for href, text in links)
    wanted = [g for g in GUIDES if g != "index.html"]
    wanted += [p.relative_to(site["dir"]).as_posix() for p in sorted((site["dir"] / "modules").glob("*.html"))]
    wanted += [f"internals/{stem}.html" for stem in _tooling_notebooks()]
    missing = [w for w in wanted if w not in hrefs]
    assert not missing, f"the navigation has no link to {missing}"
    for href, title in (("student_guide.html", "Student guide"), ("instructor_guide.html", "Instructor guide"),
                        ("performance.html", "Performance"), ("cli.html", "Command reference")):
        assert titles[href] == title, (href, titles[href])
    # the parts come in the reader's order: the lesson first, the API last
    assert hrefs.index("modules/11_embeddings.html") < hrefs.index("student_guide.html") \
        < hrefs.index("internals/course/grading/grading.html") < hrefs.index("performance.html") < hrefs.index("api.html")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.set_viewport_size({"width": 1280, "height": 2200})
    page.locator(NAV).screenshot(path=str(ARTIFACTS / "navigation.png"))
    for target in ("instructor_guide.html", "internals/course/isolation/sandbox.html", "performance.html"):
        page = viewer.open("index.html")
        page.locator(f"{NAV} a.reference.internal[href='{target}']").first.click()
        page.wait_for_load_state("networkidle")     # (leaving a page still loading would abort its requests)
        assert page.url.split("#")[0].endswith(target), (target, page.url)
    assert not viewer.problems, "\n".join(viewer.problems)
    viewer.page.close()


def test_guide_links_to_the_mechanism(site):
    """The instructor guide points at the Internals pages instead of retelling them, and its reference parts exist."""
    guide = _article(site["dir"] / "instructor_guide.html")     # the page's own text: the sidebar links everywhere
    for target in ("internals/course/grading/grading.html", "internals/course/isolation/sandbox.html", "internals/course/checking/judge.html",
                   "internals/course/isolation/limits.html", "internals/course/grading/feedback.html", "cli.html"):
        assert f'href="{target}' in guide, f"the instructor guide has no link to {target}"
    for anchor in ("troubleshooting", "flags", "planning", "install", "sandbox", "limits"):
        assert f'id="{anchor}"' in guide, f"the instructor guide has no section #{anchor}"
