"""The APPO agent: PPO clipping on V-trace advantages, several passes per unroll, policy-lag accounting."""
from rlgraph.agents.impala_agent import IMPALAAgent
from rlgraph.components.algorithms.appo_algorithm_component import APPOAlgorithmComponent
from rlgraph.agents.impala_learner import SAMPLE_KEYS
from rlgraph.spaces import Dict, FloatBox
from rlgraph.utils.validation import Int, OneOf, Optional, check_args, spec_error

#: The root API methods of minibatches of samples (``minibatch_unit="samples"``).
SAMPLE_METHODS = ("calc_targets", "update_samples")


class APPOAgent(IMPALAAgent):
    """Asynchronous PPO as in Sample Factory (Petrenko et al. 2020): ``IMPALAAgent`` with PPO's clipped
    surrogate (Schulman et al. 2017) on V-trace advantages (Espeholt et al. 2018), ``APPOAlgorithmComponent``.

    Each unroll is learned from in ``num_epochs`` passes, each split into ``num_minibatches`` minibatches; every
    minibatch is one optimizer step. A minibatch holds either samples (time steps of any environment, shuffled
    per epoch, as PPO draws them; V-trace's targets and advantages computed for the whole unrolls with the
    weights at the epoch's start) or whole trajectories (environment columns, shuffled per epoch; V-trace
    recomputed in each step on the minibatch's trajectories, as Sample Factory does). Minibatches of a few
    trajectories are strongly correlated samples: on pixel Catch (``configs/appo_catch.json``, 4 seeds) APPO
    needed a median of 111k env steps to a mean return of 3 with trajectory minibatches against 66k with
    sample minibatches (the single-file PPO, ``benchmarks/ppo_atari.py``: 74k; ``docs/atari.md``). The
    policy lag of a sample is the number of updates between the step that produced it (its policy version)
    and the optimizer step that learns from it; samples (with trajectory minibatches: columns holding
    samples) older than ``max_policy_lag`` are left out of that step, and counted in "dropped_samples".

    Args:
        num_epochs: Passes over each unroll.
        num_minibatches: Minibatches per pass.
        max_policy_lag: The largest policy lag learned from (None: no limit).
        minibatch_unit: "samples", "trajectories" or "auto": samples where the network is feed-forward (no LSTM,
            no previous action and reward inputs), the loss averages over time steps (``time_reduction``
            "mean") and there are several minibatches; trajectories otherwise.
        **kwargs: See ``IMPALAAgent``; ``loss_spec`` takes ``APPOLossFunction``'s keywords (``clip_ratio``,
            ``value_clipping``, ``normalize_advantages``, weights, V-trace thresholds).
    """

    __aliases__ = ("appo",)

    algorithm_class = APPOAlgorithmComponent
    #: What the checked constructor arguments accept (besides IMPALA's).
    ARG_RULES = dict(num_epochs=Int(min=1), num_minibatches=Int(min=1), max_policy_lag=Optional(Int(min=0)),
                     minibatch_unit=OneOf("auto", "samples", "trajectories"))

    def __init__(self, state_space, action_space, num_epochs=4, num_minibatches=1, max_policy_lag=100,
                 minibatch_unit="auto", **kwargs):
        args = check_args(type(self).__name__, APPOAgent.ARG_RULES, dict(
            num_epochs=num_epochs, num_minibatches=num_minibatches, max_policy_lag=max_policy_lag,
            minibatch_unit=minibatch_unit))
        self.num_epochs = args["num_epochs"]
        self.max_policy_lag = args["max_policy_lag"]
        self.minibatch_unit = args["minibatch_unit"]
        replay, loss_spec = kwargs.get("replay_proportion"), kwargs.get("loss_spec")
        if isinstance(replay, (int, float)) and replay > 0 and isinstance(loss_spec, dict) and \
                loss_spec.get("normalize_advantages") is True:
            raise spec_error(type(self).__name__, "replay_proportion",
                             f"{replay} with loss_spec.normalize_advantages: APPO standardizes its advantages after "
                             f"V-trace's importance weights (as Sample Factory does), which turns replayed samples "
                             f"the policy no longer takes into a push away from them. Use replay without "
                             f"normalize_advantages, or IMPALA (which weighs after standardizing).")
        super().__init__(state_space, action_space, num_minibatches=args["num_minibatches"], **kwargs)

    def build_root(self):
        root, spaces = super().build_root()
        why_not = ("the network is recurrent" if self.recurrent else
                   "the network takes the previous action and reward" if self.prev_action_reward else
                   "loss_spec.time_reduction is 'sum'" if root.loss_function.time_reduction == "sum" else None)
        if self.minibatch_unit == "samples" and why_not:
            raise spec_error(type(self).__name__, "minibatch_unit", f"'samples' needs whole trajectories: {why_not} "
                             f"(use 'trajectories' or 'auto').")
        if self.minibatch_unit == "auto":
            self.minibatch_unit = "samples" if why_not is None and self.num_minibatches > 1 else "trajectories"
        if self.minibatch_unit == "samples":
            unroll = spaces["unroll"]
            spaces["samples"] = Dict({k: unroll[k] for k in SAMPLE_KEYS}, add_batch_rank=True, add_time_rank=True,
                                     time_major=True)
            spaces["targets"] = Dict({k: FloatBox() for k in ("vs", "advantages", "log_probs", "values")},
                                     add_batch_rank=True, add_time_rank=True, time_major=True)
        return root, spaces

    def learner_api_methods(self):
        if self.minibatch_unit == "samples":
            return None
        return [name for name in self.root.api_methods if name not in SAMPLE_METHODS]
