"""A user's own module, as a user's script would import it: a gymnasium environment it registers on import
(``SlowCartPole-v1``) and a layer of its own (``UserDense``). rlgraph never imports this module by itself; the
tests import it (the user's opt-in) and check that every process of a run finds what it defines."""
import os
import time

import gymnasium as gym
from gymnasium.envs.classic_control.cartpole import CartPoleEnv

from rlgraph.components.layers.dense_layer import DenseLayer

#: The environment id this module registers.
ENV_ID = "SlowCartPole-v1"


class SlowCartPole(CartPoleEnv):
    """CartPole with an optional pause per step (``step_seconds``), standing in for a user's slower simulator."""

    def __init__(self, step_seconds=0.0, **kwargs):
        super().__init__(**kwargs)
        self.step_seconds = float(step_seconds)

    def step(self, action):
        if self.step_seconds:
            time.sleep(self.step_seconds)
        return super().step(action)


class UserDense(DenseLayer):
    """A dense layer of the user's own (a ``DenseLayer`` whose class only this module defines)."""

    __aliases__ = ("user-dense",)

    def __init__(self, units, **kwargs):
        super().__init__(units, **kwargs)
        #: The process that built the layer (each process of a run builds its own).
        self.built_in = os.getpid()


if ENV_ID not in gym.registry:
    gym.register(ENV_ID, entry_point=f"{__name__}:SlowCartPole", max_episode_steps=200)
