"""The user's own code of a run (component and environment modules), carried to every process of the run.

A config names its types by name (``"type": "MyLayer"``) and its environment by a gymnasium id that the user's
module registered (``gym.register(...)`` on import) or by gymnasium's module-qualified id
(``"my_envs:MyEnv-v0"``). Where such names come from follows the import policy of
``rlgraph.utils.specifiable``: a module the user's script imported, one registered through an entry point, or
an explicit opt-in (``RLGRAPH_ALLOW_IMPORT=1``). What the driver imported is the user's opt-in for the whole
run: ``UserCode.of_run`` records, in the driver, the modules a config's types and environment were resolved
from (with the ``sys.path`` entry each was found under) and the gymnasium registrations its environment uses;
``UserCode.install`` repeats them in an actor or learner process before it builds anything.

Classes defined in the user's script itself (module ``__main__``) cannot be imported by another process;
Ray carries them by value (cloudpickle), engines that start fresh interpreters refuse them (``to_json``).
"""
import dataclasses
import importlib
import json
import logging
import os
import sys
import types

from rlgraph.utils.errors import RLGraphSpecError

logger = logging.getLogger(__name__)

#: Top-level packages whose modules never need carrying (they are rlgraph's own or its dependencies').
_NOT_USER = frozenset({"rlgraph", "builtins", "gymnasium", "ale_py", "numpy", "__main__"})

#: Classes received by value (Ray) are kept alive here so that type lookups by name keep finding them.
_RECEIVED_CLASSES = []


def may_import(module_name):
    """Whether the import policy of ``rlgraph.utils.specifiable`` lets a config import ``module_name``: part of
    rlgraph, already imported, in a package registered by an entry point, or opted in."""
    from rlgraph.utils.specifiable import _may_import
    return _may_import(module_name)


def _is_user_module(name):
    top = name.split(".")[0]
    return bool(name) and top not in _NOT_USER and top not in sys.stdlib_module_names


def module_root(name):
    """The ``sys.path`` entry module ``name`` (imported) was found under, or None (no file, e.g. a namespace)."""
    module = sys.modules.get(name)
    path = getattr(module, "__file__", None)
    if not path:
        return None
    path = os.path.dirname(os.path.abspath(path))  # The module's directory (a package's own, for __init__.py).
    depth = name.count(".") + (1 if os.path.basename(module.__file__).startswith("__init__.") else 0)
    for _ in range(depth):
        path = os.path.dirname(path)
    return path


def _type_values(tree):
    """Every ``"type"`` value of a (nested) config, and every class in it."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if "type" in node:
                yield node["type"]
            stack.extend(node.values())
        elif isinstance(node, (list, tuple)):
            stack.extend(node)
        elif isinstance(node, type):
            yield node


def _classes_named(type_name):
    """The user's ``Specifiable`` classes a type name can resolve to (any base; name or alias)."""
    from rlgraph.utils.specifiable import Specifiable, _all_subclasses, normalize_type_name
    wanted = normalize_type_name(type_name)
    found = [c for c in _all_subclasses(Specifiable)
             if wanted in {normalize_type_name(n) for n in (c.__name__,) + tuple(c.__dict__.get("__aliases__", ()))}]
    # A name that rlgraph's own classes answer is theirs (another module's class of that name is not the user's).
    return [] if any(not _is_user_module(c.__module__) and c.__module__ != "__main__" for c in found) else found


def _gym_ids(env_kwargs):
    """The gymnasium ids an environment spec names (``env_spec`` or a dict spec's ``env_id``)."""
    ids = []
    spec = env_kwargs.get("env_spec")
    for value in (spec, spec.get("env_id") if isinstance(spec, dict) else None, env_kwargs.get("env_id")):
        if isinstance(value, str) and value:
            ids.append(value)
    return ids


