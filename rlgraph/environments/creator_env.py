"""Environments made by the user's own callable (an environment creator) instead of a registered id."""
import logging

from rlgraph.environments.gym_env import GymEnv
from rlgraph.utils.errors import RLGraphSpecError
from rlgraph.utils.validation import OneOf, check

logger = logging.getLogger(__name__)

#: The vectorizations of a creator's environments (gymnasium's vector envs over one creator).
CREATOR_VECTORIZATIONS = ("auto", "sync", "async")


def is_env_creator(value):
    """Whether ``value`` is an environment creator: a callable that is not an rlgraph ``Environment`` class
    (a function, a ``functools.partial``, or a ``gymnasium.Env`` subclass)."""
    from rlgraph.environments.environment import Environment
    if isinstance(value, type):
        import gymnasium as gym
        return issubclass(value, gym.Env) and not issubclass(value, Environment)
    return callable(value)


def _made(creator):
    """``creator()``, checked to be a gymnasium environment."""
    import gymnasium as gym
    name = getattr(creator, "__qualname__", None) or repr(creator)
    try:
        env = creator()
    except TypeError as e:
        raise RLGraphSpecError(f"environment_spec.env_spec: the environment creator {name} must be callable "
                               f"without arguments: {e}") from None
    if not isinstance(env, gym.Env):
        raise RLGraphSpecError(f"environment_spec.env_spec: the environment creator {name} returned a "
                               f"{type(env).__name__}, not a gymnasium.Env.")
    return env


class CreatorEnv(GymEnv):
    """A gymnasium environment made by calling ``creator()`` (``VectorEnv(env_spec=creator)``).

    The creator travels to the processes of a run where the engine can carry it: the local engine calls it
    here, Ray pickles it to its actors (cloudpickle: a lambda or a function of the user's script works).
    Engines whose processes are fresh interpreters configured with JSON (central inference, distributed
    learners) cannot carry a callable and refuse it.

    Args:
        creator: A callable without arguments returning a ``gymnasium.Env``.
        seed: Seed of the first ``reset()``.
    """

    __aliases__ = ()

    def __init__(self, creator, seed=None):
        self.env_id = getattr(creator, "__qualname__", None) or repr(creator)
        self.creator = creator
        self._setup(_made(creator), seed)

    @classmethod
    def make_vector_backend(cls, num_envs, vectorization="auto", creator=None):
        """gymnasium's ``SyncVectorEnv`` ("auto", "sync") or ``AsyncVectorEnv`` ("async") of ``num_envs``
        copies of ``creator()``, with same-step auto-reset."""
        import gymnasium as gym
        from gymnasium.vector import AutoresetMode

        vectorization = check(cls.__name__, "vectorization", vectorization, OneOf(*CREATOR_VECTORIZATIONS))
        vectorization = "sync" if vectorization == "auto" else vectorization
        vector_class = gym.vector.SyncVectorEnv if vectorization == "sync" else gym.vector.AsyncVectorEnv
        _made(creator).close()  # A clear error for a creator that fails or makes no gymnasium.Env.
        return vector_class([creator] * int(num_envs), autoreset_mode=AutoresetMode.SAME_STEP), vectorization
