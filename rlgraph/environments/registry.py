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


def gym_spec(env_id, owner="GymEnv"):
    """Returns gymnasium's ``EnvSpec`` for ``env_id`` (``owner`` names the class asking, in messages).

    Registers ale-py's ids first when ``env_id`` looks like an Atari id (``ALE/...``, ``...NoFrameskip...``)
    and is not registered yet.

    Raises:
        RLGraphSpecError: If ``env_id`` is not registered; lists the closest registered ids.
    """
    import gymnasium as gym

    check(owner, "env_id", env_id, ENV_ID)
    if env_id not in gym.registry and (env_id.startswith("ALE/") or "Frameskip" in env_id):
        register_ale()
    try:
        return gym.spec(env_id)
    except gym.error.Error as e:
        close = difflib.get_close_matches(env_id, list(gym.registry.keys()), n=5, cutoff=0.6)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        raise spec_error(owner, "env_id", f"unknown gymnasium environment id '{env_id}' ({e}).{hint}") from None


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
