"""The JSON Schema (draft 2020-12) of a training config, for editors and CI checks (``rlgraph schema``).

Built from what the code declares: each agent's constructor keywords (``accepted_keys``) with the rules of
its ``ARG_RULES``, the ``VectorEnv`` keywords of ``environment_spec``, and the rule tables of ``train_spec``
(``runner.TRAIN_SPEC_SCHEMA``) and ``execution_spec`` (``execution_spec.SCHEMA``). Nested component specs
(``memory_spec``, ``optimizer_spec``, ``network_spec``, ...) are objects whose ``"type"`` lists the registered
classes; for each concrete class a branch "if the type names this class, then its keywords" gives the class's
keywords with the rules of its ``ARG_RULES`` (merged over the MRO), the keywords it requires, and refuses other
keys where the constructor takes no ``**kwargs``. An IMPALA/APPO ``loss_spec`` gets the keywords of the agent's
loss function the same way.
"""
import inspect
import re

from rlgraph.utils.specifiable import _all_subclasses, accepted_keys, normalize_type_name
from rlgraph.utils.validation import Int, OneOf, doc_args

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"

#: Agent keywords a training config does not give (the environment tells them).
_GIVEN_BY_ENV = ("state_space", "action_space")


def _classes(base, include_base):
    return [sub for sub in _all_subclasses(base)
            if (include_base or sub is not base) and not inspect.isabstract(sub)]


def _kebab(name):
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "-", name).lower()


def type_names(base, include_base=True):
    """The spellings editors offer for a ``"type"`` naming a concrete registered subclass of ``base``: class
    names, their kebab-case forms (``prioritized-replay``) and aliases."""
    names = set()
    for sub in _classes(base, include_base):
        names.update(_own_names(sub) + (_kebab(sub.__name__),))
    return sorted(names)


def _names_regex(names):
    """A regular expression matching every spelling of ``names`` that the lookup (case- and
    separator-insensitive, ``normalize_type_name``) accepts."""
    seps = "[-_ ./]*"
    alternatives = sorted({seps.join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else re.escape(c)
                                     for c in normalize_type_name(n)) for n in names})
    return f"^{seps}(?:{'|'.join(alternatives)}){seps}$"


def _own_names(klass):
    return (klass.__name__,) + tuple(klass.__dict__.get("__aliases__", ()))


def type_pattern(base, include_base=True):
    """A regular expression matching every spelling of a type name of a concrete subclass of ``base``."""
    return _names_regex([n for sub in _classes(base, include_base) for n in _own_names(sub)])


def _type_property(base):
    # A dotted "module.Class" path is also a valid type (an imported or registered class).
    return {"type": "string",
            "anyOf": [{"enum": type_names(base)}, {"pattern": type_pattern(base)}, {"pattern": "\\."}],
            "description": f"A {base.__name__} type (name or alias, case- and separator-insensitive)."}


def component_spec(base, allow_list_of=None):
    """A spec of a ``base`` component: an object with a ``"type"`` among its subclasses, or a type name
    (or, with ``allow_list_of``, a list of specs of that class, e.g. a network's layers).

    The object form holds one branch per concrete class with rules or a closed set of keywords: if its
    ``"type"`` names that class (as ``Specifiable.lookup_class`` reads it), then its keys are the class's
    keywords (``component_properties``), those without a default are required, and, where the constructor
    takes no ``**kwargs``, no other key is allowed.
    """
    typed = _type_property(base)
    obj = {"type": "object", "properties": {"type": typed}}
    branches = _type_branches(base)
    if branches:
        obj["allOf"] = branches
    options = [obj, typed]
    if allow_list_of is not None:
        options.append({"type": "array", "items": component_spec(allow_list_of)})
    return {"anyOf": options}


