"""The documentation: the site builds in strict mode, every Python snippet in README.md and docs/ runs as
written from any directory, the config reference is what its generator makes, and every shipped config
passes the project's JSON Schema.

Snippet markers (an HTML comment on the line before the fence, blank lines allowed in between):

- ``<!-- snippet: skip (why) -->``: not run (it needs a GPU, a cluster or an account); reported as skipped
  with the reason.
- ``<!-- snippet: slow -->``: run only with the slow tests (``-m slow`` selects them; ``make test`` runs them too).
"""
import glob
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "docs")
CONFIGS = os.path.join(ROOT, "configs")

#: Seconds one snippet may take (a slow-marked one: SLOW_SNIPPET_SECONDS).
SNIPPET_SECONDS = 90
SLOW_SNIPPET_SECONDS = 540

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>```+|~~~+)\s*(?P<lang>[\w+-]*)[^\n]*$")
_MARKER = re.compile(r"^\s*<!--\s*snippet:\s*(?P<kind>[\w-]+)\s*(?:\((?P<reason>.*)\))?\s*-->\s*$")
_MARKER_KINDS = ("skip", "slow")


def markdown_files():
    """README.md and every Markdown page under docs/, as paths relative to the repository root."""
    pages = sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(DOCS, "**", "*.md"), recursive=True))
    return ["README.md"] + pages


def extract_snippets(text):
    """The fenced code blocks of a Markdown text: ``[(line, lang, code, marker, reason)]``, ``line`` the
    1-based line of the opening fence, ``code`` dedented by the fence's indentation (a block inside a list
    item), ``marker`` the kind of a ``<!-- snippet: ... -->`` comment before it (or None)."""
    lines = text.splitlines()
    out, i = [], 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, lang = m.group("indent"), m.group("fence"), m.group("lang").lower()
        j = i + 1
        while j < len(lines) and not (lines[j].strip().startswith(fence[0] * len(fence))
                                      and lines[j].strip().strip(fence[0]) == ""):
            j += 1
        body = [line[len(indent):] if line.startswith(indent) else line.lstrip() for line in lines[i + 1:j]]
        k = i - 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        marker = _MARKER.match(lines[k]) if k >= 0 else None
        out.append((i + 1, lang, textwrap.dedent("\n".join(body)) + "\n",
                    marker.group("kind") if marker else None, (marker.group("reason") or "") if marker else ""))
        i = j + 1
    return out


def _python_snippets():
    params = []
    for rel in markdown_files():
        with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
            text = f.read()
        for line, lang, code, marker, reason in extract_snippets(text):
            if lang not in ("python", "py", "python3"):
                continue
            marks = [pytest.mark.slow] if marker == "slow" else []
            # Ids without "/", so that one snippet can be selected on the command line (pytest "...[library.md:66]").
            name = rel[len("docs/"):].replace("/", "-") if rel.startswith("docs/") else rel
            params.append(pytest.param(rel, line, code, marker, reason, id=f"{name}:{line}", marks=marks))
    return params


def test_snippet_markers_are_known():
    """A misspelt marker (``<!-- snippet: skipp -->``) would silently run or hide a snippet."""
    bad = []
    for rel in markdown_files():
        with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if line.lstrip().startswith("<!--") and re.match(r"<!--\s*snippet", line.strip()):
                    m = _MARKER.match(line)
                    if not m or m.group("kind") not in _MARKER_KINDS or (m.group("kind") == "skip"
                                                                         and not (m.group("reason") or "").strip()):
                        bad.append(f"{rel}:{n}: {line.strip()}")
    assert not bad, "unknown or reason-less snippet markers (use <!-- snippet: skip (why) --> or " \
                    "<!-- snippet: slow -->):\n" + "\n".join(bad)


def test_extract_snippets_reads_fences_markers_and_indented_blocks():
    text = textwrap.dedent("""\
        Intro.

        <!-- snippet: skip (needs a GPU) -->

        ```python
        print(1)
        ```

        - a list item:
          ```python
          def f():
              return 2
          ```

        ```bash
        ls
        ```
        """)
    found = extract_snippets(text)
    assert [(line, lang, marker, reason) for line, lang, _, marker, reason in found] == [
        (5, "python", "skip", "needs a GPU"), (10, "python", None, ""), (15, "bash", None, "")]
    assert found[1][2] == "def f():\n    return 2\n"


@pytest.mark.parametrize("page, line, code, marker, reason", _python_snippets())
def test_snippet_runs_as_written(tmp_path, page, line, code, marker, reason):
    """Each ``python`` snippet of README.md and docs/ runs alone, in a fresh interpreter whose working directory
    is an empty temporary directory (not the repository), within a time bound."""
    if marker == "skip":
        pytest.skip(f"{page}:{line} is marked skip: {reason}")
    script = tmp_path / "snippet.py"
    script.write_text(code, encoding="utf-8")
    work = tmp_path / "cwd"
    work.mkdir()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT] + [p for p in [os.environ.get("PYTHONPATH")] if p]),
               OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"), MPLBACKEND="Agg",
               TF_CPP_MIN_LOG_LEVEL="3")
    seconds = SLOW_SNIPPET_SECONDS if marker == "slow" else SNIPPET_SECONDS
    command = [sys.executable, str(script)]
    if re.search(r"^def test_\w*\(", code, re.M):
        # A snippet of tests runs as tests (defining them alone would check nothing), with rlgraph's pytest plugin
        # loaded as the docs tell users to (``pytest_plugins = ["rlgraph.tests.pytest_plugin"]``).
        script = script.rename(tmp_path / "test_snippet.py")
        command = [sys.executable, "-m", "pytest", "-q", "-p", "rlgraph.tests.pytest_plugin", "-p", "no:cacheprovider",
                   "--rootdir", str(tmp_path), "-c", os.devnull, str(script)]
    try:
        proc = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True,
                              timeout=seconds, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{page}:{line}: the snippet ran past {seconds} s (mark it <!-- snippet: slow --> if it is "
                    f"meant to take long, or make it shorter)")
    assert proc.returncode == 0, (f"{page}:{line}: the snippet failed (exit {proc.returncode}) when run alone "
                                  f"from an empty directory:\n{code}\n--- output (end) ---\n{proc.stdout[-3000:]}"
                                  f"\n--- stderr (end) ---\n{proc.stderr[-4000:]}")


def test_site_builds_in_strict_mode(tmp_path):
    """``mkdocs build --strict``: a broken link, a page missing from the nav or a failing API reference fails."""
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("mkdocstrings") is None:
        pytest.skip("mkdocs and mkdocstrings[python] are not installed (pip install -e '.[docs]')")
    site = tmp_path / "site"
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    for page in ("index.html", "concepts/index.html", "config_reference/index.html", "api/spaces/index.html"):
        assert (site / page).is_file(), f"{page} missing from the built site"
    api = (site / "api" / "agents" / "index.html").read_text(encoding="utf-8")
    assert "from_spec" in api and "get_actions" in api, "the API reference lost Agent's methods"
    cli = (site / "api" / "cli" / "index.html").read_text(encoding="utf-8")
    assert "usage: rlgraph train" in cli and "cli-help" not in cli, "docs/hooks.py did not fill in the CLI help"


def test_config_reference_is_up_to_date():
    """docs/config_reference.md is what docs/gen_config_reference.py makes from the rule tables today (run in a
    fresh interpreter: classes that other tests define must not leak into the page)."""
    proc = subprocess.run([sys.executable, os.path.join(DOCS, "gen_config_reference.py"), "--check"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, ("docs/config_reference.md is stale: regenerate it with "
                                  "`python docs/gen_config_reference.py`\n" + proc.stdout[-2000:] + proc.stderr[-4000:])


def test_config_reference_lists_every_rule():
    """Every key of every rule table that configs are checked with appears in the reference, in its section."""
    from rlgraph.engines import config_schema as cs
    from rlgraph.engines.execution_spec import SCHEMA as EXECUTION_SCHEMA
    from rlgraph.engines.runner import TRAIN_SPEC_SCHEMA
    with open(os.path.join(DOCS, "config_reference.md"), encoding="utf-8") as f:
        page = f.read()

    def section(anchor):
        start = page.index(f"{{#{anchor}}}")
        end = page.find("\n## ", start)
        return page[start:end if end >= 0 else len(page)]

    for anchor, keys in (("train_spec", TRAIN_SPEC_SCHEMA), ("execution_spec", EXECUTION_SCHEMA),
                         ("environment_spec", cs.environment_spec_schema()["properties"])):
        missing = [k for k in keys if f"| `{k}` |" not in section(anchor)]
        assert not missing, f"{anchor} keys missing from docs/config_reference.md: {missing}"
    generator = _load_generator()
    agents = generator.rlgraph_agents()
    assert {"DQNAgent", "ApexAgent", "IMPALAAgent", "APPOAgent", "R2D2Agent"} <= {a.__name__ for a in agents}
    for klass in agents:
        start = page.index(f": {klass.__name__} {{#agent-")
        block = page[start:page.find("\n### ", start)]
        missing = [k for k in cs.agent_properties(klass) if f"| `{k}` |" not in block]
        assert not missing, f"{klass.__name__} keys missing from docs/config_reference.md: {missing}"


def _load_generator():
    spec = importlib.util.spec_from_file_location("gen_config_reference", os.path.join(DOCS, "gen_config_reference.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _shipped_configs():
    params = []
    for path in sorted(glob.glob(os.path.join(CONFIGS, "*.json"))):
        params.append(pytest.param(path, id=os.path.basename(path)))
    return params


@pytest.fixture(scope="module")
def schema_validator():
    jsonschema = pytest.importorskip("jsonschema")
    from rlgraph.engines.config_schema import config_schema
    schema = config_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


@pytest.mark.parametrize("path", _shipped_configs())
def test_every_config_in_configs_passes_the_schema(schema_validator, path):
    """Every JSON file in configs/ (not only the training configs) passes ``rlgraph schema``'s JSON Schema, as an
    editor pointed at the schema would check it."""
    with open(path) as f:
        config = json.load(f)
    found = [f"{'.'.join(map(str, e.absolute_path)) or '(top level)'}: {e.message}"
             for e in schema_validator.iter_errors(config)]
    assert not found, f"{os.path.basename(path)} fails the config schema:\n" + "\n".join(found)


def test_the_demo_config_runs_from_any_directory(tmp_path):
    """``rlgraph demo examples/demo_network.json`` (its documented use) works with the shipped file."""
    exe = shutil.which("rlgraph", path=os.path.dirname(sys.executable)) or shutil.which("rlgraph")
    cmd = [exe] if exe else [sys.executable, "-m", "rlgraph.cli"]
    proc = subprocess.run(cmd + ["demo", os.path.join(os.path.dirname(CONFIGS), "examples", "demo_network.json"),
                                "--backend", "pytorch"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
