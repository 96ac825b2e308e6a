"""Building objects from specs: dicts, JSON files, type names or ready objects.

A class that derives from :class:`Specifiable` gets ``from_spec``. Its subclasses register themselves
under their class name and any ``__aliases__``; a spec's ``"type"`` is looked up case- and separator-
insensitively among the subclasses of the class ``from_spec`` was called on (``"dense-layer"``,
``"DenseLayer"`` and ``"dense_layer"`` all name ``DenseLayer``). Keys that the constructor does not accept
are rejected with the accepted keys listed; errors name the path inside the spec (e.g. ``memory_spec.capacity``).

Where types come from: a config never makes rlgraph import a module of its choosing. A ``"type"`` names

- a class of rlgraph or any class already imported (a subclass registers itself by being defined: import
  your module, then ``"type": "MyLayer"`` finds ``mypackage.layers.MyLayer``);
- a class of an installed package that declares an entry point in the group ``rlgraph.components``
  (``[project.entry-points."rlgraph.components"] mypackage = "mypackage.layers"``): rlgraph loads these
  entry points the first time a name is not found;
- a dotted path (``"mypackage.layers.MyLayer"``) into rlgraph, into an already imported module, or into
  a package registered by such an entry point. Importing any other module needs an explicit opt-in:
  ``RLGRAPH_ALLOW_IMPORT=1`` in the environment, or ``allow_import()`` (also a context manager).
"""
import copy
import difflib
import importlib
import inspect
import json
import logging
import os
import sys

from rlgraph.utils.errors import RLGraphSpecError
from rlgraph.utils.text import with_article

logger = logging.getLogger(__name__)

#: The entry-point group through which installed packages register their components (and other types).
ENTRY_POINT_GROUP = "rlgraph.components"
#: The environment variable that lets a dotted ``"type"`` import any module.
ALLOW_IMPORT_ENV = "RLGRAPH_ALLOW_IMPORT"

_state = {"allow_import": None, "plugins": None}


class allow_import:
    """Lets a dotted ``"type"`` import any module: ``allow_import()`` from now on (``allow_import(False)``
    refuses again), or ``with allow_import(): ...`` for the block only. Default: ``$RLGRAPH_ALLOW_IMPORT``."""

    def __init__(self, flag=True):
        self._previous = _state["allow_import"]
        _state["allow_import"] = bool(flag)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _state["allow_import"] = self._previous
        return False


