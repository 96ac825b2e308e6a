"""The actor process of central inference: environments only, no deep-learning backend.

SEED RL (Espeholt et al. 2020) moves inference off the actors: an actor steps its environments, sends the
observations (with the previous step's rewards and episode ends) to the inference server and applies the
actions that come back. This module holds that loop, written once against the small ``ActorChannel``
interface that every transport implements (shared memory on one machine, gRPC across machines). It imports
numpy and ``rlgraph.environments`` only: an actor's start-up is its environments', not TensorFlow's or
PyTorch's.
"""
import logging
import os
import sys
import time

logger = logging.getLogger(__name__)

#: Modules an actor must never import (the check behind ``EnvActor.backends_loaded``).
BACKEND_MODULES = ("torch", "tensorflow", "jax", "keras")

#: The key of an actor's ``VectorEnv`` keywords that carries the driver's user code (``UserCode.to_json``):
#: installed in the actor before its environments are built, never passed to ``VectorEnv``.
USER_CODE_KEY = "_rlgraph_user_code"


def backends_loaded():
    """The deep-learning backends imported in this process (an actor's should be none)."""
    return sorted(m for m in BACKEND_MODULES if m in sys.modules)


class ActorChannel:
    """What an actor needs of a transport (actor side); the server side is the transport itself.

    One request per vector step: ``send`` the observations to act on and, except for the first one after
    ``reset``, the results of the step that led to them; ``receive_actions`` blocks until the server's answer
    (None: stop).
    """

    def hello(self, info):
        """Announces the actor (``info``: a JSON-able dict with "pid", "num_envs", "backends")."""
        raise NotImplementedError

    def send(self, obs, step=None, episodes=(), stats=None):
        """Sends a request.

        Args:
            obs: The observations to act on (leading dimension = the actor's environments).
            step: None for the first request after ``reset``, else ``(rewards, terminals, truncations,
                finished_ids, finished_final_obs)`` of the step that produced ``obs`` (``VectorEnv``'s).
            episodes: (return, length) of the episodes that ended in that step.
            stats: ``(env_seconds, wait_seconds, vector_steps)`` so far, for the server's summary.
        """
        raise NotImplementedError

    def receive_actions(self):
        """The actions for the last request's observations (a numpy array), or None when the actor must stop."""
        raise NotImplementedError

    def close(self):
        pass


class EnvActor:
    """Steps a vector of environments with actions from an inference server (SEED RL's actor).

    Args:
        channel: An ``ActorChannel``.
        env_kwargs: ``VectorEnv`` keywords (``env_spec``, ``num_envs``, ``seed``, ...); under ``USER_CODE_KEY``
            the driver's user code (modules, gymnasium registrations) to install first.
        index: The actor's index (for logs).
    """

    def __init__(self, channel, env_kwargs, index=0):
        from rlgraph.environments import VectorEnv
        from rlgraph.utils.user_modules import UserCode

        self.channel = channel
        self.index = index
        env_kwargs = dict(env_kwargs)
        UserCode.from_json(env_kwargs.pop(USER_CODE_KEY, None)).install()
        self.env = VectorEnv(**env_kwargs)

    def run(self):
        """Acts until the server says stop (or goes away); returns the vector steps taken."""
        env, channel = self.env, self.channel
        obs = env.reset()
        channel.hello(dict(pid=os.getpid(), num_envs=env.num_envs, backends=backends_loaded()))
        channel.send(obs)
        env_seconds = wait_seconds = 0.0
        steps = 0
        while True:
            t0 = time.perf_counter()
            actions = channel.receive_actions()
            t1 = time.perf_counter()
            wait_seconds += t1 - t0
            if actions is None:
                return steps
            obs, rewards, terminals, truncations = env.step(actions)
            steps += 1
            env_seconds += time.perf_counter() - t1
            channel.send(obs, (rewards, terminals, truncations, env.finished_env_ids, env.finished_final_obs),
                         env.pop_finished_episodes(), (env_seconds, wait_seconds, steps))

    def close(self):
        self.env.close()
        self.channel.close()
