"""The asynchronous PPO loss: PPO clipping on V-trace advantages (Sample Factory, Petrenko et al. 2020)."""
from rlgraph.components.helpers.input_checks import check_space
from rlgraph.components.loss_functions.impala_loss_function import IMPALALossFunction
from rlgraph.utils.decorators import graph_fn, rlgraph_api
from rlgraph.utils.errors import RLGraphSpaceError
from rlgraph.utils.validation import Number, Optional, check_args


class APPOLossFunction(IMPALALossFunction):
    """PPO's clipped surrogate (Schulman et al. 2017) on V-trace advantages, as in Sample Factory (APPO).

    V-trace (``VTraceFunction``) corrects the targets ``vs`` and advantages ``A_t = pg_advantages_t`` for the
    lag between the actors' (behaviour) policy and the learner's; PPO's ratio clipping keeps the update
    close to the behaviour policy. Per step, with ``ratio_t = pi(a_t|x_t) / mu(a_t|x_t)``:

        policy_t = -min(ratio_t A_t, clip(ratio_t, 1 - clip_ratio, 1 + clip_ratio) A_t),
        value_t  = 0.5 (V(x_t) - vs_t)^2, or with ``value_clipping`` c (PPO2 / Sample Factory):
                   0.5 max((V(x_t) - vs_t)^2, (V_old(x_t) + clip(V(x_t) - V_old(x_t), -c, c) - vs_t)^2),
        loss_t   = weight_pg policy_t + weight_baseline value_t - weight_entropy H(pi(.|x_t)).

    ``V_old`` are the actor's values (``behaviour_values``). The terms are averaged over time by default
    (``time_reduction="mean"``), so ``loss`` is the mean over all steps of the batch.

    Args:
        clip_ratio: PPO's epsilon.
        value_clipping: Clip range c of the value update around ``behaviour_values``, or None (no clipping).
        **kwargs: The arguments of ``IMPALALossFunction`` (discount, reward_clipping, weights, V-trace
            thresholds, time_major, time_reduction, normalize_advantages).

    API:
        loss(log_probs [T, B], behaviour_log_probs [T, B], entropies [T, B], values [T, B],
            bootstrap_values [B], rewards [T, B], terminals [T, B], behaviour_values [T, B] = None) -> loss [].
            Arguments as for ``IMPALALossFunction``; ``behaviour_values`` (needed with ``value_clipping``):
            V(x_t) as the actor computed it.
        loss_per_item(same arguments) -> [B], the per-trajectory losses.
        targets(log_probs, behaviour_log_probs, values, bootstrap_values, rewards, terminals) -> (vs [T, B],
            pg_advantages [T, B]): V-trace's targets (rewards clipped as configured).
        loss_from_targets(log_probs, behaviour_log_probs, entropies, values, vs, advantages, behaviour_values=None)
            -> loss []: the loss on given targets; its batch may be any [T, B] set of samples (e.g. [1, N]).
        ratio_stats(log_probs, reference_log_probs) -> dict with "approx_kl" (the mean of
            ``(ratio - 1) - log(ratio)``, Schulman 2020's "k3" estimate of KL(reference || pi), unbiased where the
            actions were drawn from the reference) and "clip_fraction" (the share of steps with
            ``|ratio - 1| > clip_ratio``), where ``ratio = pi / reference``: how far an update has moved the
            policy, as CleanRL and RLlib report it.
    """

    default_scope = "appo-loss-function"
    __aliases__ = ("appo-loss",)
    #: What the constructor's arguments must be (``rlgraph.utils.validation``), besides IMPALA's.
    ARG_RULES = dict(clip_ratio=Number(min=0.0), value_clipping=Optional(Number(min=0.0)))

    def __init__(self, clip_ratio=0.2, value_clipping=None, time_reduction="mean", scope=None, **kwargs):
        args = check_args(type(self).__name__, APPOLossFunction.ARG_RULES,
                          dict(clip_ratio=clip_ratio, value_clipping=value_clipping))
        super().__init__(time_reduction=time_reduction, scope=scope, **kwargs)
        self.clip_ratio, self.value_clipping = args["clip_ratio"], args["value_clipping"]

    def check_input_spaces(self, input_spaces, action_space=None):
        super().check_input_spaces(input_spaces, action_space)
        check_space(self, input_spaces, "behaviour_values", "float", ranks="sequence", time_major=self.time_major,
                    required=False)
        if self.value_clipping is not None and input_spaces.get("behaviour_values") is None:
            raise RLGraphSpaceError(f"{type(self).__name__}, API method 'loss'/'loss_per_item', argument "
                                    f"'behaviour_values': value_clipping={self.value_clipping} needs the actor's "
                                    f"values V_old(x_t) [T, B].")

    @rlgraph_api
    def loss(self, log_probs, behaviour_log_probs, entropies, values, bootstrap_values, rewards, terminals,
             behaviour_values=None):
        return self._graph_fn_average(self.loss_per_item(log_probs, behaviour_log_probs, entropies, values,
                                                         bootstrap_values, rewards, terminals, behaviour_values))

    @rlgraph_api
    def loss_per_item(self, log_probs, behaviour_log_probs, entropies, values, bootstrap_values, rewards, terminals,
                      behaviour_values=None):
        vs, pg_advantages = self.targets(log_probs, behaviour_log_probs, values, bootstrap_values, rewards, terminals)
        return self._graph_fn_ppo_loss_per_item(log_probs, behaviour_log_probs, entropies, values, behaviour_values,
                                                vs, pg_advantages)

    @rlgraph_api
    def targets(self, log_probs, behaviour_log_probs, values, bootstrap_values, rewards, terminals):
        """V-trace's value targets ``vs`` and policy-gradient advantages [T, B] (constants for gradients)."""
        rewards, discounts = self._graph_fn_clip_rewards_and_discount(rewards, terminals)
        return self.v_trace_function.calc_v_trace_values(log_probs, behaviour_log_probs, discounts, rewards, values,
                                                         bootstrap_values)

    @rlgraph_api
    def loss_from_targets(self, log_probs, behaviour_log_probs, entropies, values, vs, advantages,
                          behaviour_values=None):
        """``loss`` with the targets and advantages given (as ``targets`` computed them, e.g. once for a whole
        unroll before it is split into minibatches of samples): the mean over all steps of the batch."""
        return self._graph_fn_average(self._graph_fn_ppo_loss_per_item(
            log_probs, behaviour_log_probs, entropies, values, behaviour_values, vs, advantages))

    @rlgraph_api
    def ratio_stats(self, log_probs, reference_log_probs):
        return self._graph_fn_ratio_stats(log_probs, reference_log_probs)

    @graph_fn
    def _graph_fn_ratio_stats(self, log_probs, reference_log_probs):
        ops = self.ops
        log_ratio = ops.stop_gradient(log_probs - reference_log_probs)
        ratio = ops.exp(log_ratio)
        outside = ops.cast(ops.abs(ratio - 1.0) > self.clip_ratio, "float32")
        return dict(approx_kl=ops.mean((ratio - 1.0) - log_ratio), clip_fraction=ops.mean(outside))

    @graph_fn
    def _graph_fn_ppo_loss_per_item(self, log_probs, behaviour_log_probs, entropies, values, behaviour_values, vs,
                                    advantages):
        ops = self.ops
        advantages = self._advantages(advantages)
        ratio = ops.exp(log_probs - ops.stop_gradient(behaviour_log_probs))
        clipped_ratio = ops.clip(ratio, 1.0 - self.clip_ratio, 1.0 + self.clip_ratio)
        policy = -ops.minimum(ratio * advantages, clipped_ratio * advantages)
        value = ops.square(values - vs)
        if self.value_clipping is not None:
            clipped = behaviour_values + ops.clip(values - behaviour_values, -self.value_clipping, self.value_clipping)
            value = ops.maximum(value, ops.square(clipped - vs))
        per_step = self.weight_pg * policy + self.weight_baseline * 0.5 * value - self.weight_entropy * entropies
        return self._reduce_time(per_step)