def import_allowed():
    """Whether a dotted ``"type"`` may import modules outside rlgraph and its registered plugins."""
    if _state["allow_import"] is not None:
        return _state["allow_import"]
    return os.environ.get(ALLOW_IMPORT_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def load_plugins():
    """Loads the entry points of group ``rlgraph.components`` once; returns the top-level package names they
    registered (a dotted ``"type"`` may import modules of these packages)."""
    if _state["plugins"] is None:
        from importlib.metadata import entry_points
        packages = set()
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            packages.add(ep.value.split(":")[0].split(".")[0].strip())
            try:
                ep.load()
            except Exception as e:  # A broken plugin must not break every lookup.
                logger.warning("rlgraph: entry point %r (%s) of group %s failed to load: %s", ep.name, ep.value,
                               ENTRY_POINT_GROUP, e)
        _state["plugins"] = packages
    return _state["plugins"]


def _may_import(module_name):
    top = module_name.split(".")[0]
    return top == "rlgraph" or module_name in sys.modules or import_allowed() or top in load_plugins()


def _keyed(path, reason):
    """An error at ``path`` (relative to the spec being built) that an enclosing ``from_spec`` re-paths."""
    return RLGraphSpecError(f"{path}: {reason}", key=path, reason=reason)


def _is_number(text):
    try:
        float(text)
    except ValueError:
        return False
    return True


def load_json(file_path, where="spec"):
    """Reads a JSON file; a missing or malformed file raises ``RLGraphSpecError`` naming ``where``."""
    try:
        with open(file_path) as f:
            return json.load(f)
    except FileNotFoundError:
        raise RLGraphSpecError(f"{where}: spec file '{file_path}' does not exist.") from None
    except json.JSONDecodeError as e:
        raise RLGraphSpecError(f"{where}: spec file '{file_path}' is not valid JSON: {e}") from None
    except UnicodeDecodeError:
        raise RLGraphSpecError(f"{where}: spec file '{file_path}' is not a text (UTF-8 JSON) file.") from None
    except IsADirectoryError:
        raise RLGraphSpecError(f"{where}: spec file '{file_path}' is a directory.") from None
    except OSError as e:
        raise RLGraphSpecError(f"{where}: spec file '{file_path}' cannot be read: {e.strerror or e}.") from None


def normalize_type_name(name):
    """Lower-cases a type name and drops separators: ``"Dense-Layer"`` -> ``"denselayer"``."""
    return "".join(ch for ch in str(name).lower() if ch not in "-_ ./")


def _public_name(cls):
    """``cls``'s name as users import it: from the package that exports it (``rlgraph.components.layers.Layer``)."""
    module = cls.__module__
    parent = module.rpartition(".")[0]
    if parent and getattr(sys.modules.get(parent), cls.__name__, None) is cls:
        module = parent
    return f"{module}.{cls.__qualname__}"


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
                raise _keyed(path, f"class {type_name.__name__} is not {with_article(cls.__name__)}: make it "
                                   f"subclass {_public_name(cls)} to use it here.")
            return type_name
        if not isinstance(type_name, str):
            raise _keyed(path, f"expected a type name (str), got {type_name!r}.")
        if _is_number(type_name):
            raise _keyed(path, f"expected a type name, got the string {type_name!r}; write numbers without quotes.")
        if "." in type_name and not type_name.startswith("."):
            module_name, _, class_name = type_name.rpartition(".")
            if not _may_import(module_name):
                raise _keyed(
                    path, f"'{type_name}' would import module '{module_name}', which is neither part of rlgraph "
                    f"nor imported nor registered (entry point group '{ENTRY_POINT_GROUP}'); rlgraph does not "
                    f"import modules named by a config. Import it yourself first, register it, or opt in with "
                    f"{ALLOW_IMPORT_ENV}=1 (or rlgraph.utils.specifiable.allow_import()).")
            try:
                klass = getattr(importlib.import_module(module_name), class_name)
            except (ImportError, AttributeError) as e:
                raise _keyed(path, f"cannot import '{type_name}': {e}") from None
            return cls.lookup_class(klass, path)
        wanted = normalize_type_name(type_name)
        table = cls._type_table()
        if wanted not in table and _state["plugins"] is None:
            load_plugins()  # Installed packages' components register when their modules are imported.
            table = cls._type_table()
        if wanted in table:
            return table[wanted]
        other = Specifiable._type_table().get(wanted)
        if other is not None:  # A class of that name exists, in another family.
            raise _keyed(path, f"'{type_name}' is {with_article(other.__name__)} ({other.__module__}), not "
                               f"{with_article(cls.__name__)}: make it subclass {_public_name(cls)} to use it here.")
        close = difflib.get_close_matches(wanted, list(table), n=5, cutoff=0.5)
        names = sorted({table[c].__name__ for c in close})
        hint = f" Did you mean: {', '.join(names)}?" if names else ""
        raise _keyed(path, f"unknown {cls.__name__} type '{type_name}'.{hint}")

    @classmethod
    def _type_table(cls):
        table = {}
        for sub in _all_subclasses(cls):
            for name in (sub.__name__,) + tuple(sub.__dict__.get("__aliases__", ())):
                table.setdefault(normalize_type_name(name), sub)
        return table

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
                raise _keyed(path, f"cannot apply {sorted(kwargs)} to a ready {cls.__name__} object.")
            return spec
        if spec is None:
            spec = {}
        if isinstance(spec, (str, os.PathLike)) and (str(spec).endswith(".json") or os.path.isfile(str(spec))):
            spec = load_json(spec, path)
        if isinstance(spec, (str, type)):
            spec = {"type": spec}
        if not isinstance(spec, dict):
            raise _keyed(path, f"a spec must be a dict, a JSON file or a type name, got {spec!r}.")
        spec = copy.deepcopy(spec)
        spec.update(kwargs)
        type_name = spec.pop("type", None)
        klass = cls if type_name is None else cls.lookup_class(type_name, f"{path}.type")
        if inspect.isabstract(klass):
            raise _keyed(path, f"'{klass.__name__}' is abstract; give a concrete \"type\".")
        keys, open_kwargs = accepted_keys(klass)
        if not open_kwargs:
            unknown = [k for k in spec if k not in keys]
            if unknown:
                k = unknown[0]
                close = difflib.get_close_matches(k, sorted(keys), n=3)
                hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
                reason = f"unknown key '{k}' for {klass.__name__}.{hint} Accepted keys: {', '.join(sorted(keys))}."
                raise RLGraphSpecError(f"{path}.{k}: {reason}", key=f"{path}.{k}", reason=reason)
        try:
            obj = klass(**spec)
        except RLGraphSpecError as e:
            if e.key is not None:
                # A checked key (rlgraph.utils.validation): restate it under this spec's path.
                key = f"{path}.{e.key}"
                raise RLGraphSpecError(f"{key}: {e.reason}", key=key, reason=e.reason) from None
            if str(e).startswith(path):
                raise
            raise RLGraphSpecError(f"{path} ({klass.__name__}): {e}") from e
        except TypeError as e:
            raise RLGraphSpecError(f"{path}: cannot build {klass.__name__} from {spec}: {e}") from e
        if _path:
            _record_spec_path(obj, _path)
        return obj


def _record_spec_path(obj, path):
    """Notes where in a config ``obj`` was specified (``obj.spec_path``, e.g. "network_spec.layers[0]"), so that
    an error found later (at the build) can name the config key. The components built inside its spec got
    paths relative to it: they are prefixed with ``path``."""
    try:
        subs = obj.get_all_sub_components() if callable(getattr(obj, "get_all_sub_components", None)) else []
        for sub in subs:
            inner = sub.__dict__.get("spec_path")
            if inner:
                sub.spec_path = f"{path}.{inner}"
        obj.spec_path = path
    except (AttributeError, TypeError):  # (An object without a __dict__, or one that refuses attributes.)
        pass
