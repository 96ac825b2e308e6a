"""The inference server of central inference: batched acting for all actors, trajectories, learning."""
import logging
import time

import numpy as np
import optree

from rlgraph.engines.central_inference.buckets import bucket_size, largest_batch, pad_batch, unpad
from rlgraph.workers.actor_loop import ActorLoop

logger = logging.getLogger(__name__)


def _cat(trees):
    """Row-wise concatenation of equally structured trees of arrays (one tree: itself)."""
    if len(trees) == 1:
        return trees[0]
    return optree.tree_map(lambda *xs: np.concatenate(xs), *trees)


class InferenceServer:
    """Serves actions to all actors from one batched ``get_actions`` call and learns from what they send.

    As in SEED RL (Espeholt et al. 2020), inference runs next to the learner on the learner's weights (the
    local agent's actor shares the learner's executor, so the policy lag of acting is zero), recurrent state
    is kept here per environment, and trajectories are assembled here: one trajectory builder, keyed by the
    global environment id (actor i's rows are ids ``sum(env_counts[:i]) + row``).

    The server drives the learner agent's actor through an ``ActorLoop`` over all environment ids, calling its
    two halves around the transport: per batch of requests, the recurrent state is carried past the steps the
    requests complete (``carry_states``: zeroed where an episode ended; new episodes for a (re)started actor),
    the loop acts for the requests' rows (``act``, with those ids' recurrent state and fixed epsilons) and
    the actors are answered; then the completed steps become items for the learner (``add_step``), so the
    actors step their environments while the server assembles trajectories, feeds the learner and updates.

    Batch-size buckets: where the actor's executor compiles per input shape (``compiles_per_shape``: JAX), each
    inference call is padded to its bucket (``buckets.bucket_size``: the next power of two, capped at
    ``largest_batch``) with copies of a real row (observation, environment id, so recurrent state and epsilon
    too) and the padding rows' outputs are dropped before anything uses them: they reach no actor, no trajectory
    and no recurrent state. ``act`` then compiles once per bucket, not once per batch size.

    Updates follow the learner's schedule (``Learner.updates_due``): unroll learners (IMPALA, APPO) learn once
    ``batch_columns`` environment columns are queued (the batch a local run learns from), replay learners by
    their replay ratio.

    Args:
        agent: The learner agent (``role="both"``: ``agent.actor`` and ``agent.learner``).
        transport: The server's end of a transport (``poll``, ``reply``, ``ready``).
        env_counts: Environments of each actor (one entry per actor).
        obs_spec: The optree spec of one observation (its leaves come in requests).
        batch_rows: The most environment rows one inference call serves.
        timeout_s: How long to wait for more actors to join a batch.
        batch_columns: Environment columns per update of an unroll learner (``Learner.set_batch_columns``; None:
            the learner's default).

    Attributes:
        largest_batch: The most rows one inference call can serve (the largest bucket).
        pad_to_buckets: Whether calls are padded to their bucket (the actor's executor compiles per shape).
        padded_rows: Padding rows added to inference calls so far.
    """

    def __init__(self, agent, transport, env_counts, obs_spec, batch_rows, timeout_s, batch_columns=None):
        self.agent = agent
        self.actor = agent.actor
        self.learner = agent.learner
        self.transport = transport
        self.env_counts = np.asarray(env_counts, np.int64)
        self.num_actors = len(self.env_counts)
        self.offsets = np.concatenate([[0], np.cumsum(self.env_counts)])
        self.total_envs = int(self.offsets[-1])
        self.obs_spec = obs_spec
        self.batch_rows = int(batch_rows)
        self.timeout_s = float(timeout_s)
        self.batch_columns = batch_columns
        self.largest_batch = largest_batch(self.env_counts, self.batch_rows)
        self.pad_to_buckets = bool(getattr(getattr(self.actor, "executor", None), "compiles_per_shape", False))
        self.padded_rows = 0
        if batch_columns is not None:
            self.learner.set_batch_columns(batch_columns)
        # Fixed per-environment epsilons (Ape-X, R2D2 "apex") are spread over all actors' environments.
        self.actor.place(0, self.total_envs)
        self.loop = ActorLoop(self.actor, agent.make_trajectory_builder(), sink=self.learner,
                              num_envs=self.total_envs)
        self._prev = [None] * self.num_actors  # per actor: (obs, actions, extras) of its last answer
        self._answered_at = [None] * self.num_actors
        self.actor_stats = [(0.0, 0.0, 0.0)] * self.num_actors
        self.actor_env_steps = np.zeros(self.num_actors, np.int64)
        self.inference_calls = 0
        self.inference_rows = 0
        self.latency_sum = 0.0
        self.latency_count = 0
        self.dropped_samples = 0
        self.env_steps_lost = 0  # Pending steps dropped with actors that died or started over.

    # --- actors coming and going ----------------------------------------------------------------------------
    def env_ids(self, index):
        """The global environment ids of actor ``index``."""
        return np.arange(self.offsets[index], self.offsets[index + 1])

    def forget_actor(self, index):
        """Drops actor ``index``'s partial trajectories and recurrent state (its process is gone).

        Returns:
            The environment steps dropped (held in partial trajectories that no item covers); they are also
            added to ``env_steps_lost``.
        """
        lost = self.loop.forget(self.env_ids(index))
        self.env_steps_lost += lost
        self._prev[index] = None
        self._answered_at[index] = None
        return lost

    def overdue(self, timeout_s):
        """Actors answered more than ``timeout_s`` seconds ago that have not sent their next step."""
        now = time.perf_counter()
        return [i for i, t in enumerate(self._answered_at) if t is not None and now - t > timeout_s]

    def restart_clock(self):
        """Forgets when actors were last answered (time spent outside ``serve`` does not count)."""
        now = time.perf_counter()
        self._answered_at = [None if t is None else now for t in self._answered_at]

    def reset(self):
        """Drops all partial trajectories (e.g. after a model was loaded); actors keep their episodes."""
        self.loop.reset(internal_states=False)

    @property
    def builder(self):
        """The trajectory builder, keyed by global environment id."""
        return self.loop.builder

    # --- serving --------------------------------------------------------------------------------------------
    def collect(self, on_dead, poll_s=0.5):
        """Waits for requests to batch: until ``batch_rows`` rows, every running actor, or ``timeout_s`` after
        the first request. Dead actors are passed to ``on_dead(index, why, said_hello)``.

        Returns:
            A list of ``Request`` (possibly empty after ``poll_s`` without any).
        """
        pending, deadline = {}, None
        wait = poll_s
        while True:
            requests, dead = self.transport.poll(wait)
            for index, why, said_hello in dead:
                pending.pop(index, None)
                on_dead(index, why, said_hello)
            for r in requests:
                pending[r.index] = r
            if not pending:
                return []
            now = time.perf_counter()
            if deadline is None:
                deadline = now + self.timeout_s
            rows = int(self.env_counts[list(pending)].sum())
            running = sum(1 for i in range(self.num_actors) if self.transport.ready(i))
            if rows >= self.batch_rows or len(pending) >= running or now >= deadline:
                return sorted(pending.values(), key=lambda r: r.index)
            wait = deadline - now

    def serve(self, requests):
        """Answers a batch of requests (in inference calls of at most ``batch_rows`` rows) and learns from
        the steps they complete.

        Returns:
            ``(env_steps, episodes, results)`` of this batch.
        """
        steps, episodes, results = 0, [], []
        batches, rows = [[]], 0
        for r in requests:  # Calls of at most batch_rows rows (at least one actor each).
            n = int(self.env_counts[r.index])
            if batches[-1] and rows + n > self.batch_rows:
                batches.append([])
                rows = 0
            batches[-1].append(r)
            rows += n
        for batch in batches:
            n, eps, res = self._serve_batch(batch)
            steps += n
            episodes.extend(eps)
            results.extend(res)
        return steps, episodes, results

    def _serve_batch(self, requests):
        loop = self.loop
        for r in requests:
            if r.first and self._prev[r.index] is not None:  # An actor that started over (e.g. reconnected).
                self.forget_actor(r.index)
        counts = [int(self.env_counts[r.index]) for r in requests]
        starts = np.concatenate([[0], np.cumsum(counts)])
        ids = np.concatenate([self.env_ids(r.index) for r in requests])
        leaves = [np.concatenate([r.obs[i] for r in requests]) if len(requests) > 1 else np.array(requests[0].obs[i])
                  for i in range(len(requests[0].obs))]
        obs = optree.tree_unflatten(self.obs_spec, leaves)
        # The steps these requests complete: (actor, offset of its rows in this batch).
        stepped = [(k, r) for k, r in enumerate(requests) if not r.first and self._prev[r.index] is not None]
        transition = None
        if stepped:
            prev_obs, prev_actions, prev_extras = (_cat(list(parts)) for parts in
                                                   zip(*(self._prev[r.index] for _, r in stepped)))
            rewards = np.concatenate([r.rewards for _, r in stepped])
            terminals = np.concatenate([r.terminals for _, r in stepped])
            truncations = np.concatenate([r.truncations for _, r in stepped])
            step_ids = np.concatenate([self.env_ids(r.index) for _, r in stepped])
            if len(stepped) == len(requests):
                next_leaves = leaves
            else:
                rows = np.concatenate([np.arange(starts[k], starts[k + 1]) for k, _ in stepped])
                next_leaves = [leaf[rows] for leaf in leaves]
            final_leaves = next_leaves
            step_starts = np.concatenate([[0], np.cumsum([counts[k] for k, _ in stepped])])
            finished = [(j, r) for j, (_, r) in enumerate(stepped) if r.finished_ids.size]
            if finished:  # s' of an episode that ended is its final observation, not the next one's first.
                final_leaves = [leaf.copy() for leaf in next_leaves]
                for j, r in finished:
                    for leaf, rows in zip(final_leaves, r.finished_final_obs):
                        leaf[step_starts[j] + r.finished_ids] = rows
            final_obs = optree.tree_unflatten(self.obs_spec, final_leaves)
            loop.carry_states(prev_extras, rewards, terminals | truncations, step_ids)
            transition = (prev_obs, prev_actions, rewards, final_obs, terminals, truncations, prev_extras, step_ids)
        actions, extras = self._act(obs, ids)
        now = time.perf_counter()
        for k, r in enumerate(requests):
            rows = slice(int(starts[k]), int(starts[k + 1]))
            self.transport.reply(r.index, actions[rows])
            self._prev[r.index] = (optree.tree_map(lambda x: x[rows], obs), actions[rows],
                                   optree.tree_map(lambda x: x[rows], extras))
            self._answered_at[r.index] = now
            self.latency_sum += now - r.received
            if r.stats is not None:
                self.actor_stats[r.index] = r.stats
        self.latency_count += len(requests)
        self.inference_calls += 1
        self.inference_rows += len(ids)
        # The actors step their environments now; meanwhile, learn from the completed steps.
        steps, episodes, results = 0, [], []
        if transition is not None:
            prev_obs, prev_actions, rewards, final_obs, terminals, truncations, prev_extras, step_ids = transition
            loop.add_step(prev_obs, prev_actions, rewards, final_obs, terminals, truncations, prev_extras, step_ids)
            steps = len(step_ids)
            for _, r in stepped:
                self.actor_env_steps[r.index] += len(r.rewards)
                episodes.extend(r.episodes)
            results = self._learn()
        return steps, episodes, results

    def _act(self, obs, ids):
        """``loop.act(obs, ids)``, padded to the batch's bucket where the executor compiles per shape (the
        padding rows: copies of the last row; their outputs dropped)."""
        n = len(ids)
        size = bucket_size(n, self.largest_batch) if self.pad_to_buckets else n
        if size == n:
            return self.loop.act(obs, ids)
        self.padded_rows += size - n
        obs, ids = pad_batch((obs, ids), size)
        return unpad(self.loop.act(obs, ids), n)

    def _learn(self):
        """The updates the learner's schedule asks for now."""
        results = []
        while self.agent.ready_to_update():
            result = self.agent.update()
            self.dropped_samples += int(result.get("dropped_samples", 0))
            results.append(result)
        return results

    # --- statistics -----------------------------------------------------------------------------------------
    @property
    def mean_batch_size(self):
        """Environment rows per inference call."""
        return self.inference_rows / max(self.inference_calls, 1)

    @property
    def mean_latency_ms(self):
        """Milliseconds from a request's arrival to its answer (batching wait and inference)."""
        return 1000.0 * self.latency_sum / max(self.latency_count, 1)
