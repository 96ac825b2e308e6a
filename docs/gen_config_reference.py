"""Writes docs/config_reference.md from the rule tables that check training configs.

The page is generated, never edited by hand: ``python docs/gen_config_reference.py`` rewrites it,
``python docs/gen_config_reference.py --check`` exits 1 when the committed page differs from what the tables
give today (``tests/test_docs.py`` runs the same comparison). Its sources are those of ``rlgraph schema``
(``rlgraph.engines.config_schema``): each agent's constructor keywords with the rules of its ``ARG_RULES``,
``environment_spec`` (``VectorEnv``), ``train_spec`` (``runner.TRAIN_SPEC_SCHEMA``), ``execution_spec``
(``execution_spec.SCHEMA``), and the keywords and rules of every registered memory, optimizer, network, layer
and preprocessor class. Where a key has a rule, its text is the rule's own description (the words of the error
a bad value gets); otherwise it is read from the JSON Schema.
"""
import argparse
import inspect
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUTPUT = os.path.join(HERE, "config_reference.md")

if __name__ == "__main__":  # Run as a script from a checkout: import this checkout's rlgraph.
    sys.path.insert(0, os.path.dirname(HERE))

from rlgraph.engines import config_schema as cs  # noqa: E402
from rlgraph.utils.validation import Optional  # noqa: E402


def _esc(text):
    """Text for one Markdown table cell."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _code(value):
    import json
    return f"`{json.dumps(value)}`"


def _of(base):
    """The concrete classes of rlgraph (not of tests or user code imported into this process) registered under
    ``base``, by name."""
    table = base._type_table()
    classes = {k for k in table.values() if k.__module__.startswith("rlgraph.") and not inspect.isabstract(k)
               and not k.__module__.startswith("rlgraph.tests")}
    return sorted(classes, key=lambda k: k.__name__)


def _names(klass):
    return [klass.__name__] + [a for a in klass.__dict__.get("__aliases__", ()) if a != klass.__name__]


def _number_text(kind, p):
    lo = (">", p["exclusiveMinimum"]) if "exclusiveMinimum" in p else (">=", p.get("minimum"))
    hi = ("<", p["exclusiveMaximum"]) if "exclusiveMaximum" in p else ("<=", p.get("maximum"))
    if lo[1] is not None and hi[1] is not None:
        return f"{kind} in {'(' if lo[0] == '>' else '['}{lo[1]}, {hi[1]}{')' if hi[0] == '<' else ']'}"
    if lo[1] is not None:
        return f"{kind} {lo[0]} {lo[1]}"
    if hi[1] is not None:
        return f"{kind} {hi[0]} {hi[1]}"
    return kind


_TYPE_WORDS = dict(object="an object", array="a list", string="a string", number="a number", integer="an int",
                   boolean="a bool", null="null")


def describe_json(p):
    """A JSON Schema fragment in words."""
    if not isinstance(p, dict):
        return "any"
    if "$ref" in p:
        name = p["$ref"].rsplit("/", 1)[-1]
        word = name.replace("_spec", "")
        return f"{'an' if word[0] in 'aeiou' else 'a'} {word} spec ([{name}](#{name}))"
    if "enum" in p:
        return "one of " + ", ".join(_code(v) for v in p["enum"])
    if "anyOf" in p:
        parts = []
        for sub in p["anyOf"]:
            text = describe_json(sub)
            if text not in parts:
                parts.append(text)
        return " or ".join(parts)
    kind = p.get("type")
    if isinstance(kind, list):
        words = [_TYPE_WORDS.get(k, k) for k in kind]
        return ", ".join(words[:-1]) + " or " + words[-1] if len(words) > 1 else words[0]
    if kind in ("integer", "number"):
        return _number_text(_TYPE_WORDS[kind], p)
    if kind == "string":
        if "pattern" in p:
            return "a \"host:port\" string" if p["pattern"] == "^.+:[0-9]{1,5}$" else "a string"
        return "a non-empty string" if p.get("minLength") == 1 else "a string"
    if kind == "array":
        text = "a list" + (f" of {describe_json(p['items'])}" if p.get("items") else "")
        return text + (f" ({p['minItems']} or more)" if p.get("minItems") else "")
    if kind == "object":
        keys = list(p.get("properties", {}))
        if keys:
            return "an object with keys " + ", ".join(f"`{k}`" for k in keys) + \
                   ("" if p.get("additionalProperties") is False else " (and others)")
        return "an object"
    if kind in _TYPE_WORDS:
        return _TYPE_WORDS[kind]
    return "any"


def _allows_null(p):
    kind = p.get("type", ())
    return "null" in (kind if isinstance(kind, list) else (kind,)) or None in p.get("enum", ()) or \
        any(_allows_null(s) for s in p.get("anyOf", ()))


def _accepts(key, prop, rules):
    """What ``key`` accepts: its rule's description where it has one, else the JSON Schema's."""
    rule = rules.get(key)
    if rule is None or "$ref" in prop:
        return describe_json(prop)
    text = rule.describe()
    if _allows_null(prop) and not isinstance(rule, Optional) and "null" not in text and "None" not in text:
        text += " or null"
    return text


def _default(key, defaults, required=()):
    if key in required:
        return "required"
    if key not in defaults:
        return ""
    value = defaults[key]
    try:
        return _code(value)
    except TypeError:
        return f"`{value!r}`"


def _table(rows, first="key"):
    out = [f"| {first} | accepts | default | description |", "|---|---|---|---|"]
    out += [f"| `{k}` | {_esc(a)} | {_esc(d)} | {_esc(doc)} |" for k, a, d, doc in rows]
    return out


def _section_table(properties, rules, defaults, required=()):
    rows = []
    for key, prop in properties.items():
        rows.append((key, _accepts(key, prop, rules), _default(key, defaults, required), prop.get("description", "")))
    return _table(rows)


def _component_block(klass, level="####"):
    props, required, closed = cs.component_properties(klass)
    names = _names(klass)
    spellings = ", ".join(f"`{n}`" for n in names)
    out = [f"{level} {klass.__name__} {{#{klass.__name__.lower()}}}", "",
           f"`\"type\"`: {spellings} (any case; `-`, `_` and spaces ignored), or `\"{klass.__module__}."
           f"{klass.__name__}\"`. " + ("Other keys are refused." if closed else "Takes further keywords.")]
    doc = inspect.getdoc(klass)
    if doc:
        out[-1] = _esc(doc.split("\n\n")[0]) + " " + out[-1]
    out.append("")
    rules = cs._rules_of(klass)
    defaults = cs._defaults_of(klass)
    out += _section_table(props, rules, defaults, required) if props else ["(no keywords)"]
    return out + [""]


#: The component specs of a config: the key, the base class its "type" is looked up under, and (for
#: network_spec and preprocessing_spec) the class whose list of specs the key may also be.
def _component_kinds():
    from rlgraph.components import Layer, Memory, NeuralNetwork, Optimizer, Preprocessor, PreprocessorStack
    return [("memory_spec", Memory, None, "The replay memory of DQN, Ape-X and R2D2."),
            ("optimizer_spec", Optimizer, None, "The optimizer (default `{\"type\": \"adam\", \"learning_rate\": "
                                                "1e-3}`)."),
            ("network_spec", NeuralNetwork, Layer, "The policy's network: a network spec, or a list of layer specs "
                                                   "(the common form). `value_network_spec` takes the same."),
            ("preprocessing_spec", PreprocessorStack, Preprocessor, "Preprocessors applied to states inside the "
                                                                    "graph: a stack spec or a list of preprocessor "
                                                                    "specs.")]


def rlgraph_agents():
    """rlgraph's agent classes (not those of tests or user code imported into this process), by short name."""
    from rlgraph.agents import Agent
    return sorted((k for k in cs._classes(Agent, include_base=False) if k.__module__.startswith("rlgraph.")
                   and not k.__module__.startswith("rlgraph.tests")), key=lambda k: min(_names(k), key=len).lower())


