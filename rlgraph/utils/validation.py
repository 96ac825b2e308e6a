"""Declarative checks of spec and constructor values: one rule per key, one error style everywhere.

A rule says what a value must be (``Int(min=1)``, ``Number(min=0)``, ``Bool()``, ``OneOf("mean", "sum")``,
``Optional(rule)``) and checks it with :func:`check`, which returns the (normalized) value or raises an
``RLGraphSpecError`` whose message is one line: ``<owner>.<key>: expected <what the rule wants>, got <value>.``
The error also carries ``key`` (the argument or spec key) and ``reason`` (the text after the colon), so that
``Specifiable.from_spec`` can name the full config path (``agent.optimizer_spec.learning_rate``) instead of the
class. :func:`check_spec` checks a plain dict section of a config against a schema (``{key: rule}``), with
"did you mean" for unknown keys; :func:`json_schema` exports such a schema for editors. Further rules: ``Str``,
``Schedule``, ``Mapping``, ``ListOf``, ``AnyOf``, ``Ints`` (an int or a list of them, e.g. a kernel size),
``Shape``, ``Permutation``, ``HostPort``.

No backend imports here (``rlgraph.utils`` is backend-free).
"""
import difflib
import math
import numbers

from rlgraph.utils.errors import RLGraphSpecError


def spec_error(owner, key, reason):
    """An ``RLGraphSpecError`` "<owner>.<key>: <reason>" that ``Specifiable.from_spec`` can re-path."""
    where = f"{owner}.{key}" if owner else key
    return RLGraphSpecError(f"{where}: {reason}", key=key, reason=reason)


def _got(value):
    if isinstance(value, str):
        return f"{value!r}" + (" (a string: write numbers without quotes)" if _is_number_string(value) else
                               " (a string)")
    if isinstance(value, bool):
        return f"{value!r} (a bool)"
    if isinstance(value, float) and value.is_integer():
        return f"{value!r} (a float)"
    return f"{value!r}"[:120]


def _is_number_string(value):
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True


class Rule:
    """What a value must be. Subclasses implement ``describe()``, ``ok(value)`` and ``json()``."""

    def describe(self):
        raise NotImplementedError

    def ok(self, value):
        """``(True, normalized value)`` or ``(False, None)``."""
        raise NotImplementedError

    def json(self):
        """The rule as a JSON Schema fragment."""
        return {}

    def check(self, value, owner, key):
        good, out = self.ok(value)
        if not good:
            raise spec_error(owner, key, f"expected {self.describe()}, got {_got(value)}.")
        return out


def _range_text(kind, lo, hi, lo_open=False, hi_open=False):
    if lo is not None and hi is not None:
        return f"{kind} in {'(' if lo_open else '['}{lo}, {hi}{')' if hi_open else ']'}"
    if lo is not None:
        return f"{kind} {'>' if lo_open else '>='} {lo}"
    if hi is not None:
        return f"{kind} {'<' if hi_open else '<='} {hi}"
    return kind


class Int(Rule):
    """An int (not a bool, not a float such as ``1e9``) in ``[min, max]``."""

    def __init__(self, min=None, max=None):
        self.min, self.max = min, max

    def describe(self):
        if self.min == 1 and self.max is None:
            return "a positive int"
        return _range_text("an int", self.min, self.max)

    def ok(self, value):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            return False, None
        value = int(value)
        if (self.min is not None and value < self.min) or (self.max is not None and value > self.max):
            return False, None
        return True, value

    def json(self):
        out = {"type": "integer"}
        if self.min is not None:
            out["minimum"] = self.min
        if self.max is not None:
            out["maximum"] = self.max
        return out


