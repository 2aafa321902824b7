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
    extra = [_cell("markdown", "payload-markdown", markdown_payloads("md")),
             _cell("code", "payload-outputs", OUTPUT_CELL),
             _cell("markdown", "legit-markdown", LEGIT_MARKDOWN),
             _cell("code", "legit-outputs", LEGIT_OUTPUT_CELL)]
    nb["cells"][1:1] = extra
    return nb