def render():
    """The page's Markdown."""
    from rlgraph.engines.execution_spec import ExecutionSpec
    from rlgraph.engines.runner import DEFAULT_TRAIN_SPEC, TRAIN_SPEC_SCHEMA
    from rlgraph.engines.execution_spec import SCHEMA as EXECUTION_SCHEMA
    import dataclasses

    schema = cs.config_schema()
    kinds = _component_kinds()
    listed = {k for k, *_ in kinds} | {"value_network_spec"}
    if set(schema["$defs"]) != listed:
        raise SystemExit(f"gen_config_reference: the schema's component specs {sorted(schema['$defs'])} differ from "
                         f"those this generator documents {sorted(listed)}; update _component_kinds().")
    components = {key: {"$ref": f"#/$defs/{'network_spec' if key == 'value_network_spec' else key}"}
                  for key in schema["$defs"]}
    top = schema["properties"]
    lines = [
        "# Config reference",
        "",
        "<!-- Generated by docs/gen_config_reference.py from the rule tables; do not edit by hand. -->",
        "",
        "A training config (`configs/*.json`, `rlgraph train CONFIG`) is one JSON object: the agent's `\"type\"` "
        "and constructor keywords, plus the run's `environment_spec`, `train_spec` and `execution_spec`. This page "
        "is generated (`python docs/gen_config_reference.py`) from the same rule tables that check configs when "
        "they are loaded and that `rlgraph schema` exports as a JSON Schema, so it lists exactly what is accepted. "
        "Any key can be changed on the command line with `--set KEY.PATH=VALUE` ([command line](command_line.md)).",
        "",
        "Type names (`\"type\"`) are looked up case- and separator-insensitively (`prioritized-replay`, "
        "`PrioritizedReplay` and `prioritized_replay` are the same); a dotted `\"module.Class\"` names a class "
        "of an imported or registered package.",
        "",
        "## Top level {#top-level}",
        "",
    ]
    required = schema.get("required", [])
    agents = rlgraph_agents()
    rows = [("type", "one of " + ", ".join(f"`\"{min(_names(k), key=len).lower()}\"`" for k in agents)
             + " (or another of their names below)", "required", top["type"]["description"])]
    for key in ("description", "environment_spec", "train_spec", "execution_spec"):
        rows.append((key, f"[{key}](#{key})" if key.endswith("_spec") else describe_json(top[key]),
                     "required" if key in required else "", top[key].get("description", "")))
    rows.append(("(agent keys)", "see [Agents](#agents)", "", "The agent's constructor keywords, by `\"type\"`."))
    lines += _table(rows) + [""]

    # Agents.
    lines += ["## Agents {#agents}", "",
              "The keys of each agent type. `state_space` and `action_space` come from the environment. "
              "Unknown keys are refused with a \"did you mean\".", ""]
    for klass in agents:
        names = _names(klass)
        short = min(names, key=len).lower()
        lines += [f"### {short}: {klass.__name__} {{#agent-{short}}}", ""]
        doc = inspect.getdoc(klass)
        spell = ", ".join(f"`\"{n}\"`" for n in names)
        lines += [(_esc(doc.split("\n\n")[0]) + " " if doc else "") + f"`\"type\"`: {spell}.", ""]
        props = cs.agent_properties(klass, components)
        rules = cs._rules_of(klass)
        defaults = cs._defaults_of(klass)
        loss = props.get("loss_spec")
        lines += _section_table(props, rules, defaults)
        lines.append("")
        loss_class = getattr(getattr(klass, "algorithm_class", None), "loss_class", None)
        loss = next((p for p in [loss] + list((loss or {}).get("anyOf", ())) if "properties" in (p or {})), None)
        if loss is not None and loss_class is not None:
            lines += [f"`loss_spec` of {short} (keywords of `{loss_class.__name__}`; the algorithm sets "
                      + ", ".join(f"`{k}`" for k in getattr(klass.algorithm_class, "loss_keys_set", ())) + "):", ""]
            lines += _section_table(loss["properties"], cs._rules_of(loss_class), cs._defaults_of(loss_class))
            lines.append("")

    # Run sections.
    env = top["environment_spec"]
    lines += ["## environment_spec {#environment_spec}", "", _esc(env["description"]), ""]
    from rlgraph.environments import VectorEnv
    lines += _section_table(env["properties"], {}, cs._defaults_of(VectorEnv)) + [""]

    train = top["train_spec"]
    lines += ["## train_spec {#train_spec}", "", _esc(train["description"]) + " Keys other than these are refused.",
              ""]
    lines += _section_table(train["properties"], TRAIN_SPEC_SCHEMA, DEFAULT_TRAIN_SPEC) + [""]

    execution = top["execution_spec"]
    defaults = {f.name: f.default if f.default is not dataclasses.MISSING else f.default_factory()
                for f in dataclasses.fields(ExecutionSpec)}
    lines += ["## execution_spec {#execution_spec}", "",
              _esc(execution["description"]) + " Every key has a default, so every config runs on every engine "
              "that suits its algorithm ([engines](engines/index.md)). Keys other than these are refused.", ""]
    lines += _section_table(execution["properties"], EXECUTION_SCHEMA, defaults) + [""]

    # Component specs.
    lines += ["## Component specs {#component-specs}", "",
              "A nested `*_spec` is an object whose `\"type\"` names a registered class, with that class's "
              "keywords, or just the type name (`\"optimizer_spec\": \"adam\"`).", ""]
    seen = set()

    def blocks(classes):
        out, again = [], [k for k in classes if k in seen]
        if again:
            out += ["Also: " + ", ".join(f"[{k.__name__}](#{k.__name__.lower()})" for k in again) + ".", ""]
        for klass in classes:
            if klass not in seen:
                seen.add(klass)
                out += _component_block(klass)
        return out

    for key, base, item_base, text in kinds:
        lines += [f"### {key} {{#{key}}}", "", text, ""]
        lines += blocks(_of(base))
        if item_base is not None:
            lines += [f"A list item of `{key}` is a {item_base.__name__} spec:", ""]
            lines += blocks(_of(item_base))
    while lines and lines[-1] == "":
        lines.pop()
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed page is stale")
    parser.add_argument("--output", default=OUTPUT)
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        with open(args.output, encoding="utf-8") as f:
            if f.read() != text:
                print(f"{args.output} is stale: run python docs/gen_config_reference.py", file=sys.stderr)
                return 1
        return 0
    with open(args.output, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
