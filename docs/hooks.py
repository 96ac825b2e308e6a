"""MkDocs hook: fills ``<!-- cli-help -->`` in docs/api/cli.md with the ``--help`` of ``rlgraph`` and of each of its
commands, taken from the parser itself when the site is built (so the page cannot fall behind the code)."""
import contextlib
import io
import os
import re
import sys

MARKER = "<!-- cli-help -->"


def _help(argv):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if root not in sys.path:
        sys.path.insert(0, root)  # this checkout's rlgraph, from whatever directory mkdocs runs
    from rlgraph.cli import main
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            main(argv + ["--help"])
        except SystemExit:
            pass
    return out.getvalue().rstrip()


def cli_help_markdown():
    """``rlgraph --help`` and each command's, as Markdown sections."""
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"  # argparse wraps to the terminal's width: fix it for a stable page.
    try:
        top = _help([])
        found = re.search(r"\{([a-z,]+)\}", top)
        if not found:
            raise RuntimeError("docs/hooks.py: no command list in `rlgraph --help`:\n" + top)
        parts = ["## rlgraph", "", "```text", top, "```", ""]
        for command in found.group(1).split(","):
            parts += [f"## rlgraph {command}", "", "```text", _help([command]), "```", ""]
        return "\n".join(parts)
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old


def on_page_markdown(markdown, page, config, files, **kwargs):
    if MARKER in markdown:
        return markdown.replace(MARKER, cli_help_markdown())
    return markdown
