"""Lookups in gymnasium's registry with rlgraph errors (close matches for unknown ids)."""
import difflib
import logging

from rlgraph.utils.errors import RLGraphError, RLGraphSpecError
from rlgraph.utils.validation import Str, check, spec_error

#: What an environment id must be (``rlgraph.utils.validation``).
ENV_ID = Str(what="a gymnasium id (a non-empty string such as \"CartPole-v1\")")

logger = logging.getLogger(__name__)


def register_ale():
    """Registers ale-py's Atari ids with gymnasium; returns False if ale-py is not installed."""
    try:
        import ale_py
    except ImportError:
        return False
    import gymnasium as gym

    gym.register_envs(ale_py)
    return True


def import_env_module(env_id, owner="GymEnv"):
    """For gymnasium's module-qualified id ``"my_envs:MyEnv-v0"``: imports ``my_envs`` (which registers the id)
    under rlgraph's import policy (``rlgraph.utils.user_modules.may_import``: imported already, registered through
    an entry point, or opted in) and returns ``"MyEnv-v0"``; any other id is returned as it is.

    Raises:
        RLGraphSpecError: The module may not be imported (the policy), or cannot be.
    """
    import importlib

    from rlgraph.utils.user_modules import may_import

    module, sep, name = env_id.partition(":")
    if not sep:
        return env_id
    if not module or not name or ":" in name:
        raise spec_error(owner, "env_id", f"'{env_id}' is neither a gymnasium id nor a module-qualified id "
                         f"(\"my_envs:MyEnv-v0\").")
    if not may_import(module):
        from rlgraph.utils.specifiable import ALLOW_IMPORT_ENV, ENTRY_POINT_GROUP
        raise spec_error(owner, "env_id", f"'{env_id}' would import module '{module}', which is neither imported nor "
                         f"registered (entry point group '{ENTRY_POINT_GROUP}'); rlgraph does not import modules "
                         f"named by a config. Import it in your script first, register it, or opt in with "
                         f"{ALLOW_IMPORT_ENV}=1.")
    try:
        importlib.import_module(module)
    except Exception as e:  # noqa: BLE001 - the user's module; any failure is reported the same way.
        raise spec_error(owner, "env_id", f"'{env_id}': module '{module}' cannot be imported: "
                         f"{type(e).__name__}: {e}") from None
    return name


def gym_spec(env_id, owner="GymEnv"):
    """Returns gymnasium's ``EnvSpec`` for ``env_id`` (``owner`` names the class asking, in messages).

    A module-qualified id (``"my_envs:MyEnv-v0"``) imports its module first (``import_env_module``).
    Registers ale-py's ids first when ``env_id`` looks like an Atari id (``ALE/...``, ``...NoFrameskip...``)
    and is not registered yet.

    Raises:
        RLGraphSpecError: If ``env_id`` is not registered; lists the closest registered ids.
    """
    import gymnasium as gym

    check(owner, "env_id", env_id, ENV_ID)
    given, env_id = env_id, import_env_module(env_id, owner)
    if env_id not in gym.registry and (env_id.startswith("ALE/") or "Frameskip" in env_id):
        register_ale()
    try:
        return gym.spec(env_id)
    except gym.error.Error as e:
        close = difflib.get_close_matches(env_id, list(gym.registry.keys()), n=5, cutoff=0.6)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        module = given.partition(":")[0]
        where = "" if given == env_id else f" (module '{module}' was imported; it registers no such id)"
        raise spec_error(owner, "env_id", f"unknown gymnasium environment id '{env_id}'{where} ({e}).{hint}") from None


def make_gym_env(env_id, **gym_kwargs):
    """``gymnasium.make(env_id, **gym_kwargs)`` with rlgraph errors for unknown ids and bad keywords."""
    import gymnasium as gym

    spec = gym_spec(env_id)
    try:
        return gym.make(spec, **gym_kwargs)
    except (gym.error.DependencyNotInstalled, ImportError) as e:
        raise RLGraphError(f"gymnasium environment '{env_id}' needs a package that is not installed: {e}") from e
    except TypeError as e:
        raise RLGraphSpecError(f"GymEnv: cannot make gymnasium environment '{env_id}' with {gym_kwargs}: {e}") from e