def _type_branches(base):
    names_of = {}
    for name, klass in base._type_table().items():
        names_of.setdefault(klass, []).append(name)
    branches = []
    for klass in sorted(_classes(base, include_base=True), key=lambda c: (c.__name__, c.__module__)):
        if klass not in names_of:
            continue
        props, required, closed = component_properties(klass)
        if not _rules_of(klass) and not closed:
            continue
        then = {"properties": dict(props, type={})}
        if required:
            then["required"] = required
        if closed:
            then["additionalProperties"] = False
        branches.append({"if": {"properties": {"type": {"pattern": _names_regex(names_of[klass])}},
                                "required": ["type"]}, "then": then})
    return branches


def _property(rule, default_is_none, doc):
    prop = rule.json() if rule is not None else {}
    if default_is_none and prop and not _allows_null(prop):
        prop = {"anyOf": [prop, {"type": "null"}]}  # None: the default.
    if doc:
        prop["description"] = doc
    return prop


def _allows_null(prop):
    types = prop.get("type", ())
    return "null" in (types if isinstance(types, list) else (types,)) or \
        any(_allows_null(p) for p in prop.get("anyOf", ())) or None in prop.get("enum", ())


def _docs_of(klass):
    return doc_args(*[c for k in klass.__mro__ if k is not object for c in (k, k.__dict__.get("__init__"))
                      if c is not None])


def component_properties(klass, exclude=()):
    """The constructor keywords of component class ``klass`` for a JSON Schema.

    Args:
        klass: The class.
        exclude: Keywords to leave out (set by the caller, not by the spec).

    Returns:
        ``(properties, required, closed)``: ``{key: JSON Schema}`` (the rule's schema for keys with a rule in
        ``ARG_RULES``, merged over the MRO; any value for the others; with the docstring's description), the
        keys without a default, and whether other keys are refused (no ``**kwargs``).
    """
    keys, open_kwargs = accepted_keys(klass)
    rules = _rules_of(klass)
    defaults = _defaults_of(klass)
    docs = _docs_of(klass)
    props = {}
    for key in sorted(keys | (set(rules) if open_kwargs else set())):
        if key in exclude or key == "type":
            continue
        props[key] = _property(rules.get(key), key in defaults and defaults[key] is None, docs.get(key))
    required = sorted(k for k in _required_of(klass) if k in props)
    return props, required, not open_kwargs


def _component_specs():
    from rlgraph.components import Layer, Memory, NeuralNetwork, Optimizer, Preprocessor, PreprocessorStack
    return dict(memory_spec=component_spec(Memory), optimizer_spec=component_spec(Optimizer),
                network_spec=component_spec(NeuralNetwork, allow_list_of=Layer),
                value_network_spec=component_spec(NeuralNetwork, allow_list_of=Layer),
                preprocessing_spec=component_spec(PreprocessorStack, allow_list_of=Preprocessor))


def _rules_of(klass):
    rules = {}
    for k in reversed(klass.__mro__):
        rules.update(k.__dict__.get("ARG_RULES", {}))
    return rules


