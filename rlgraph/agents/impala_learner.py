"""The learning role of IMPALA and APPO."""
import numpy as np
import optree

from rlgraph.agents.learner import Learner
from rlgraph.utils.errors import RLGraphError

#: Keys of the unroll the learner's ``update`` API takes (besides "prev_actions"/"prev_rewards" where used).
UNROLL_KEYS = ("states", "actions", "rewards", "terminals", "truncation_values", "behaviour_log_probs",
               "behaviour_values")
#: Keys of the unroll that ``update_samples`` (minibatches of samples) takes.
SAMPLE_KEYS = ("states", "actions")


class IMPALALearner(Learner):
    """V-trace learning from unrolls handed in by actors (Espeholt et al. 2018); APPO's passes and lag limit.

    ``add_items`` queues ``UnrollBuilder`` items (time-major unrolls of any number of environment columns);
    ``update()`` learns from all queued columns at once: ``num_epochs`` passes, each split into
    ``num_minibatches`` minibatches, one optimizer step each: of columns (whole trajectories, shuffled per
    pass) or, with APPO's ``minibatch_unit="samples"``, of time steps of any column (``_learn_samples``). The
    policy lag of a sample is the learner's version at that step minus the version that acted on it (carried
    with the sample); samples (columns holding them) older than ``max_policy_lag`` are left out of the step
    and counted in "dropped_samples". Its schedule: an update is due once ``batch_columns`` environment columns
    are queued (1 locally, where the builder emits all environments' unrolls at once; the config's
    ``environment_spec.num_envs`` where actors elsewhere hand in parts of the batch, ``set_batch_columns``), or
    ``max_pending`` unroll batches.

    Experience replay (``replay_proportion`` p > 0; Schmitt et al. 2019, "Off-Policy Actor-Critic with Shared
    Experience Replay", and RLlib's IMPALA ``replay_proportion``): every batch learned from is kept in a ring of
    the last ``replay_slots`` batches, and after the k-th new batch the learner replays batches drawn uniformly
    from the ring until it has replayed floor(k p) in all (p = 0.5: one replay after every second batch), each
    learned from as a new batch is. V-trace corrects for the replayed batches' older behaviour policy; APPO's
    ``max_policy_lag`` applies to new batches only (replayed ones are old by design).

    Args:
        seed: Seeds the minibatch shuffling.
        recurrent: Whether the network is recurrent (unrolls carry the initial internal states).
        prev_action_reward: Whether the network sees the previous action and reward.
        unroll_length: The unroll length (for messages).
        num_epochs, num_minibatches, minibatch_unit, max_policy_lag: APPO's passes (IMPALA: 1, 1, None).
        replay_proportion: Replayed batches per new batch (0: no replay).
        replay_slots: The batches the replay keeps (the newest).
        **kwargs: See ``Learner``.
    """

    def __init__(self, executor, name="Learner", schedule_timesteps=None, seed=0, recurrent=False,
                 prev_action_reward=False, unroll_length=None, num_epochs=1, num_minibatches=1,
                 minibatch_unit="trajectories", max_policy_lag=None, replay_proportion=0.0, replay_slots=100,
                 learning_rate=None):
        super().__init__(executor, name, schedule_timesteps, learning_rate)
        self.recurrent, self.prev_action_reward = bool(recurrent), bool(prev_action_reward)
        self.unroll_length = unroll_length
        self.num_epochs, self.num_minibatches = int(num_epochs), int(num_minibatches)
        self.minibatch_unit, self.max_policy_lag = minibatch_unit, max_policy_lag
        self.replay_proportion, self.replay_slots = float(replay_proportion), int(replay_slots)
        self._rng = np.random.default_rng(seed)
        self.queue = []
        self.batch_columns, self.max_pending = 1, None
        self.forget_replay()

    @classmethod
    def settings_of(cls, agent):
        return dict(super().settings_of(agent), seed=agent.seed, recurrent=agent.recurrent,
                    prev_action_reward=agent.prev_action_reward, unroll_length=agent.unroll_length,
                    num_epochs=agent.num_epochs, num_minibatches=agent.num_minibatches,
                    minibatch_unit=agent.minibatch_unit, max_policy_lag=agent.max_policy_lag,
                    replay_proportion=agent.replay_proportion, replay_slots=agent.replay_slots)

    def add_items(self, items):
        """Queues unrolls as ``UnrollBuilder`` emits them ({"unroll", "first", "last", "env_ids"})."""
        self.queue.append(self.to_batch(items))

    def to_batch(self, items):
        """An ``UnrollBuilder`` item batch as the ``update`` API takes it: dict with "unroll" ([T, B] arrays),
        "bootstrap" (x_T, [B] or [1, B] for recurrent networks), "policy_versions" [T, B] and, for recurrent
        networks, "initial_internal_states" (the LSTM state before step 0)."""
        unroll, last = items["unroll"], items["last"]
        keys = UNROLL_KEYS + (("prev_actions", "prev_rewards") if self.prev_action_reward else ())
        bootstrap = dict(states=last["next_states"])
        if self.prev_action_reward:
            bootstrap.update(prev_actions=last["bootstrap_prev_actions"], prev_rewards=last["bootstrap_prev_rewards"])
        if self.recurrent:
            bootstrap = {k: v[None] for k, v in bootstrap.items()}
        batch = dict(unroll={k: unroll[k] for k in keys}, bootstrap=bootstrap,
                     policy_versions=unroll["weights_version"])
        if self.recurrent:
            batch["initial_internal_states"] = tuple(items["first"]["initial_internal_states"])
        return batch

    @property
    def queued_columns(self):
        """Environment columns of the queued unrolls."""
        return sum(b["unroll"]["rewards"].shape[1] for b in self.queue)

    @property
    def pending_items(self):
        return len(self.queue)

    def set_batch_columns(self, columns, max_pending=None):
        self.batch_columns = max(1, int(columns))
        self.max_pending = None if max_pending is None else int(max_pending)

    def updates_due(self):
        """1 once ``batch_columns`` environment columns (or ``max_pending`` unroll batches) are queued: an
        update learns from all of them."""
        if not self.queue:
            return 0
        full = self.max_pending is not None and len(self.queue) >= self.max_pending
        return int(full or self.queued_columns >= self.batch_columns)

    def get_state(self):
        """Counters, the minibatch shuffling generator's state, the queued unrolls and the replay's batches."""
        return dict(super().get_state(), rng=self._rng.bit_generator.state, queue=list(self.queue),
                    replay=dict(batches=list(self._replay), new_batches=self._new_batches, replayed=self._replayed))

    def get_state_without_replay(self):
        """``get_state`` without the replay (a run resumed from it starts with an empty one)."""
        return {k: v for k, v in self.get_state().items() if k != "replay"}

    def forget_replay(self):
        # The replay: a ring of batches (the k-th new batch goes to slot k mod replay_slots), the new batches
        # learned from and the batches replayed so far.
        self._replay, self._new_batches, self._replayed = [], 0, 0

    def set_state(self, state):
        super().set_state(state)
        self._rng.bit_generator.state = state["rng"]
        self.queue = list(state["queue"])
        replay = state.get("replay")
        if replay is None:
            self.forget_replay()
        else:
            self._replay = list(replay["batches"])
            self._new_batches, self._replayed = int(replay["new_batches"]), int(replay["replayed"])

    @property
    def replay_size(self):
        """The batches the replay holds."""
        return len(self._replay)

    def pop_batch(self):
        """All queued unrolls as one batch for ``update(batch)`` (columns joined), emptying the queue."""
        if not self.queue:
            raise RLGraphError(f"{self.name}: no unroll is queued (the builder emits one per environment "
                               f"every unroll_length={self.unroll_length} steps).")
        batch = self.queue[0] if len(self.queue) == 1 else _concat_columns(self.queue, self.recurrent)
        self.queue = []
        return batch

    def update(self, batch=None):
        """Learns from the queued unrolls (or from ``batch``, as ``to_batch`` returns it), then from the replayed
        batches due (``replay_proportion``).

        Returns:
            dict with the means over the optimizer steps taken (new and replayed batches) of "loss", "grad_norm",
            "entropy" and "mean_value", and "policy_lag_mean", "policy_lag_max" (learner versions between acting
            and learning, over the new samples used), "dropped_samples", "num_updates" and "queue_depth" (the
            unroll batches this update learned from: queued since the last one, or 1 for a ``batch`` given); with
            replay also "replayed_batches" (this update's) and "replay_policy_lag_mean" (over the replayed
            samples); and "learning_rate" (the schedule's value now, ``Learner.schedule_results``).
        """
        depth = len(self.queue) if batch is None else 1
        batch = self.pop_batch() if batch is None else batch
        results, lags, dropped = self._learn(batch, self.max_policy_lag)
        out = {}
        if self.replay_proportion > 0:
            replayed, replay_lags = self._learn_replay(batch)
            results += replayed
            out["replayed_batches"] = len(replay_lags)
            if replay_lags:
                out["replay_policy_lag_mean"] = float(np.mean(np.concatenate(replay_lags)))
        out = dict(_summary(results, lags, dropped), **out)
        out["queue_depth"] = depth
        out.update(self.schedule_results())
        return out

    def _learn_replay(self, batch):
        """Keeps ``batch`` in the replay's ring, then learns from the replayed batches now due: floor(k p) in all
        after k new batches. Returns the optimizer steps' results and the replayed batches' policy lags (one array
        per batch, when it was drawn)."""
        # Read-only arrays are views of buffers the batch arrived in (Ray's object store): kept, they would pin them.
        batch = optree.tree_map(lambda x: x.copy() if isinstance(x, np.ndarray) and not x.flags.writeable else x,
                                batch, none_is_leaf=True)
        if len(self._replay) < self.replay_slots:
            self._replay.append(batch)
        else:
            self._replay[self._new_batches % self.replay_slots] = batch
        self._new_batches += 1
        due = int(np.floor(self._new_batches * self.replay_proportion + 1e-9)) - self._replayed
        results, lags = [], []
        for _ in range(due):
            old = self._replay[int(self._rng.integers(len(self._replay)))]
            lags.append(np.ravel(self.policy_lag(old["policy_versions"])))
            results += self._learn(old, None)[0]
            self._replayed += 1
        return results, lags

    def _learn(self, batch, max_lag):
        """The optimizer steps of one batch, samples past ``max_lag`` left out: (their results, the policy lags of
        the samples used, the samples dropped)."""
        unroll, bootstrap = batch["unroll"], batch["bootstrap"]
        initial = batch.get("initial_internal_states")
        versions = batch.get("policy_versions")
        n = unroll["rewards"].shape[1]
        have, unit = ((unroll["rewards"].size, "samples") if self.minibatch_unit == "samples" else
                      (n, "environment columns (trajectories)"))
        if have < self.num_minibatches:
            raise RLGraphError(
                f"{self.name}: num_minibatches={self.num_minibatches} is more than the batch's {have} {unit}: "
                f"each minibatch needs at least one; use at most {have} (or more environments per batch).")
        if self.minibatch_unit == "samples":
            return self._learn_samples(unroll, bootstrap, versions, max_lag)
        if self._in_one_call(n, versions, max_lag):
            return self._learn_in_one_call(unroll, bootstrap, initial, versions, n)
        results, lags, dropped = [], [], 0
        for _ in range(self.num_epochs):
            order = self._rng.permutation(n) if self.num_minibatches > 1 else None
            for columns in (np.array_split(order, self.num_minibatches) if order is not None else [None]):
                if versions is not None:
                    lag = self.policy_lag(versions if columns is None else versions[:, columns])
                    if max_lag is not None:
                        fresh = lag.max(axis=0) <= max_lag
                        if not fresh.all():
                            dropped += int(lag[:, ~fresh].size)
                            if not fresh.any():
                                continue
                            columns = np.flatnonzero(fresh) if columns is None else columns[fresh]
                            lag = lag[:, fresh]
                    lags.append(lag)
                results.append(self._update_step(unroll, bootstrap, initial, columns))
        return results, lags, dropped

    def _in_one_call(self, n, versions, max_lag, steps=None):
        """Whether ``steps`` optimizer steps (default: all of an update's) on minibatches of ``n`` columns or
        samples can run in one ``execute_steps`` call: several steps, minibatches of equal size, and no sample
        past ``max_lag`` even at the last step (none is dropped on the way)."""
        steps = self.num_epochs * self.num_minibatches if steps is None else steps
        if steps < 2 or n % self.num_minibatches:
            return False
        if versions is not None and max_lag is not None and np.size(versions):
            return self.updates + steps - 1 - int(np.min(versions)) <= max_lag
        return True

    def _learn_in_one_call(self, unroll, bootstrap, initial, versions, n):
        """``_learn``'s optimizer steps in one executor call (``execute_steps``): the same minibatches, drawn
        from the same generator in the same order, the same results."""
        columns = []
        for _ in range(self.num_epochs):
            order = self._rng.permutation(n) if self.num_minibatches > 1 else np.arange(n)
            columns.extend(np.split(order, self.num_minibatches))
        columns = np.stack(columns)
        args = [unroll, bootstrap, self.time_percentage] + ([initial] if self.recurrent else [])
        stacked = self.executor.execute_steps("update", columns, *args)
        lags = [] if versions is None else [self.policy_lag(versions[:, c]) + k for k, c in enumerate(columns)]
        self.updates += len(columns)
        return [{k: v[i] for k, v in stacked.items()} for i in range(len(columns))], lags, 0

    def _learn_samples(self, unroll, bootstrap, versions, max_lag):
        """``_learn`` with minibatches of samples: per epoch, V-trace's targets for the whole unrolls with the
        current weights (``calc_targets``), then ``num_minibatches`` optimizer steps (``update_samples``) on
        shuffled samples of any time step and environment, given to the graph as [1, N]. PPO's ratio is taken
        against the learner's policy before the update (its log-likelihoods and values of the first epoch).
        Samples past ``max_lag`` at their step are left out of it (counted in "dropped_samples")."""
        size = unroll["rewards"].size
        flat = {k: unroll[k].reshape((1, size) + unroll[k].shape[2:]) for k in SAMPLE_KEYS}
        flat_versions = None if versions is None else np.asarray(versions).reshape(-1)
        results, lags, dropped = [], [], 0
        proximal = None
        for _ in range(self.num_epochs):
            targets = self.executor.execute("calc_targets", unroll, bootstrap)
            targets = {k: np.asarray(v).reshape(1, size) for k, v in targets.items()}
            if proximal is None:  # The policy before this update: the reference of PPO's ratio in every epoch.
                proximal = dict(log_probs=targets["log_probs"], values=targets["values"])
            targets.update(proximal)
            steps = np.array_split(self._rng.permutation(size), self.num_minibatches)
            if self._in_one_call(size, flat_versions, max_lag, len(steps)):
                stacked = self.executor.execute_steps("update_samples", np.stack(steps), flat, targets,
                                                      self.time_percentage)
                results.extend({k: v[i] for k, v in stacked.items()} for i in range(len(steps)))
                if flat_versions is not None:
                    lags.extend(self.policy_lag(flat_versions[rows]) + k for k, rows in enumerate(steps))
                self.updates += len(steps)
                continue
            for rows in steps:
                if flat_versions is not None:
                    lag = self.policy_lag(flat_versions[rows])
                    if max_lag is not None and (lag > max_lag).any():
                        fresh = lag <= max_lag
                        dropped += int((~fresh).sum())
                        rows, lag = rows[fresh], lag[fresh]
                        if not rows.size:
                            continue
                    lags.append(lag)
                results.append(self.executor.execute(
                    "update_samples", {k: v[:, rows] for k, v in flat.items()},
                    {k: v[:, rows] for k, v in targets.items()}, self.time_percentage))
                self.updates += 1
        return results, lags, dropped

    def evaluate_unroll(self, batch):
        """The learner's view of a batch (as ``to_batch`` returns it) under the current weights.

        Returns:
            dict with "log_likelihood", "entropy", "value" (each [T, B]) and "bootstrap_value" [B]; right after
            acting they equal the behaviour policy's log-likelihoods and values.
        """
        args = [batch["unroll"], batch["bootstrap"]]
        if self.recurrent:
            args.append(batch["initial_internal_states"])
        return self.executor.execute("evaluate_unroll", *args)

    def _update_step(self, unroll, bootstrap, initial, columns):
        """One optimizer step on the columns ``columns`` (None: all) of the unroll."""
        recurrent = self.recurrent
        if columns is not None:
            unroll = {k: v[:, columns] for k, v in unroll.items()}
            bootstrap = {k: v[:, columns] if recurrent else v[columns] for k, v in bootstrap.items()}
            initial = None if initial is None else tuple(s[columns] for s in initial)
        args = [unroll, bootstrap, self.time_percentage] + ([initial] if recurrent else [])
        result = self.executor.execute("update", *args)
        self.updates += 1
        return result