@dataclasses.dataclass(frozen=True)
class UserCode:
    """What another process of a run must import or register before it builds from the run's config.

    Attributes:
        modules: ``(module name, sys.path entry or None)`` of each user module, in the order to import them.
        gym_specs: gymnasium ``EnvSpec`` JSON of the ids the run's environment uses (registered where missing).
        main_classes: Classes defined in the driver's script (``__main__``); only Ray can carry them.
    """

    modules: tuple = ()
    gym_specs: tuple = ()
    main_classes: tuple = ()

    @classmethod
    def of_run(cls, config, env_kwargs):
        """The user code a run's config (its types) and environment keywords resolve to in this process."""
        modules, main_classes = [], []

        def add_class(klass):
            name = getattr(klass, "__module__", None) or ""
            if name == "__main__":
                if klass not in main_classes:
                    main_classes.append(klass)
            else:
                add_module(name)

        def add_module(name):
            if _is_user_module(name) and name in sys.modules and name not in modules:
                modules.append(name)

        for value in list(_type_values(config)) + list(_type_values(env_kwargs)):
            if isinstance(value, type):
                add_class(value)
            elif isinstance(value, str) and "." in value and not value.startswith("."):
                module = value.rpartition(".")[0]
                add_module(module)
                klass = getattr(sys.modules.get(module), value.rpartition(".")[2], None)
                if isinstance(klass, type):
                    add_class(klass)
            elif isinstance(value, str):
                for klass in _classes_named(value):
                    add_class(klass)
        env_spec = env_kwargs.get("env_spec")
        if isinstance(env_spec, type):
            add_class(env_spec)
        elif callable(env_spec):  # An environment creator.
            for name in _creator_modules(env_spec):
                add_module(name)
        gym_specs = []
        for env_id in _gym_ids(env_kwargs):
            module, _, name = env_id.rpartition(":")
            if module:
                add_module(module)
            spec = _registered_spec(name)
            if spec is None:
                continue
            for entry in (spec.entry_point, getattr(spec, "vector_entry_point", None)):
                if isinstance(entry, str) and ":" in entry:
                    add_module(entry.split(":")[0])
                elif isinstance(entry, type):
                    add_class(entry)
                elif callable(entry):
                    add_module(getattr(entry, "__module__", None) or "")
            try:
                gym_specs.append(spec.to_json())
            except (ValueError, TypeError, AttributeError):  # A callable entry point: its module re-registers it.
                pass
        return cls(modules=tuple((m, module_root(m)) for m in modules), gym_specs=tuple(gym_specs),
                   main_classes=tuple(main_classes))

    def __bool__(self):
        return bool(self.modules or self.gym_specs or self.main_classes)

    def install(self):
        """Makes the driver's user code available in this process: puts each module's ``sys.path`` entry on
        ``sys.path`` (where it exists here), imports the modules, registers missing gymnasium ids.

        Raises:
            RLGraphSpecError: A module cannot be imported here (naming it and what to do).
        """
        for klass in self.main_classes:
            if klass not in _RECEIVED_CLASSES:
                _RECEIVED_CLASSES.append(klass)
        for name, root in self.modules:
            if root and root not in sys.path and os.path.isdir(root):
                sys.path.append(root)
            if name in sys.modules:
                continue
            try:
                importlib.import_module(name)
            except Exception as e:  # noqa: BLE001 - the user's module; any failure is reported the same way.
                raise RLGraphSpecError(
                    f"the run's module '{name}' (imported by the script that started the run, from "
                    f"{root or 'an unknown path'}) cannot be imported in process {os.getpid()}: {type(e).__name__}: "
                    f"{e}. Install it (or put it on PYTHONPATH) on every machine of the run.") from None
        if self.gym_specs:
            import gymnasium as gym
            from gymnasium.envs.registration import EnvSpec
            for text in self.gym_specs:
                spec = EnvSpec.from_json(text)
                if spec.id not in gym.registry:
                    gym.registry[spec.id] = spec

    def to_json(self, engine):
        """The user code as JSON for a process started as a fresh interpreter (``engine`` names it in errors).

        Raises:
            RLGraphSpecError: It holds classes of the driver's script, which such a process cannot import.
        """
        if self.main_classes:
            names = ", ".join(sorted(k.__name__ for k in self.main_classes))
            raise RLGraphSpecError(
                f"{engine}: {names} {'is' if len(self.main_classes) == 1 else 'are'} defined in the script that "
                f"started the run (__main__); the {engine}'s processes are fresh Python interpreters that do not "
                f"run that script, so they cannot find it. Move it to a module and import that module in the "
                f"script.")
        return json.dumps(dict(modules=[list(m) for m in self.modules], gym_specs=list(self.gym_specs)))

    @classmethod
    def from_json(cls, text):
        """The user code of ``to_json``'s JSON (None or empty: none)."""
        if not text:
            return cls()
        data = json.loads(text)
        return cls(modules=tuple((str(n), r) for n, r in data.get("modules", ())),
                   gym_specs=tuple(data.get("gym_specs", ())))


def _creator_modules(creator):
    """The modules an environment creator needs where it is unpickled: a module-level function's own module
    (pickled by reference), else (a lambda, a local function: pickled by value) the modules its code names."""
    function = getattr(creator, "func", creator)  # (a functools.partial's function)
    qualname = getattr(function, "__qualname__", "") or ""
    if "<" not in qualname:
        return [getattr(function, "__module__", None) or ""]
    code, scope = getattr(function, "__code__", None), getattr(function, "__globals__", {})
    names = []
    for name in (code.co_names if code is not None else ()):
        value = scope.get(name)
        module = value.__name__ if isinstance(value, types.ModuleType) else getattr(value, "__module__", None)
        if isinstance(module, str):
            names.append(module)
    return names


def _registered_spec(env_id):
    """gymnasium's spec of ``env_id`` in this process's registry, or None."""
    try:
        import gymnasium as gym
    except ImportError:
        return None
    return gym.registry.get(env_id)


def check_json_environment(env_kwargs, engine, processes):
    """Refuses environment keywords that cannot reach ``processes`` (fresh interpreters configured with JSON):
    an environment creator (a callable) or class, or any other value JSON cannot hold.

    Raises:
        RLGraphSpecError: Naming the key, the engine and why.
    """
    for key, value in env_kwargs.items():
        if callable(value):
            what = "an environment class" if isinstance(value, type) else "an environment creator (a callable)"
            raise RLGraphSpecError(
                f"environment_spec.{key}: {engine} cannot use {what}: {processes} are fresh Python interpreters "
                f"that receive the environment's settings as JSON. Register the environment with gymnasium in a "
                f"module and name its id (\"my_envs:MyEnv-v0\"), or train on the local or Ray engine, which can "
                f"carry a creator.")
        try:
            json.dumps(value)
        except (TypeError, ValueError) as e:
            raise RLGraphSpecError(f"environment_spec.{key}: {engine} needs JSON values ({processes} receive the "
                                   f"environment's settings as JSON): {e}.") from None