class Number(Rule):
    """A finite real number (int or float, not a bool or a string) in ``[min, max]`` (``gt``: > instead of >=;
    ``lt``: < instead of <=; ``nonzero``: not 0; ``finite=False``: also +-inf, never NaN)."""

    def __init__(self, min=None, max=None, gt=None, lt=None, nonzero=False, finite=True):
        self.min, self.max, self.gt, self.lt, self.nonzero, self.finite = min, max, gt, lt, nonzero, finite

    def describe(self):
        lo, lo_open = (self.gt, True) if self.gt is not None else (self.min, False)
        hi, hi_open = (self.lt, True) if self.lt is not None else (self.max, False)
        kind = ("a non-zero " if self.nonzero else "a ") + ("finite number" if self.finite else "number")
        return _range_text(kind, lo, hi, lo_open=lo_open, hi_open=hi_open)

    def ok(self, value):
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            return False, None
        value = float(value)
        if math.isnan(value) or (self.finite and math.isinf(value)) or (self.nonzero and value == 0.0):
            return False, None
        if (self.min is not None and value < self.min) or (self.max is not None and value > self.max) or \
                (self.gt is not None and value <= self.gt) or (self.lt is not None and value >= self.lt):
            return False, None
        return True, value

    def json(self):
        out = {"type": "number"}
        if self.nonzero:
            out["not"] = {"const": 0}
        if self.min is not None:
            out["minimum"] = self.min
        if self.gt is not None:
            out["exclusiveMinimum"] = self.gt
        if self.max is not None:
            out["maximum"] = self.max
        if self.lt is not None:
            out["exclusiveMaximum"] = self.lt
        return out


class Bool(Rule):
    """``True`` or ``False`` (JSON ``true``/``false``); strings such as ``"no"`` and numbers are refused."""

    def describe(self):
        return "a bool (true or false)"

    def ok(self, value):
        if isinstance(value, bool) or type(value).__name__ == "bool_":
            return True, bool(value)
        return False, None

    def json(self):
        return {"type": "boolean"}


class Str(Rule):
    """A non-empty string (without any of the characters ``exclude``); ``what`` names it in messages."""

    def __init__(self, exclude="", what=None):
        self.exclude, self.what = exclude, what

    def describe(self):
        if self.what:
            return self.what
        without = " and ".join(repr(c) for c in self.exclude)
        return "a non-empty string" + (f" without {without}" if without else "")

    def ok(self, value):
        good = isinstance(value, str) and value and not any(c in value for c in self.exclude)
        return (True, value) if good else (False, None)

    def json(self):
        out = {"type": "string", "minLength": 1}
        if self.exclude:
            out["pattern"] = "^[^" + "".join(_regex_char(c, in_class=True) for c in self.exclude) + "]+$"
        return out


def _regex_char(c, in_class=False):
    """``c`` escaped for a regular expression (in the syntax Python's ``re`` and ECMA-262 share)."""
    return "\\" + c if c in "\\^$.|?*+()[]{}/" or (in_class and c == "-") else c


def any_case(text):
    """A regular expression (Python and ECMA-262) matching ``text`` in any letter case."""
    return "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else _regex_char(c) for c in text)


class OneOf(Rule):
    """One of the given values (compared with ``==``; ``True`` is not ``1``). With ``ignore_case``, strings match
    in any letter case and are normalized to the listed spelling."""

    def __init__(self, *values, ignore_case=False):
        self.values, self.ignore_case = values, ignore_case

    def describe(self):
        return "one of " + ", ".join(repr(v) for v in self.values) + (" (any case)" if self.ignore_case else "")

    def ok(self, value):
        for v in self.values:
            if type(v) is type(value) and v == value or (v is None and value is None):
                return True, value
            if self.ignore_case and isinstance(v, str) and isinstance(value, str) and v.lower() == value.lower():
                return True, v
        return False, None

    def check(self, value, owner, key):
        good, out = self.ok(value)
        if not good:
            close = difflib.get_close_matches(str(value), [str(v) for v in self.values], n=1) \
                if isinstance(value, str) else []
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise spec_error(owner, key, f"expected {self.describe()}, got {_got(value)}.{hint}")
        return out

    def json(self):
        if self.ignore_case:
            strings = [v for v in self.values if isinstance(v, str)]
            others = [v for v in self.values if not isinstance(v, str)]
            pattern = {"type": "string", "pattern": "^(?:" + "|".join(any_case(v) for v in strings) + ")$"}
            return {"anyOf": [pattern, {"enum": others}]} if others else pattern
        return {"enum": list(self.values)}


class Optional(Rule):
    """``None`` or what ``rule`` accepts."""

    def __init__(self, rule):
        self.rule = rule

    def describe(self):
        return f"{self.rule.describe()} or null"

    def ok(self, value):
        return (True, None) if value is None else self.rule.ok(value)

    def json(self):
        return {"anyOf": [self.rule.json(), {"type": "null"}]}


