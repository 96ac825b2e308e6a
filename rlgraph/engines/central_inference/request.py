"""One actor's request to the inference server, as every transport hands it over."""
import numpy as np


class Request:
    """Observations of one actor's environments to act on, with the results of the step that led to them.

    Transports build it from what arrived (shared-memory views, gRPC bytes); the server reads it once, before it
    answers, so ``obs`` may be a view of a buffer the actor overwrites after the answer. Everything else is
    owned by the request.

    Attributes:
        index: The actor's index.
        first: True for the first request after the actor reset its environments (no step results).
        obs: The observations' leaves (a list of arrays [E, ...]; the server's tree spec nests them).
        rewards, terminals, truncations: [E] results of the step (None when ``first``).
        finished_ids: int64 [K]: environments whose episode ended (and auto-reset) in that step.
        finished_final_obs: The leaves of their final observations ([K, ...] each), or None.
        episodes: (return, length) of the episodes that ended.
        stats: The actor's (env_seconds, wait_seconds, vector_steps) so far, or None.
        received: ``time.perf_counter()`` when the server saw the request.
    """

    __slots__ = ("index", "first", "obs", "rewards", "terminals", "truncations", "finished_ids",
                 "finished_final_obs", "episodes", "stats", "received")

    def __init__(self, index, first, obs, rewards=None, terminals=None, truncations=None, finished_ids=None,
                 finished_final_obs=None, episodes=(), stats=None, received=0.0):
        self.index = index
        self.first = first
        self.obs = obs
        self.rewards = rewards
        self.terminals = terminals
        self.truncations = truncations
        self.finished_ids = np.zeros(0, np.int64) if finished_ids is None else finished_ids
        self.finished_final_obs = finished_final_obs
        self.episodes = list(episodes)
        self.stats = stats
        self.received = received

    @property
    def num_envs(self):
        return int(self.obs[0].shape[0])
