"""Same-step auto-reset for gymnasium's native vector CartPole (which only knows next-step auto-reset)."""
import numpy as np
from gymnasium.vector import AutoresetMode, VectorWrapper

# Attributes of gymnasium's CartPoleVectorEnv that the adapter resets in place.
REQUIRED_ATTRIBUTES = ("state", "steps", "prev_done", "low", "high", "np_random")

_NO_IDS = np.zeros(0, dtype=np.int64)


class CartPoleSameStep(VectorWrapper):
    """Wraps ``gymnasium.envs.classic_control.cartpole.CartPoleVectorEnv`` to reset finished envs at once.

    After the wrapped step, finished envs get a fresh start state drawn exactly as the native reset draws
    it (uniform in ``[low, high]`` from the env's generator), so the returned ``obs`` holds reset
    observations for them. ``infos["final_obs_ids"]`` lists the finished envs (always present, maybe empty),
    ``infos["final_obs"]`` holds just their pre-reset observations (in that order) and ``infos["_final_obs"]``
    their mask. The native next-step reset never fires.
    """

    @staticmethod
    def supports(env):
        """Whether ``env`` (unwrapped) has the attributes this adapter resets."""
        return all(hasattr(env, name) for name in REQUIRED_ATTRIBUTES)

    def __init__(self, env):
        super().__init__(env)
        self.metadata = dict(env.metadata, autoreset_mode=AutoresetMode.SAME_STEP)

    def step(self, actions):
        """Steps all envs; finished ones are reset in the same call (see the class docstring)."""
        obs, rewards, terminations, truncations, infos = self.env.step(actions)
        done = terminations | truncations
        ids = np.flatnonzero(done) if done.any() else _NO_IDS
        infos = dict(infos, final_obs_ids=ids)
        if ids.size:
            env = self.env.unwrapped
            infos["final_obs"] = obs[ids]
            infos["_final_obs"] = done
            state = env.np_random.uniform(low=env.low, high=env.high, size=(4, ids.size))
            env.state[:, ids] = state
            env.steps[ids] = 0
            env.prev_done[:] = False
            obs[ids] = state.T
        return obs, rewards, terminations, truncations, infos

    def get_state(self):
        """The state of all envs: physics state, step counts, reset bounds and the generator's state."""
        env = self.env.unwrapped
        if env.state is None:
            return None
        return dict(state=np.array(env.state), steps=np.array(env.steps), prev_done=np.array(env.prev_done),
                    low=np.asarray(env.low, np.float64), high=np.asarray(env.high, np.float64),
                    rng=env.np_random.bit_generator.state)

    def set_state(self, state):
        """Restores what ``get_state`` returned (the arrays must fit the number of envs)."""
        env = self.env.unwrapped
        physics = np.array(state["state"], np.float64)
        if physics.shape != (4, env.num_envs):
            raise ValueError(f"a state of shape {physics.shape} for {env.num_envs} envs")
        env.state = physics
        env.steps = np.array(state["steps"], np.int32).reshape(env.num_envs)
        env.prev_done = np.array(state["prev_done"], np.bool_).reshape(env.num_envs)
        env.low, env.high = float(state["low"]), float(state["high"])
        env.steps_beyond_terminated = None
        env.np_random.bit_generator.state = state["rng"]
