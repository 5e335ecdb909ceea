"""A table as data (a header, rows of cells, notes), and its text forms: Markdown and LaTeX.

Its HTML form is a template (``templates/table.html.j2``, `yanami.scoring._page.html_table`):
no markup is built here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from yanami.contract import printable
from yanami.scoring._compare import MARK, PRIVILEGED_MARK

Cell = str | float | int | None
"""A cell's value: text, a number (a float prints with two decimals) or None (no value: a dash)."""


@dataclass
class Table:
    """A titled table: a header, rows of cells (None prints as a dash) and notes under it.

    A row whose run is not comparable with the others has `MARK` after its label, and a
    note saying why (see `yanami.scoring._compare`).
    """

    key: str
    title: str
    header: list[str]
    rows: list[list[Cell]]
    notes: list[str] = field(default_factory=list)

    def cells(self) -> list[list[str]]:
        """Every row's cells as text (`cell_text`), as each form of the table prints them."""
        return [[cell_text(c) for c in row] for row in self.rows]


def cell_text(v: Cell, digits: int = 2) -> str:
    """A cell as text: a dash for None, a float with ``digits`` decimals, anything else as it is."""
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


_MARKDOWN = {"&": "&amp;", "<": "&lt;", ">": "&gt;"} | {ch: "\\" + ch for ch in "\\`*_[]|#"}
"""Every character of a text that Markdown could read as markup or as HTML (a run's label, a
config's name), written so that it shows as itself."""


def _markdown_escape(s: str) -> str:
    return "".join(_MARKDOWN.get(ch, ch) for ch in s)


def markdown(t: Table, *, escaped: bool = True) -> str:
    """A table in GitHub Markdown, its notes under it; every text escaped (`_markdown_escape`).

    ``escaped=False`` is the same layout for a terminal, which renders no Markdown: texts as they
    are but for a cell's ``|``, control characters written out (`yanami.contract.printable`)."""

    def text(s: str) -> str:
        return _markdown_escape(s) if escaped else printable(s)

    def cell(c: str) -> str:
        return text(c) if escaped else text(c).replace("|", "\\|")

    lines = [f"**{text(t.title)}**", "", "| " + " | ".join(map(text, t.header)) + " |"]
    lines.append("|" + "---|" * len(t.header))
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in t.cells()]
    if t.notes:
        lines += ["", "  \n".join(map(text, t.notes))]
    return "\n".join(lines) + "\n"


_LATEX = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "_": r"\_",
    "#": r"\#",
    "$": r"\$",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    MARK: r"\textsuperscript{\dag}",
    PRIVILEGED_MARK: r"\textsuperscript{\ddag}",
}


def _latex_escape(s: str) -> str:
    """``s`` as LaTeX text: each special character escaped, and a control character (a newline
    included: a blank line would end the paragraph inside a tabular) as a space."""
    return "".join(_LATEX.get(ch, " " if ch < " " or ch == "\x7f" else ch) for ch in s)


def latex(t: Table) -> str:
    """A table as a LaTeX tabular (booktabs), its notes under it."""
    cols = "l" + "r" * (len(t.header) - 1)
    lines = [
        "\\begin{table}[t]\\centering",
        f"\\caption{{{_latex_escape(t.title)}}}",
        f"\\begin{{tabular}}{{{cols}}}",
        "\\toprule",
        " & ".join(_latex_escape(h) for h in t.header) + " \\\\",
        "\\midrule",
    ]
    lines += [" & ".join(_latex_escape(c) for c in row) + " \\\\" for row in t.cells()]
    lines += ["\\bottomrule", "\\end{tabular}"]
    if t.notes:
        lines.append("\\par\\smallskip{\\footnotesize " + " \\\\ ".join(_latex_escape(n) for n in t.notes) + "}")
    lines.append("\\end{table}")
    return "\n".join(lines) + "\n"
