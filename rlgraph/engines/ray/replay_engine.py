"""Ape-X, DQN and R2D2 on Ray: actors feed sharded prioritized replay; the learner samples ahead."""
import logging

import numpy as np

from rlgraph.engines.ray.ray_engine import RayEngine
from rlgraph.utils.errors import RLGraphCheckpointError, RLGraphError

logger = logging.getLogger(__name__)

#: Vector steps per actor task when ``execution_spec.sample_steps`` is not set.
DEFAULT_SAMPLE_STEPS = 32


class ShardedReplay:
    """The learner's replay seam (``ReplayLearner.attach_replay``) for the engine's replay shards: what they hold,
    as the engine last heard from them."""

    def __init__(self, engine):
        self.engine = engine

    @property
    def stored(self):
        """Records in the shards."""
        return int(self.engine.shard_sizes.sum())

    def can_sample(self, batch_size):
        """Whether a shard can serve a whole batch."""
        return bool((self.engine.shard_sizes >= batch_size).any())

    def restore(self, stored):
        """The shards' sizes come with their own state (``RayReplayEngine.set_run_state``)."""


class RayReplayEngine(RayEngine):
    """Distributed prioritized replay (Horgan et al. 2018, Ape-X) for any replay learner.

    Actors compute what their items need (Ape-X: the initial priorities, with the actor's network) and their
    results go straight from the actor to one of ``num_replay_shards`` ``ReplayShard`` actors (round robin;
    the learner's process only sees counts). The learner keeps ``replay_prefetch`` batch requests in flight
    to random shards, so it never waits on one round trip, learns from each batch with ``update(batch)`` and
    sends the new priorities back to the shard it came from. Updates follow the learner's schedule
    (``ReplayLearner.updates_due``, the config's replay ratio, with the shards as its replay); when the learner falls more than ``max_update_backlog`` updates behind, actors
    are paused until it catches up. A replay shard that dies is recreated empty; the records lost are
    counted.
    """

    def __init__(self, config, env_kwargs, learner_agent, spec, seed=0, checkpoint_replay=True):
        from rlgraph.engines.ray.replay_shard import ReplayShard

        super().__init__(config, env_kwargs, learner_agent, spec, seed, checkpoint_replay)
        replay = self.learner.replay_spec
        self.num_shards = spec.num_replay_shards
        self.shard_capacity = max(1, replay.capacity // self.num_shards)
        self.alpha, self.beta, self.keys = replay.alpha, replay.beta, replay.keys
        self.batch_size = replay.batch_size
        if self.shard_capacity < self.batch_size:
            raise RLGraphError(f"execution_spec.num_replay_shards={self.num_shards}: each shard would hold "
                               f"{self.shard_capacity} records, fewer than update_spec.batch_size={self.batch_size}; "
                               f"use fewer shards or a larger memory_spec.capacity.")
        self._shard_class = self.ray.remote(num_cpus=0, max_restarts=0, max_task_retries=0)(ReplayShard)
        self.shards = [self._make_shard(k) for k in range(self.num_shards)]
        self.shard_sizes = np.zeros(self.num_shards, np.int64)
        self.vector_steps = spec.sample_steps or DEFAULT_SAMPLE_STEPS
        self.shard_restarts = 0
        self.records_lost = 0
        self._next_shard = 0
        self._rng = np.random.default_rng(seed)
        self._adds = {}  # ref -> (shard, records)
        self._batches = {}  # ref -> shard
        self._priority_updates = {}  # ref -> shard
        self.learner.attach_replay(ShardedReplay(self))

    def _make_shard(self, k):
        return self._created(self._shard_class.remote(self.keys, self.shard_capacity, self.alpha, self.beta,
                                                      self.seed + 7919 * (k + 1)))

    def _replace_shard(self, k, why):
        if self.shard_restarts >= self.spec.max_actor_restarts:
            raise RLGraphError(f"Ray engine: replay shard {k} failed ({why}) after {self.shard_restarts} restarts "
                               f"(execution_spec.max_actor_restarts={self.spec.max_actor_restarts}); stopping.")
        for table in (self._adds, self._batches, self._priority_updates):
            for ref in [r for r, v in table.items() if (v[0] if isinstance(v, tuple) else v) == k]:
                table.pop(ref)
        self.kill(self.shards[k])
        self.records_lost += int(self.shard_sizes[k])
        self.shard_sizes[k] = 0
        self.shard_restarts += 1
        logger.warning("Ray engine: replay shard %d %s; recreating it empty (restart %d).", k, why,
                       self.shard_restarts)
        self.shards[k] = self._make_shard(k)

    def _request_batches(self, due):
        sampleable = np.flatnonzero(self.shard_sizes >= self.batch_size)
        while sampleable.size and len(self._batches) < min(self.spec.replay_prefetch, due):
            k = int(self._rng.choice(sampleable))
            self._batches[self.shards[k].sample.remote(self.batch_size)] = k

    def _run(self, num_env_steps):
        steps, episodes, results = 0, [], []
        learner = self.learner
        while steps < num_env_steps:
            due = learner.updates_due()
            sampleable = (self.shard_sizes >= self.batch_size).any()
            # Actors pause while the learner is too far behind (and can catch up: a shard serves batches).
            if due - len(self._batches) <= self.spec.max_update_backlog or not sampleable:
                for index in range(self.num_actors):
                    while self._in_flight_of(index) < self.spec.max_samples_in_flight:
                        self._launch(index, self.vector_steps, timesteps=learner.timesteps)
            if due > 0:
                self._request_batches(due)
            refs = list(self._in_flight) + list(self._batches) + list(self._adds) + list(self._priority_updates)
            ready = self._wait(refs, timeout=1.0)
            if not ready:
                self._check_timeouts()
                continue
            ready, _ = self.ray.wait(refs, num_returns=len(refs), timeout=0)
            for ref in ready:
                if ref in self._in_flight:
                    got = self._collect(ref)
                    if got is None:
                        continue
                    _, items_ref, stats = got
                    k = self._next_shard
                    self._next_shard = (k + 1) % self.num_shards
                    self._adds[self.shards[k].add.remote(items_ref)] = (k, stats["num_items"])
                    learner.observe_env_steps(stats["env_steps"])
                    if stats["versions"].size:
                        learner.record_lags(stats["versions"])
                    self._steps_since_sync += stats["env_steps"]
                    steps += stats["env_steps"]
                    episodes.extend(stats["episodes"])
                elif ref in self._adds:
                    k, num = self._adds.pop(ref)
                    if self._get(ref, k, "an insert") is not None:
                        self.shard_sizes[k] = min(self.shard_sizes[k] + num, self.shard_capacity)
                elif ref in self._batches:
                    k = self._batches.pop(ref)
                    batch = self._get(ref, k, "a sample")
                    if batch is None:
                        continue
                    records, indices, weights = batch
                    result = self.agent.update(dict(records, importance_weights=weights))
                    priorities = result.pop("priorities")
                    self._priority_updates[self.shards[k].update_priorities.remote(indices, priorities)] = k
                    results.append(result)
                elif ref in self._priority_updates:
                    self._get(ref, self._priority_updates.pop(ref), "a priority update")
        return dict(env_steps=steps, episodes=episodes, results=results)

    def _get(self, ref, k, what):
        """The value of a shard call, or None if the shard died (then it is recreated)."""
        try:
            return self.ray.get(ref)
        except self.ray.exceptions.RayActorError as e:
            self._replace_shard(k, f"died during {what} ({type(e).__name__})")
            return None

    def get_run_state(self):
        """The learner's run state plus the replay shards' contents and the replay schedule's counters."""
        shards = self.ray.get([s.get_state.remote() for s in self.shards]) if self.checkpoint_replay else None
        return dict(super().get_run_state(), shards=shards, shard_sizes=self.shard_sizes.copy(),
                    next_shard=int(self._next_shard), rng=self._rng.bit_generator.state,
                    records_lost=int(self.records_lost))

    def set_run_state(self, state):
        super().set_run_state(state)
        if state.get("shards", ()) is None:
            # Stored without the replay's contents (train_spec.checkpoint_replay false): the fresh shards refill.
            self.learner.forget_replay()
            state = dict(state, shards=[s.get_state.remote() for s in self.shards])
            state["shards"] = self.ray.get(state["shards"])
            state["shard_sizes"] = np.zeros(self.num_shards, np.int64)
        try:
            shards, sizes = list(state["shards"]), np.asarray(state["shard_sizes"], np.int64)
            if len(shards) != self.num_shards or sizes.shape != (self.num_shards,):
                raise ValueError(f"{len(shards)} replay shards stored, this run has {self.num_shards} "
                                 f"(execution_spec.num_replay_shards)")
            self.ray.get([shard.set_state.remote(s) for shard, s in zip(self.shards, shards)])
            self.shard_sizes = sizes
            self._next_shard = int(state["next_shard"])
            if "ready_at" in state:  # An older run state: the replay ratio's origin was kept here.
                learner = self.learner
                learner.set_state(dict(learner.get_state(), anchor=state["ready_at"],
                                       updates_at_anchor=learner.updates - int(state["updates_made"])))
            self._rng.bit_generator.state = state["rng"]
            self.records_lost = int(state["records_lost"])
        except (KeyError, TypeError, ValueError) as e:
            raise RLGraphCheckpointError(f"Ray engine: the stored replay state does not fit: {type(e).__name__}: "
                                         f"{e}.") from None

    def processes(self):
        """Adds the replay shards' process ids; a shard that died (e.g. while starting) is recreated first."""
        pids = []
        for k in range(self.num_shards):
            for attempt in range(2):
                try:
                    pids.append(self.ray.get(self.shards[k].pid.remote(), timeout=self.spec.sample_timeout_s))
                    break
                except (self.ray.exceptions.RayActorError, self.ray.exceptions.GetTimeoutError) as e:
                    if attempt:
                        raise RLGraphError(f"Ray engine: replay shard {k} does not start ({type(e).__name__}).") \
                            from None
                    self._replace_shard(k, f"died while starting ({type(e).__name__})")
        return dict(super().processes(), replay_shards=pids)

    def summary(self):
        return dict(super().summary(), num_replay_shards=self.num_shards, replay_shard_restarts=self.shard_restarts,
                    replay_records_lost=self.records_lost, replay_size=int(self.shard_sizes.sum()))

    def close(self):
        self.kill(*self.shards)
        super().close()
