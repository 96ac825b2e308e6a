"""The IMPALA actor-critic loss with V-trace targets (Espeholt et al. 2018)."""
from rlgraph.components.helpers.input_checks import check_space
from rlgraph.components.helpers.v_trace_function import VTraceFunction
from rlgraph.components.loss_functions.loss_function import LossFunction
from rlgraph.utils.decorators import graph_fn, rlgraph_api
from rlgraph.utils.validation import Bool, Number, OneOf, Optional, check_args

#: Accepted values of ``reward_clipping``.
REWARD_CLIPPINGS = ("clamp_one", "soft_asymmetric", None)


class IMPALALossFunction(LossFunction):
    """V-trace actor-critic loss on unrolls with episode boundaries (Espeholt et al. 2018, section 4.2).

    Per step, with V-trace targets ``vs`` and advantages ``pg_advantages`` (constants for the gradients,
    see ``VTraceFunction``) computed from the clipped rewards and ``discounts = discount * (1 - terminals)``:

        loss_t = -weight_pg * log pi(a_t|x_t) * pg_advantages_t
                 + weight_baseline * 0.5 * (vs_t - V(x_t))^2
                 - weight_entropy * H(pi(.|x_t)).

    As in the reference implementation (deepmind/scalable_agent, experiment.py) the terms are summed over
    time (``time_reduction="sum"``); ``loss_per_item`` is that sum per trajectory [B] and ``loss`` its mean
    over the batch, i.e. the reference's total loss divided by B.

    Args:
        discount: The discount factor gamma.
        reward_clipping: "clamp_one" (clip to [-1, 1]), "soft_asymmetric" (``5 tanh(r / 5)``, times 0.3 for
            negative rewards, as in the reference) or None.
        weight_pg: Weight of the policy-gradient term.
        weight_baseline: Weight of the baseline (value) term.
        weight_entropy: Weight of the entropy bonus.
        rho_bar, rho_bar_pg, c_bar, lambda_: V-trace clipping thresholds and trace decay (``VTraceFunction``).
        time_major: Whether unrolls are [T, B] (True) or [B, T] (False).
        time_reduction: "sum" or "mean" of the per-step terms over time.
        normalize_advantages: Standardize the advantages over the whole batch (mean 0, std 1), as PPO
            implementations do (not in the IMPALA paper): the entropy bonus then weighs the same against them
            whatever the scale of the rewards and values. What is standardized is ``r_t + discount_t vs_{t+1} -
            V(x_t)``; V-trace's importance weight ``min(rho_bar_pg, pi/mu)`` multiplies the result, so a sample
            the learner's policy no longer takes (weight ~0, e.g. a replayed one) still adds no policy gradient.

    API:
        loss(log_probs [T, B], behaviour_log_probs [T, B], entropies [T, B], values [T, B],
            bootstrap_values [B], rewards [T, B], terminals [T, B]) -> loss [].
            ``log_probs``: log pi(a_t|x_t) of the taken actions under the learner's policy (gradients flow
            through it); ``behaviour_log_probs``: log mu(a_t|x_t) recorded by the actor; ``entropies``:
            H(pi(.|x_t)); ``values``: V(x_t) of the learner's baseline; ``bootstrap_values``: V(x_T);
            ``terminals[t]``: the episode ended with step t.
        loss_per_item(same arguments) -> [B], the per-trajectory losses.
    """

    default_scope = "impala-loss-function"
    __aliases__ = ("impala-loss",)

    #: The API arguments laid out as sequences, with their kinds.
    sequence_args = (("log_probs", "float"), ("behaviour_log_probs", "float"), ("entropies", "float"),
                     ("values", "float"), ("rewards", "float"), ("terminals", "flag"))
    #: What the constructor's arguments must be (``rlgraph.utils.validation``); the V-trace thresholds as
    #: ``VTraceFunction`` takes them (inf or None: no clipping).
    ARG_RULES = dict(discount=Number(min=0.0, max=1.0), reward_clipping=OneOf(*REWARD_CLIPPINGS),
                     weight_pg=Number(), weight_baseline=Number(), weight_entropy=Number(),
                     rho_bar=Optional(Number(min=0.0, finite=False)),
                     rho_bar_pg=Optional(Number(min=0.0, finite=False)),
                     c_bar=Optional(Number(min=0.0, finite=False)), lambda_=Number(min=0.0, max=1.0),
                     time_reduction=OneOf("sum", "mean"), normalize_advantages=Bool())

    def __init__(self, discount=0.99, reward_clipping="clamp_one", weight_pg=1.0, weight_baseline=0.5,
                 weight_entropy=0.01, rho_bar=1.0, rho_bar_pg=1.0, c_bar=1.0, lambda_=1.0, time_major=True,
                 time_reduction="sum", normalize_advantages=False, scope=None, **kwargs):
        args = check_args(type(self).__name__, IMPALALossFunction.ARG_RULES, dict(
            discount=discount, reward_clipping=reward_clipping, weight_pg=weight_pg, weight_baseline=weight_baseline,
            weight_entropy=weight_entropy, rho_bar=rho_bar, rho_bar_pg=rho_bar_pg, c_bar=c_bar, lambda_=lambda_,
            time_reduction=time_reduction, normalize_advantages=normalize_advantages))
        self.v_trace_function = VTraceFunction(rho_bar=rho_bar, rho_bar_pg=rho_bar_pg, c_bar=c_bar, lambda_=lambda_,
                                               time_major=time_major)
        super().__init__(self.v_trace_function, scope=scope, **kwargs)
        self.discount = args["discount"]
        self.reward_clipping = args["reward_clipping"]
        self.weight_pg, self.weight_baseline = args["weight_pg"], args["weight_baseline"]
        self.weight_entropy = args["weight_entropy"]
        self.time_major = bool(time_major)
        self.time_reduction = args["time_reduction"]
        self.normalize_advantages = args["normalize_advantages"]

    def check_input_spaces(self, input_spaces, action_space=None):
        for arg, kind in self.sequence_args:
            check_space(self, input_spaces, arg, kind, ranks="sequence", time_major=self.time_major)
        check_space(self, input_spaces, "bootstrap_values", "float", ranks="batch")

    @rlgraph_api
    def loss(self, log_probs, behaviour_log_probs, entropies, values, bootstrap_values, rewards, terminals):
        return self._graph_fn_average(self.loss_per_item(log_probs, behaviour_log_probs, entropies, values,
                                                         bootstrap_values, rewards, terminals))

    @rlgraph_api
    def loss_per_item(self, log_probs, behaviour_log_probs, entropies, values, bootstrap_values, rewards, terminals):
        rewards, discounts = self._graph_fn_clip_rewards_and_discount(rewards, terminals)
        vs, td_advantages, pg_rhos = self.v_trace_function.calc_v_trace_terms(
            log_probs, behaviour_log_probs, discounts, rewards, values, bootstrap_values)
        return self._graph_fn_loss_per_item(log_probs, entropies, values, vs, td_advantages, pg_rhos)

    def _step_losses(self, log_probs, entropies, values, vs, pg_advantages):
        """The per-step losses [T, B] (arithmetic only, so it serves both backends' graph functions)."""
        return (-self.weight_pg * log_probs * pg_advantages + self.weight_baseline * 0.5 * (vs - values) ** 2
                - self.weight_entropy * entropies)

    @graph_fn
    def _graph_fn_clip_rewards_and_discount(self, rewards, terminals):
        ops = self.ops
        if self.reward_clipping == "clamp_one":
            rewards = ops.clip(rewards, -1.0, 1.0)
        elif self.reward_clipping == "soft_asymmetric":
            squeezed = ops.tanh(rewards / 5.0) * 5.0
            rewards = ops.where(rewards < 0.0, 0.3 * squeezed, squeezed)
        return rewards, self.discount * (1.0 - ops.cast(terminals, rewards.dtype))

    @graph_fn
    def _graph_fn_loss_per_item(self, log_probs, entropies, values, vs, td_advantages, pg_rhos):
        # The importance weights apply after normalization: standardizing rho * A instead would give the samples
        # an update has made unlikely (rho ~ 0, e.g. replayed ones) the advantage -mean/std, a push away from the
        # behaviour policy that feeds on itself (seen as a collapse to one action on Pong with replay).
        per_step = self._step_losses(log_probs, entropies, values, vs, pg_rhos * self._advantages(td_advantages))
        return self._reduce_time(per_step)

    def _advantages(self, advantages):
        """The advantages [T, B] as the policy term weighs them: standardized over the batch with
        ``normalize_advantages``."""
        if not self.normalize_advantages:
            return advantages
        ops = self.ops
        return (advantages - ops.mean(advantages)) / (ops.std(advantages) + 1e-8)

    def _reduce_time(self, per_step):
        """The sum or mean (``time_reduction``) of per-step terms [T, B] over time: [B]."""
        reduce = self.ops.sum if self.time_reduction == "sum" else self.ops.mean
        return reduce(per_step, axis=0 if self.time_major else 1)