def _summary(results, lags, dropped):
    """An update's results: the means of the optimizer steps' outputs, the policy lags over the samples used,
    the dropped samples and the number of steps."""
    out = {k: float(np.mean([np.asarray(r[k], np.float64) for r in results])) for k in (results[0] if results else ())}
    if lags:
        out["policy_lag_mean"] = float(np.mean(np.concatenate([np.ravel(lag) for lag in lags])))
        out["policy_lag_max"] = int(max(np.max(lag) for lag in lags))
    out["dropped_samples"] = dropped
    out["num_updates"] = len(results)
    return out


def _concat_columns(batches, recurrent):
    """Joins batches of unrolls along the column (environment) axis."""
    def cat(axis, *xs):
        return np.concatenate(xs, axis=axis)
    out = dict(unroll={k: cat(1, *[b["unroll"][k] for b in batches]) for k in batches[0]["unroll"]},
               bootstrap={k: cat(1 if recurrent else 0, *[b["bootstrap"][k] for b in batches])
                          for k in batches[0]["bootstrap"]},
               policy_versions=cat(1, *[b["policy_versions"] for b in batches]))
    if recurrent:
        out["initial_internal_states"] = tuple(cat(0, *[b["initial_internal_states"][i] for b in batches])
                                               for i in range(2))
    return out
