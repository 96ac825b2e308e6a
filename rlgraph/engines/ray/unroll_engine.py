"""IMPALA and APPO on Ray: actors send unrolls through a bounded queue to the learner."""
from rlgraph.engines.ray.ray_engine import RayEngine


class RayUnrollEngine(RayEngine):
    """Actors step their environments one unroll at a time; the learner batches unrolls of several actors.

    Each sample task returns one unroll of ``unroll_length`` steps for each of the actor's environments. The
    learner updates once it holds as many environment columns as the config's ``environment_spec.num_envs``
    (the batch a local run learns from), or when its queue is full. At most ``learner_queue_size`` results
    (default: those of one batch plus ``max_samples_in_flight`` per actor) are queued or in flight:
    when the learner falls behind, no new sample is requested, so the object store holds a bounded number of
    unrolls (back-pressure). Weights are broadcast after every ``weight_sync_steps`` env steps (default: after
    every update). Policy lag (learner versions) is reported per update; APPO drops samples past
    ``max_policy_lag`` and counts them ("dropped_samples").
    """

    def __init__(self, config, env_kwargs, learner_agent, spec, seed=0, checkpoint_replay=True):
        super().__init__(config, env_kwargs, learner_agent, spec, seed, checkpoint_replay)
        self.vector_steps = spec.sample_steps or learner_agent.unroll_length
        self.batch_columns = max(1, int(env_kwargs.get("num_envs", 1)))
        results_per_update = -(-self.batch_columns // self.envs_per_actor)
        self.queue_size = spec.learner_queue_size or results_per_update + self.num_actors * spec.max_samples_in_flight
        self.learner.set_batch_columns(self.batch_columns, max_pending=self.queue_size)
        self.dropped_samples = 0

    def _run(self, num_env_steps):
        steps, episodes, results = 0, [], []
        while steps < num_env_steps:
            for index in range(self.num_actors):
                while (self._in_flight_of(index) < self.spec.max_samples_in_flight
                       and len(self._in_flight) + self.learner.pending_items < self.queue_size):
                    self._launch(index, self.vector_steps)
            ready = self._wait(self._in_flight, timeout=1.0)
            if not ready:
                self._check_timeouts()
                continue
            got = self._collect(ready[0])
            if got is None:
                continue
            index, items_ref, stats = got
            try:
                items = self.ray.get(items_ref)
            except self.ray.exceptions.RayActorError:
                self._replace_actor(index, "its process died")
                continue
            for item in items:
                self.learner.add_items(item)
            self.learner.observe_env_steps(stats["env_steps"])
            self._steps_since_sync += stats["env_steps"]
            steps += stats["env_steps"]
            episodes.extend(stats["episodes"])
            while self.learner.ready_to_update():
                result = self.agent.update()
                self.dropped_samples += int(result.get("dropped_samples", 0))
                results.append(result)
        return dict(env_steps=steps, episodes=episodes, results=results)

    def summary(self):
        return dict(super().summary(), dropped_samples=self.dropped_samples,
                    unroll_batch_columns=self.batch_columns, learner_queue_size=self.queue_size)
