"""``--set KEY.PATH=VALUE`` overrides of a training config (``rlgraph train``, ``rlgraph evaluate``).

An override names a dotted path into the config's nested objects, with integer indices into lists
(``network_spec.0.units=128``), and a JSON value (``3e-4``, ``true``, ``null``, ``[64, 64]``,
``{"type": "adam"}``); a value that is not JSON is taken as a plain string
(``environment_spec.env_spec=CartPole-v1``). Missing objects on the way are created. Only the path is checked
here (a bad index, a scalar where an object is needed); the overridden config then goes through the same
checks as a config file (``runner.load_config``, ``Agent.from_spec``), so an unknown key gets the same
"did you mean" error.

No backend imports here (``rlgraph.utils`` is backend-free).
"""
import copy
import json

from rlgraph.utils.errors import RLGraphSpecError

EXAMPLE = "optimizer_spec.learning_rate=3e-4"


def parse_override(text):
    """``(path, value)`` of one ``KEY.PATH=VALUE`` override: the path's keys as a list of strings and the value
    parsed as JSON (a plain string where it is not JSON).

    Raises:
        RLGraphSpecError: Without ``=``, or with an empty key in the path.
    """
    if not isinstance(text, str) or "=" not in text:
        raise RLGraphSpecError(f"--set {text!r}: expected KEY.PATH=VALUE (e.g. {EXAMPLE}).")
    key, _, raw = text.partition("=")
    path = key.strip().split(".")
    if not all(path):
        raise RLGraphSpecError(f"--set {text}: '{key}' has an empty key; write dotted keys such as {EXAMPLE}.")
    try:
        value = json.loads(raw)
    except ValueError:
        value = raw
    return path, value


def apply_overrides(config, overrides):
    """A copy of ``config`` with each ``KEY.PATH=VALUE`` of ``overrides`` applied, in order.

    Args:
        config: The config (a dict); not changed.
        overrides: ``KEY.PATH=VALUE`` strings (None or empty: no change).

    Returns:
        The overridden config (a deep copy).

    Raises:
        RLGraphSpecError: One line naming the override and the path: not ``KEY.PATH=VALUE``, a list index that is
            not an int or lies past the list's end, a path through a value that is neither object nor list.
    """
    config = copy.deepcopy(config)
    for text in overrides or ():
        path, value = parse_override(text)
        _set(config, path, value, text)
    return config


def _set(config, path, value, text):
    node = config
    for depth, key in enumerate(path):
        where = ".".join(path[:depth]) or "the config"
        last = depth == len(path) - 1
        if isinstance(node, list):
            index = _index(node, key, where, text)
            if last:
                node[index] = value
            else:
                node[index] = _container(node[index], path, depth, text)
                node = node[index]
        elif isinstance(node, dict):
            if last:
                node[key] = value
            else:
                node[key] = _container(node.get(key), path, depth, text)
                node = node[key]
        else:
            raise RLGraphSpecError(f"--set {text}: {where} is {_describe(node)}, not a JSON object or list, so it "
                                   f"has no key '{key}'.")


def _index(node, key, where, text):
    try:
        index = int(key)
    except ValueError:
        index = None
    if index is None or str(index) != key.strip() or index < 0:
        raise RLGraphSpecError(f"--set {text}: {where} is a list; '{key}' is not an index (a list index is an int "
                               f"from 0 to {len(node) - 1}).")
    if index >= len(node):
        span = f"indices 0..{len(node) - 1}" if node else "no indices"
        raise RLGraphSpecError(f"--set {text}: index {index} is past the end of {where}, which has {len(node)} "
                               f"item{'s' if len(node) != 1 else ''} ({span}).")
    return index


def _container(value, path, depth, text):
    """The object or list the path goes on through: ``value`` itself, a new object where the key is missing
    (or null), ``{"type": value}`` for a component given by its type name (``"optimizer_spec": "adam"``)."""
    if value is None:
        return {}
    if isinstance(value, str) and path[depth].endswith("_spec"):
        return {"type": value}
    return value


def _describe(value):
    if isinstance(value, bool):
        return f"{json.dumps(value)} (a bool)"
    if isinstance(value, (int, float)):
        return f"{value!r} (a number)"
    if isinstance(value, str):
        return f"{value!r} (a string)"
    return repr(value)[:60]