def _required_of(klass):
    try:
        params = inspect.signature(klass.__init__).parameters
    except (TypeError, ValueError):
        return []
    return [n for n, p in list(params.items())[1:] if p.default is p.empty
            and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def _defaults_of(klass):
    defaults = {}
    for k in reversed(klass.__mro__):
        init = k.__dict__.get("__init__")
        if init is None or k is object:
            continue
        try:
            params = inspect.signature(init).parameters
        except (TypeError, ValueError):
            continue
        defaults.update({n: p.default for n, p in params.items() if p.default is not p.empty})
    return defaults


def agent_properties(klass, components=None):
    """``{key: JSON Schema}`` of the top-level keys of a config of agent class ``klass``."""
    components = components if components is not None else _component_specs()
    keys, _ = accepted_keys(klass)
    rules = _rules_of(klass)
    defaults = _defaults_of(klass)
    docs = _docs_of(klass)
    loss_class = getattr(getattr(klass, "algorithm_class", None), "loss_class", None)
    props = {}
    for key in sorted(keys):
        if key in _GIVEN_BY_ENV:
            continue
        if key == "loss_spec" and loss_class is not None:
            prop = _loss_spec_schema(klass.algorithm_class, loss_class)
        elif key in rules:
            prop = rules[key].json()
        elif key in components:
            prop = dict(components[key])
        elif key.endswith("_spec"):
            prop = {"type": ["object", "array", "string", "number", "null"]}
        else:
            prop = {}
        if defaults.get(key, 0) is None and prop and "null" not in prop.get("type", ()):
            prop = {"anyOf": [prop, {"type": "null"}]}  # None: the agent's default.
        if docs.get(key):
            prop["description"] = docs[key]
        props[key] = prop
    return props


def _loss_spec_schema(algorithm_class, loss_class):
    """An agent's ``loss_spec``: the keywords of its loss function, less those its algorithm sets."""
    props, _, closed = component_properties(loss_class, exclude=getattr(algorithm_class, "loss_keys_set", ()))
    return {"type": "object", "properties": props, "additionalProperties": not closed}


def environment_spec_schema():
    """The JSON Schema of ``environment_spec`` (the ``VectorEnv`` keywords; other keys go to the environment)."""
    from rlgraph.environments import VectorEnv
    from rlgraph.environments.vector_env import MAX_NUM_ENVS, STEP_DELAY_MS
    docs = doc_args(VectorEnv)
    props = dict(env_spec={"type": ["string", "object"]}, num_envs=Int(min=1, max=MAX_NUM_ENVS).json(),
                 vectorization=OneOf("auto", "native", "sync", "async", "ale").json(),
                 seed={"type": ["integer", "null"]}, step_delay_ms=STEP_DELAY_MS.json(),
                 type={"type": "string", "description": "An environment type (e.g. \"atari\") when env_spec is "
                                                         "not given."})
    for key, prop in props.items():
        if docs.get(key):
            prop.setdefault("description", docs[key])
    return {"type": "object", "properties": props, "additionalProperties": True,
            "description": "The vector of environments: VectorEnv keywords; other keys are keywords of the "
                           "environment (e.g. \"game\" for Atari, \"max_episode_steps\")."}


def config_schema():
    """The JSON Schema (draft 2020-12) of a training config (``configs/*.json``)."""
    from rlgraph.agents import Agent
    from rlgraph.engines.execution_spec import ExecutionSpec
    from rlgraph.engines.runner import train_spec_json_schema
    definitions = _component_specs()
    definitions["value_network_spec"] = {"$ref": "#/$defs/network_spec"}  # The same schema, once.
    components = {key: {"$ref": f"#/$defs/{key}"} for key in definitions}
    branches, all_names = [], set()
    for klass in sorted(_classes(Agent, include_base=False), key=lambda a: a.__name__):
        all_names.update(_own_names(klass))
        branches.append({"if": {"properties": {"type": {"pattern": _names_regex(_own_names(klass))}}, "required": ["type"]},
                         "then": {"properties": agent_properties(klass, components)}})
    return {
        "$schema": SCHEMA_DIALECT,
        "title": "rlgraph training config",
        "description": "An agent spec (\"type\" and the agent's constructor keywords) plus the run's "
                       "environment_spec, train_spec and execution_spec (`rlgraph train CONFIG`).",
        "type": "object",
        "required": ["type", "environment_spec"],
        "properties": {
            "type": {"type": "string",
                     "anyOf": [{"enum": sorted(all_names)}, {"pattern": type_pattern(Agent, include_base=False)}],
                     "description": "The agent (type name or alias, case- and separator-insensitive)."},
            "description": {"type": "string", "description": "Free text about the config."},
            "environment_spec": environment_spec_schema(),
            "train_spec": dict(train_spec_json_schema(), description="The run's budget, evaluation and "
                                                                     "checkpoints."),
            "execution_spec": dict(ExecutionSpec.json_schema(), description="How an engine places actors and "
                                                                            "learners (ray, central)."),
        },
        "allOf": branches,
        "unevaluatedProperties": False,
        "$defs": definitions,
    }