class Schedule(Rule):
    """A number, or a schedule spec (``["linear", 1e-3, 1e-5]``, ``{"type": "linear", "from_": ...}``) whose
    start and end values are numbers in ``[min, max]`` (see ``TimeDependentParameter``)."""

    VALUE_KEYS = ("from_", "to_", "value")

    def __init__(self, min=None, max=None):
        self.number = Number(min=min, max=max)

    def describe(self):
        return f"{self.number.describe()} or a schedule such as [\"linear\", from, to]"

    def check(self, value, owner, key):
        # A half-written schedule (["linear", 1.0], ["linear"], {"type": "linear", "from_": 1.0}) would stay
        # constant at its start value: refused with the form it needs.
        missing = half_written_schedule(value)
        if missing:
            raise spec_error(owner, key, f"the schedule {_got(value)} lacks its {missing} and would stay constant: "
                                         f"write it whole, e.g. [\"{_schedule_type(value)}\", 1.0, 0.05] (from, to), "
                                         f"or give a number for a constant.")
        return super().check(value, owner, key)

    def ok(self, value):
        if half_written_schedule(value):
            return False, None
        if isinstance(value, (list, tuple)):
            if not value or not isinstance(value[0], str):
                return False, None
            values = value[1:3]
        elif isinstance(value, dict):
            values = [value[k] for k in self.VALUE_KEYS if k in value]
        else:
            return self.number.ok(value)
        return (True, value) if all(self.number.ok(v)[0] for v in values) else (False, None)

    def json(self):
        return {"anyOf": [self.number.json(), {"type": "array"}, {"type": "object"}]}


#: Schedule types given by one value (a constant); every other schedule type needs its start and end values.
CONSTANT_SCHEDULES = ("constant", "constantparameter")


#: The keys of dict schedules (``TimeDependentParameter`` and its subclasses).
_SCHEDULE_KEYS = {"type", "from_", "to_", "value", "power", "decay_rate", "num_decays"}


def _schedule_type(value):
    name = value[0] if isinstance(value, (list, tuple)) else value.get("type")
    return name if isinstance(name, str) else "linear"


def half_written_schedule(value):
    """What a list or dict schedule spec lacks of its start and end values (e.g. "end value (to)"), or None
    if it is whole (or no schedule spec at all). Only constants may give one value."""
    if isinstance(value, (list, tuple)):
        if not value or not isinstance(value[0], str):
            return None
        kind, given = value[0], len(value) - 1
        have = {"start value (from)": given >= 1, "end value (to)": given >= 2}
    elif isinstance(value, dict) and isinstance(value.get("type"), str) and set(value) <= _SCHEDULE_KEYS:
        # (A dict with a key of no schedule, e.g. a typo "tox", is left to from_spec's "did you mean".)
        kind = value["type"]
        have = {"start value (from_)": "from_" in value, "end value (to_)": "to_" in value}
    else:
        return None
    if kind.lower().replace("-", "").replace("_", "") in CONSTANT_SCHEDULES:
        return None
    lacking = [k for k, v in have.items() if not v]
    return " and ".join(lacking) if lacking else None


class Mapping(Rule):
    """A dict (JSON object). With ``schema`` (``{key: rule}``) its keys must be among the schema's and their
    values pass their rules (the dict is returned as given); without it the keys are checked separately
    (see :func:`check_spec`)."""

    def __init__(self, schema=None):
        self.schema = schema

    def describe(self):
        if self.schema:
            return f"a dict with keys among {list(self.schema)}"
        return "a dict (JSON object)"

    def ok(self, value):
        if not isinstance(value, dict):
            return False, None
        if self.schema is not None and not all(k in self.schema and self.schema[k].ok(v)[0]
                                               for k, v in value.items()):
            return False, None
        return True, value

    def json(self):
        if self.schema is None:
            return {"type": "object"}
        return {"type": "object", "properties": {k: r.json() for k, r in self.schema.items()},
                "additionalProperties": False}


