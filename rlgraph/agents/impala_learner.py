"""The learning role of IMPALA and APPO."""
import numpy as np

from rlgraph.agents.learner import Learner
from rlgraph.utils.errors import RLGraphError

#: Keys of the unroll the learner's ``update`` API takes (besides "prev_actions"/"prev_rewards" where used).
UNROLL_KEYS = ("states", "actions", "rewards", "terminals", "truncation_values", "behaviour_log_probs",
               "behaviour_values")


class IMPALALearner(Learner):
    """V-trace learning from unrolls handed in by actors (Espeholt et al. 2018); APPO's passes and lag limit.

    ``add_items`` queues ``UnrollBuilder`` items (time-major unrolls of any number of environment columns);
    ``update()`` learns from all queued columns at once: ``num_epochs`` passes, each split into
    ``num_minibatches`` minibatches of columns (whole trajectories, shuffled per pass), one optimizer step
    each. The policy lag of a sample is the learner's version at that step minus the version that acted on
    it (carried with the sample); columns holding samples older than ``max_policy_lag`` are left out of the
    step and counted in "dropped_samples".
    """

    def __init__(self, agent):
        super().__init__(agent)
        self._rng = np.random.default_rng(agent.seed)
        self.queue = []

    def add_items(self, items):
        """Queues unrolls as ``UnrollBuilder`` emits them ({"unroll", "first", "last", "env_ids"})."""
        self.queue.append(self.to_batch(items))

    def to_batch(self, items):
        """An ``UnrollBuilder`` item batch as the ``update`` API takes it: dict with "unroll" ([T, B] arrays),
        "bootstrap" (x_T, [B] or [1, B] for recurrent networks), "policy_versions" [T, B] and, for recurrent
        networks, "initial_internal_states" (the LSTM state before step 0)."""
        agent, unroll, last = self.agent, items["unroll"], items["last"]
        keys = UNROLL_KEYS + (("prev_actions", "prev_rewards") if agent.prev_action_reward else ())
        bootstrap = dict(states=last["next_states"])
        if agent.prev_action_reward:
            bootstrap.update(prev_actions=last["bootstrap_prev_actions"], prev_rewards=last["bootstrap_prev_rewards"])
        if agent.recurrent:
            bootstrap = {k: v[None] for k, v in bootstrap.items()}
        batch = dict(unroll={k: unroll[k] for k in keys}, bootstrap=bootstrap,
                     policy_versions=unroll["weights_version"])
        if agent.recurrent:
            batch["initial_internal_states"] = tuple(items["first"]["initial_internal_states"])
        return batch

    def ready_to_update(self):
        return bool(self.queue)

    def get_state(self):
        """Counters, the minibatch shuffling generator's state and the queued unrolls."""
        return dict(super().get_state(), rng=self._rng.bit_generator.state, queue=list(self.queue))

    def set_state(self, state):
        super().set_state(state)
        self._rng.bit_generator.state = state["rng"]
        self.queue = list(state["queue"])

    def pop_batch(self):
        """All queued unrolls as one batch for ``update(batch)`` (columns joined), emptying the queue."""
        if not self.queue:
            raise RLGraphError(f"{self.agent.name}: no unroll is queued (the builder emits one per environment "
                               f"every unroll_length={self.agent.unroll_length} steps).")
        batch = self.queue[0] if len(self.queue) == 1 else _concat_columns(self.queue, self.agent.recurrent)
        self.queue = []
        return batch

    def update(self, batch=None):
        """Learns from the queued unrolls (or from ``batch``, as ``to_batch`` returns it).

        Returns:
            dict with the means over the optimizer steps taken of "loss", "grad_norm", "entropy" and
            "mean_value", and "policy_lag_mean", "policy_lag_max" (learner versions between acting and
            learning, over the samples used), "dropped_samples" and "num_updates".
        """
        return self._learn(self.pop_batch() if batch is None else batch)

    def _learn(self, batch):
        agent = self.agent
        unroll, bootstrap = batch["unroll"], batch["bootstrap"]
        initial = batch.get("initial_internal_states")
        versions = batch.get("policy_versions")
        n = unroll["rewards"].shape[1]
        if self._in_one_call(n, versions):
            return self._learn_in_one_call(unroll, bootstrap, initial, versions, n)
        results, lags, dropped = [], [], 0
        for _ in range(agent.num_epochs):
            order = self._rng.permutation(n) if agent.num_minibatches > 1 else None
            for columns in (np.array_split(order, agent.num_minibatches) if order is not None else [None]):
                if versions is not None:
                    lag = self.policy_lag(versions if columns is None else versions[:, columns])
                    if agent.max_policy_lag is not None:
                        fresh = lag.max(axis=0) <= agent.max_policy_lag
                        if not fresh.all():
                            dropped += int(lag[:, ~fresh].size)
                            if not fresh.any():
                                continue
                            columns = np.flatnonzero(fresh) if columns is None else columns[fresh]
                            lag = lag[:, fresh]
                    lags.append(lag)
                results.append(self._update_step(unroll, bootstrap, initial, columns))
        out = {k: float(np.mean([r[k] for r in results])) for k in (results[0] if results else ())}
        if lags:
            out["policy_lag_mean"] = float(np.mean(np.concatenate([lag.ravel() for lag in lags])))
            out["policy_lag_max"] = int(max(lag.max() for lag in lags))
        out["dropped_samples"] = dropped
        out["num_updates"] = len(results)
        return out

    def _in_one_call(self, n, versions):
        """Whether all of an update's optimizer steps can run in one ``execute_steps`` call: several steps,
        minibatches of equal size, and no sample past ``max_policy_lag`` even at the last step (no column is
        dropped on the way)."""
        agent = self.agent
        steps = agent.num_epochs * agent.num_minibatches
        if steps < 2 or n % agent.num_minibatches:
            return False
        if versions is not None and agent.max_policy_lag is not None and np.size(versions):
            return self.updates + steps - 1 - int(np.min(versions)) <= agent.max_policy_lag
        return True

    def _learn_in_one_call(self, unroll, bootstrap, initial, versions, n):
        """``_learn``'s optimizer steps in one executor call (``execute_steps``): the same minibatches, drawn
        from the same generator in the same order, the same results."""
        agent = self.agent
        columns = []
        for _ in range(agent.num_epochs):
            order = self._rng.permutation(n) if agent.num_minibatches > 1 else np.arange(n)
            columns.extend(np.split(order, agent.num_minibatches))
        columns = np.stack(columns)
        args = [unroll, bootstrap, self.time_percentage] + ([initial] if agent.recurrent else [])
        stacked = self.executor.execute_steps("update", columns, *args)
        out = {k: float(np.mean(np.asarray(v, np.float64))) for k, v in stacked.items()}
        if versions is not None:
            lags = [self.policy_lag(versions[:, c]) + k for k, c in enumerate(columns)]
            out["policy_lag_mean"] = float(np.mean(np.concatenate([lag.ravel() for lag in lags])))
            out["policy_lag_max"] = int(max(lag.max() for lag in lags))
        self.updates += len(columns)
        out["dropped_samples"] = 0
        out["num_updates"] = len(columns)
        return out

    def evaluate_unroll(self, batch):
        """The learner's view of a batch (as ``to_batch`` returns it) under the current weights.

        Returns:
            dict with "log_likelihood", "entropy", "value" (each [T, B]) and "bootstrap_value" [B]; right after
            acting they equal the behaviour policy's log-likelihoods and values.
        """
        args = [batch["unroll"], batch["bootstrap"]]
        if self.agent.recurrent:
            args.append(batch["initial_internal_states"])
        return self.executor.execute("evaluate_unroll", *args)

    def _update_step(self, unroll, bootstrap, initial, columns):
        """One optimizer step on the columns ``columns`` (None: all) of the unroll."""
        recurrent = self.agent.recurrent
        if columns is not None:
            unroll = {k: v[:, columns] for k, v in unroll.items()}
            bootstrap = {k: v[:, columns] if recurrent else v[columns] for k, v in bootstrap.items()}
            initial = None if initial is None else tuple(s[columns] for s in initial)
        args = [unroll, bootstrap, self.time_percentage] + ([initial] if recurrent else [])
        result = self.executor.execute("update", *args)
        self.updates += 1
        return result


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
