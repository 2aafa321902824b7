# Sphinx configuration of the tinytorch docs site.
#
# Built by `tinytorch.course.site.docs.build_docs` (nbs/course/site/docs.ipynb), which copies this folder into a
# staging folder next to the executed, solution-free copies of the notebooks and runs
# `sphinx-build -W`. Don't run sphinx-build on this folder directly: the module pages and the API
# reference are generated at staging time.
project = "tinytorch"
author = "tinytorch course team"
copyright = "tinytorch course team"

extensions = ["myst_nb", "sphinx.ext.autodoc"]

# API entries: Sphinx autodoc imports each exported object and documents it (build_docs writes
# `.. autoclass::` / `.. autofunction::` / `.. autodata::` directives in MyST `{eval-rst}` blocks). Members in source order, defaults as
# written in the source (`out=sys.stdout`, not the stream's repr).
autodoc_member_order = "bysource"
autodoc_preserve_defaults = True

# The notebooks are executed by build_docs before Sphinx sees them (it needs the outputs to
# derive figure alt text and to strip solution code afterwards), so MyST-NB only renders them.
nb_execution_mode = "off"
nb_merge_streams = True
nb_output_stderr = "show"

myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

exclude_patterns = ["_build", "**/.ipynb_checkpoints"]

html_theme = "sphinx_book_theme"
html_title = "tinytorch"
# Essential: by default Sphinx publishes every source under _sources/, and the notebook
# sources of a course hold the solutions.
html_copy_source = False
html_show_sourcelink = False
html_last_updated_fmt = None
html_theme_options = {
    "home_page_in_toc": True,
    "show_toc_level": 2,
    "use_download_button": False,   # would link to the (unpublished) sources
    "use_repository_button": False,
    "use_edit_page_button": False,
    "use_source_button": False,
    "use_issues_button": False,
    "navigation_with_keys": False,
}
# Without a default, the theme's script logs a console error ("Got invalid theme mode") on a
# reader's first visit.
html_context = {"default_mode": "auto"}
# Also spares the browser its request for /favicon.ico, a 404 logged as a console error.
html_favicon = "favicon.svg"


def setup(app):
    """The docstrings are written in the notebooks' Markdown style; autodoc reads reStructuredText.
    `autodoc_docstring` bridges the two and links backticked exported names to their entries, using the
    targets build_docs left next to this file."""
    import json
    from pathlib import Path

    from tinytorch.course.site.docs import LINK_TARGETS_FILE
    from tinytorch.course.site.docs_api import autodoc_docstring

    path = Path(__file__).with_name(LINK_TARGETS_FILE)
    targets = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    app.connect("autodoc-process-docstring",
                lambda app, what, name, obj, options, lines: autodoc_docstring(what, obj, lines, targets))
smartquotes = False   # the command reference shows options' examples with the quotes a shell needs