class ListOf(Rule):
    """A list (JSON array) of at least ``min_items`` items, each accepted by ``rule``; ``what`` names it in
    messages (default: "a list of <rule>")."""

    def __init__(self, rule, min_items=0, what=None):
        self.rule, self.min_items, self.what = rule, min_items, what

    def describe(self):
        if self.what:
            return self.what
        return f"a {'non-empty ' if self.min_items else ''}list of {self.rule.describe()}s"

    def ok(self, value):
        if not isinstance(value, list) or len(value) < self.min_items:
            return False, None
        out = []
        for v in value:
            good, v = self.rule.ok(v)
            if not good:
                return False, None
            out.append(v)
        return True, out

    def json(self):
        out = {"type": "array", "items": self.rule.json()}
        if self.min_items:
            out["minItems"] = self.min_items
        return out


class AnyOf(Rule):
    """What any of ``rules`` accepts (the first that does normalizes it); ``what`` names it in messages
    (default: the rules' descriptions joined by "or")."""

    def __init__(self, *rules, what=None):
        self.rules, self.what = rules, what

    def describe(self):
        return self.what or " or ".join(r.describe() for r in self.rules)

    def ok(self, value):
        for rule in self.rules:
            good, out = rule.ok(value)
            if good:
                return True, out
        return False, None

    def json(self):
        return {"anyOf": [r.json() for r in self.rules]}


def _int_ok(value):
    return not isinstance(value, bool) and isinstance(value, numbers.Integral)


class Ints(Rule):
    """An int, or a list (or tuple) of ``length`` ints (any number >= 1 if None), each in ``[min, max]``; a
    list is normalized to a tuple of ints (e.g. a kernel size ``3`` or ``[3, 5]``)."""

    def __init__(self, min=None, max=None, length=None):
        self.int, self.length = Int(min=min, max=max), length

    def describe(self):
        one = self.int.describe()
        count = f"{self.length} of them" if self.length else "them"
        return f"{one} or a list of {count}"

    def ok(self, value):
        if isinstance(value, (list, tuple)):
            if not value or (self.length is not None and len(value) != self.length):
                return False, None
            out = [self.int.ok(v) for v in value]
            return (True, tuple(v for _, v in out)) if all(good for good, _ in out) else (False, None)
        return self.int.ok(value)

    def json(self):
        array = {"type": "array", "items": self.int.json(), "minItems": self.length or 1}
        if self.length:
            array["maxItems"] = self.length
        return {"anyOf": [self.int.json(), array]}


class Shape(Rule):
    """A shape: an int or a list (or tuple) of ints, each positive or -1 (at most one -1: "the rest");
    normalized to a tuple."""

    def describe(self):
        return "a shape: a positive int or a list of positive ints with at most one -1"

    def ok(self, value):
        dims = (value,) if not isinstance(value, (list, tuple)) else tuple(value)
        if not all(_int_ok(d) and (d >= 1 or d == -1) for d in dims) or sum(d == -1 for d in dims) > 1:
            return False, None
        return True, tuple(int(d) for d in dims)

    def json(self):
        dim = {"type": "integer", "anyOf": [{"minimum": 1}, {"const": -1}]}
        return {"anyOf": [dim, {"type": "array", "items": dim, "contains": {"const": -1}, "minContains": 0,
                                "maxContains": 1}]}


class Permutation(Rule):
    """A permutation of ``0 .. n-1`` as a list (or tuple) of ints, e.g. ``[2, 0, 1]``; normalized to a list."""

    def describe(self):
        return "a permutation of 0..n-1 (a list of ints such as [2, 0, 1])"

    def ok(self, value):
        if not isinstance(value, (list, tuple)) or not all(_int_ok(a) for a in value) or \
                sorted(value) != list(range(len(value))):
            return False, None
        return True, [int(a) for a in value]

    def json(self):
        return {"type": "array", "items": {"type": "integer", "minimum": 0}, "uniqueItems": True}


class HostPort(Rule):
    """A ``"HOST:PORT"`` string (port in [0, 65535]; 0: any free port)."""

    def describe(self):
        return "a 'HOST:PORT' string (port 0: any free port)"

    def ok(self, value):
        if not isinstance(value, str):
            return False, None
        host, _, port = value.rpartition(":")
        return (True, value) if host and port.isdigit() and int(port) < 65536 else (False, None)

    def json(self):
        return {"type": "string", "pattern": "^.+:[0-9]{1,5}$"}


