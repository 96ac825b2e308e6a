"""The APPO agent: PPO clipping on V-trace advantages, several passes per unroll, policy-lag accounting."""
from rlgraph.agents.impala_agent import IMPALAAgent
from rlgraph.components.algorithms.appo_algorithm_component import APPOAlgorithmComponent
from rlgraph.utils.errors import RLGraphSpecError


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

    def __init__(self, state_space, action_space, num_epochs=4, num_minibatches=1, max_policy_lag=100, **kwargs):
        name = type(self).__name__
        for key, value in (("num_epochs", num_epochs), ("num_minibatches", num_minibatches)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise RLGraphSpecError(f"{name}.{key}: expected a positive int, got {value!r}.")
        if max_policy_lag is not None and (isinstance(max_policy_lag, bool) or not isinstance(max_policy_lag, int)
                                           or max_policy_lag < 0):
            raise RLGraphSpecError(f"{name}.max_policy_lag: expected an int >= 0 or None, got {max_policy_lag!r}.")
        self.num_epochs, self.num_minibatches, self.max_policy_lag = num_epochs, num_minibatches, max_policy_lag
        super().__init__(state_space, action_space, **kwargs)
