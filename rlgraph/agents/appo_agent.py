"""The APPO agent: PPO clipping on V-trace advantages, several passes per unroll, policy-lag accounting."""
from rlgraph.agents.impala_agent import IMPALAAgent
from rlgraph.components.algorithms.appo_algorithm_component import APPOAlgorithmComponent
from rlgraph.utils.validation import Int, Optional, check_args


class APPOAgent(IMPALAAgent):
    """Asynchronous PPO as in Sample Factory (Petrenko et al. 2020): ``IMPALAAgent`` with PPO's clipped
    surrogate (Schulman et al. 2017) on V-trace advantages (Espeholt et al. 2018), ``APPOAlgorithmComponent``.

    Each unroll is learned from in ``num_epochs`` passes, each split into ``num_minibatches`` minibatches of
    environment columns (whole trajectories, shuffled per epoch); every minibatch is one optimizer step. The
    policy lag of a sample is the number of updates between the step that produced it (its policy version)
    and the optimizer step that learns from it; columns holding samples older than ``max_policy_lag`` are
    left out of that step, and counted in "dropped_samples" of the update's results.

    Args:
        num_epochs: Passes over each unroll.
        num_minibatches: Minibatches (of environment columns) per pass.
        max_policy_lag: The largest policy lag learned from (None: no limit).
        **kwargs: See ``IMPALAAgent``; ``loss_spec`` takes ``APPOLossFunction``'s keywords (``clip_ratio``,
            ``value_clipping``, ``normalize_advantages``, weights, V-trace thresholds).
    """

    __aliases__ = ("appo",)

    algorithm_class = APPOAlgorithmComponent
    #: What the checked constructor arguments accept (besides IMPALA's).
    ARG_RULES = dict(num_epochs=Int(min=1), num_minibatches=Int(min=1), max_policy_lag=Optional(Int(min=0)))

    def __init__(self, state_space, action_space, num_epochs=4, num_minibatches=1, max_policy_lag=100, **kwargs):
        args = check_args(type(self).__name__, APPOAgent.ARG_RULES, dict(
            num_epochs=num_epochs, num_minibatches=num_minibatches, max_policy_lag=max_policy_lag))
        self.num_epochs, self.num_minibatches = args["num_epochs"], args["num_minibatches"]
        self.max_policy_lag = args["max_policy_lag"]
        super().__init__(state_space, action_space, **kwargs)