def check(owner, key, value, rule):
    """``value`` checked by ``rule`` (normalized: an int for ``Int``, a float for ``Number``, ...).

    Raises:
        RLGraphSpecError: "<owner>.<key>: expected <...>, got <value>." with ``key`` and ``reason`` set.
    """
    return rule.check(value, owner, key)


def check_args(owner, rules, values):
    """Checks several constructor arguments at once: ``{name: check(owner, name, values[name], rule)}``."""
    return {name: rule.check(values[name], owner, name) for name, rule in rules.items()}


def check_spec(spec, schema, path, defaults=None, required=()):
    """A dict section of a config checked against ``schema`` (``{key: rule}``).

    Args:
        spec: The section (None counts as ``{}`` only if nothing is ``required``).
        schema: ``{key: Rule}``; keys not in it are refused with "did you mean".
        path: The section's config path for messages (``"environment_spec"``).
        defaults: Values of keys the section leaves out.
        required: Keys the section must give.

    Returns:
        A new dict: ``defaults`` updated by the checked (normalized) values of ``spec``.
    """
    if spec is None and not required:
        spec = {}
    if not isinstance(spec, dict):
        example = ", ".join(f'"{k}": ...' for k in required) if required else ""
        raise RLGraphSpecError(f"{path}: expected a dict (JSON object){' such as {' + example + '}' if example else ''}"
                               f", got {_got(spec)}.", key=None, reason=None)
    unknown = [k for k in spec if k not in schema]
    if unknown:
        k = unknown[0]
        close = difflib.get_close_matches(str(k), list(schema), n=3)
        hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        raise spec_error(path, k, f"unknown key {k!r}.{hint} Accepted keys: {', '.join(schema)}.")
    missing = [k for k in required if k not in spec]
    if missing:
        raise spec_error(path, missing[0], f"missing (required: {', '.join(required)}).")
    out = dict(defaults or {})
    for k, v in spec.items():
        out[k] = schema[k].check(v, path, k)
    return out


def json_schema(schema, required=(), descriptions=None, defaults=None):
    """A JSON Schema (draft 2020-12) object for a ``{key: rule}`` schema, for editors.

    ``descriptions`` and ``defaults`` (``{key: ...}``) become each property's "description" and "default".
    """
    properties = {}
    for k, r in schema.items():
        properties[k] = prop = r.json()
        if descriptions and descriptions.get(k):
            prop["description"] = descriptions[k]
        if defaults and k in defaults and _is_json(defaults[k]):
            prop["default"] = defaults[k]
    return {"type": "object", "properties": properties, "required": list(required), "additionalProperties": False}


def _is_json(value):
    if value is None or isinstance(value, (bool, int, float, str)):
        return not isinstance(value, float) or math.isfinite(value)
    if isinstance(value, (list, tuple)):
        return all(_is_json(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_json(v) for k, v in value.items())
    return False


def doc_args(*objects, sections=("Args", "Arguments", "Attributes")):
    """``{name: first sentence(s)}`` of the "Args:"/"Attributes:" sections of the objects' docstrings (Google
    style), the first object's entry winning; for JSON Schema descriptions."""
    out = {}
    for obj in objects:
        lines = (getattr(obj, "__doc__", None) or "").expandtabs().splitlines()
        i = 0
        while i < len(lines):
            if lines[i].strip().rstrip(":") in sections and lines[i].strip().endswith(":"):
                base = len(lines[i]) - len(lines[i].lstrip())
                i += 1
                indent, name, text = None, None, []
                while i < len(lines):
                    line = lines[i]
                    stripped = line.strip()
                    level = len(line) - len(line.lstrip())
                    if stripped and level <= base:
                        break
                    if stripped and (indent is None or level == indent) and ":" in stripped:
                        if name:
                            out.setdefault(name, " ".join(text))
                        indent = level
                        head, _, rest = stripped.partition(":")
                        # "a, b: text" documents several names at once.
                        names = [n.strip().strip("*") for n in head.split(",")]
                        name, text = names[0], [rest.strip()]
                        for other in names[1:]:
                            out.setdefault(other, rest.strip())
                    elif stripped and name:
                        text.append(stripped)
                    i += 1
                if name:
                    out.setdefault(name, " ".join(text))
                continue
            i += 1
    return {k: v for k, v in out.items() if k.isidentifier() and v}
