"""MkDocs hooks: fill ``<!-- cli-help -->`` in docs/api/cli.md with the ``--help`` of ``rlgraph`` and of each of its
commands, taken from the parser itself when the site is built (so the page cannot fall behind the code); point
links to pages that moved (``MOVED``) at their new place."""
import contextlib
import io
import os
import posixpath
import re
import sys

MARKER = "<!-- cli-help -->"

#: Pages that moved: old path -> new path (relative to docs/). Their URLs stay the same (``engines.md`` and
#: ``engines/index.md`` are both served at ``engines/``); links written with the old path, e.g. by
#: docs/gen_config_reference.py, are rewritten when the site is built.
MOVED = {"engines.md": "engines/index.md"}

_LINK = re.compile(r"\]\((?P<path>[^)#\s:]+\.md)(?P<anchor>#[^)\s]*)?\)")


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


def relink_moved(markdown, page_path):
    """``markdown`` of the page at ``page_path`` (relative to docs/) with its links to ``MOVED`` pages pointed at
    their new paths (anchors kept)."""
    base = posixpath.dirname(page_path)

    def relink(match):
        target = posixpath.normpath(posixpath.join(base, match.group("path")))
        if target not in MOVED:
            return match.group(0)
        return f"]({posixpath.relpath(MOVED[target], base or '.')}{match.group('anchor') or ''})"

    return _LINK.sub(relink, markdown)


def on_page_markdown(markdown, page, config, files, **kwargs):
    if MARKER in markdown:
        markdown = markdown.replace(MARKER, cli_help_markdown())
    return relink_moved(markdown, page.file.src_uri)
