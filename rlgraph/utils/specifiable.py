"""Building objects from specs: dicts, JSON files, type names or ready objects.

A class that derives from :class:`Specifiable` gets ``from_spec``. Its subclasses register themselves
under their class name and any ``__aliases__``; a spec's ``"type"`` is looked up case- and separator-
insensitively among the subclasses of the class ``from_spec`` was called on (``"dense-layer"``,
``"DenseLayer"`` and ``"dense_layer"`` all name ``DenseLayer``). A dotted ``"type"`` such as
``"mypackage.layers.MyLayer"`` imports a user's class. Keys that the constructor does not accept are
rejected with the accepted keys listed; errors name the path inside the spec (e.g. ``memory_spec.capacity``).
"""
import copy
import difflib
import importlib
import inspect
import json
import os

from rlgraph.utils.errors import RLGraphSpecError


def load_json(file_path, where="spec"):
    """Reads a JSON file; a missing or malformed file raises ``RLGraphSpecError`` naming ``where``."""
    try:
        with open(file_path) as f:
            return json.load(f)
    except FileNotFoundError:
        raise RLGraphSpecError(f"{where}: spec file '{file_path}' does not exist.") from None
    except json.JSONDecodeError as e:
        raise RLGraphSpecError(f"{where}: spec file '{file_path}' is not valid JSON: {e}") from None


def normalize_type_name(name):
    """Lower-cases a type name and drops separators: ``"Dense-Layer"`` -> ``"denselayer"``."""
    return "".join(ch for ch in str(name).lower() if ch not in "-_ ./")


def _all_subclasses(cls):
    seen, stack = [], [cls]
    while stack:
        c = stack.pop()
        if c in seen:
            continue
        seen.append(c)
        stack.extend(c.__subclasses__())
    return seen


def accepted_keys(cls):
    """Returns (set of keyword names the constructor accepts, whether it takes arbitrary ``**kwargs``).

    Follows ``**kwargs`` up the MRO: a subclass that forwards ``**kwargs`` to its base accepts the base's
    keywords too.
    """
    keys = set()
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        try:
            params = inspect.signature(init).parameters
        except (TypeError, ValueError):
            return keys, True
        has_var_kw = False
        for name, p in list(params.items())[1:]:
            if p.kind == p.VAR_KEYWORD:
                has_var_kw = True
            elif p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
                keys.add(name)
        if not has_var_kw:
            return keys, False
        if klass is object:
            break
    return keys, True


class Specifiable:
    """Mixin: ``cls.from_spec(spec, **kwargs)`` builds an instance of ``cls`` or one of its subclasses."""

    # Extra names (besides the class name) under which a class can be looked up.
    __aliases__ = ()

    @classmethod
    def lookup_class(cls, type_name, path="type"):
        """Returns the subclass of ``cls`` named ``type_name`` (case- and separator-insensitive)."""
        if isinstance(type_name, type):
            if not issubclass(type_name, cls):
                raise RLGraphSpecError(f"{path}: class {type_name.__name__} is not a {cls.__name__}.")
            return type_name
        if not isinstance(type_name, str):
            raise RLGraphSpecError(f"{path}: expected a type name (str), got {type_name!r}.")
        if "." in type_name and not type_name.startswith("."):
            module_name, _, class_name = type_name.rpartition(".")
            try:
                klass = getattr(importlib.import_module(module_name), class_name)
            except (ImportError, AttributeError) as e:
                raise RLGraphSpecError(f"{path}: cannot import '{type_name}': {e}") from None
            return cls.lookup_class(klass, path)
        wanted = normalize_type_name(type_name)
        table = {}
        for sub in _all_subclasses(cls):
            for name in (sub.__name__,) + tuple(sub.__dict__.get("__aliases__", ())):
                table.setdefault(normalize_type_name(name), sub)
        if wanted in table:
            return table[wanted]
        close = difflib.get_close_matches(wanted, list(table), n=5, cutoff=0.5)
        names = sorted({table[c].__name__ for c in close})
        hint = f" Did you mean: {', '.join(names)}?" if names else ""
        raise RLGraphSpecError(f"{path}: unknown {cls.__name__} type '{type_name}'.{hint}")

    @classmethod
    def from_spec(cls, spec=None, _path=None, **kwargs):
        """Builds an object from ``spec``.

        Args:
            spec: An instance of ``cls`` (returned as is), a dict with an optional ``"type"`` key and
                constructor keywords, a path to a JSON file holding such a dict, or a type name.
            _path: Where in a larger spec this one sits; used in error messages.
            **kwargs: Keywords that override (or add to) the spec's.

        Returns:
            The constructed object.

        Raises:
            RLGraphSpecError: On an unknown type, an unknown key or a malformed spec.
        """
        path = _path or cls.__name__
        if isinstance(spec, cls):
            if kwargs:
                raise RLGraphSpecError(f"{path}: cannot apply {sorted(kwargs)} to a ready {cls.__name__} object.")
            return spec
        if spec is None:
            spec = {}
        if isinstance(spec, (str, os.PathLike)) and (str(spec).endswith(".json") or os.path.isfile(str(spec))):
            spec = load_json(spec, path)
        if isinstance(spec, (str, type)):
            spec = {"type": spec}
        if not isinstance(spec, dict):
            raise RLGraphSpecError(f"{path}: a spec must be a dict, a JSON file or a type name, got {spec!r}.")
        spec = copy.deepcopy(spec)
        spec.update(kwargs)
        type_name = spec.pop("type", None)
        klass = cls if type_name is None else cls.lookup_class(type_name, f"{path}.type")
        if inspect.isabstract(klass):
            raise RLGraphSpecError(f"{path}: '{klass.__name__}' is abstract; give a concrete \"type\".")
        keys, open_kwargs = accepted_keys(klass)
        if not open_kwargs:
            unknown = [k for k in spec if k not in keys]
            if unknown:
                k = unknown[0]
                close = difflib.get_close_matches(k, sorted(keys), n=3)
                hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
                raise RLGraphSpecError(
                    f"{path}.{k}: unknown key '{k}' for {klass.__name__}.{hint} "
                    f"Accepted keys: {', '.join(sorted(keys))}."
                )
        try:
            return klass(**spec)
        except RLGraphSpecError as e:
            if str(e).startswith(path):
                raise
            raise RLGraphSpecError(f"{path} ({klass.__name__}): {e}") from e
        except TypeError as e:
            raise RLGraphSpecError(f"{path}: cannot build {klass.__name__} from {spec}: {e}") from e
