"""V-trace off-policy value targets and policy-gradient advantages (Espeholt et al. 2018)."""
from rlgraph.components.component import Component
from rlgraph.components.helpers.input_checks import check_number, check_space
from rlgraph.components.helpers.sequence_helper import SequenceHelper
from rlgraph.utils.decorators import graph_fn, rlgraph_api


class VTraceFunction(Component):
    """V-trace targets ``v_s`` (Espeholt et al. 2018, IMPALA, eq. 1) and the advantages of its policy gradient.

    With ``rho_t = pi(a_t|x_t) / mu(a_t|x_t)``, ``clipped_rho_t = min(rho_bar, rho_t)`` and
    ``c_t = lambda * min(c_bar, rho_t)``:

        delta_t = clipped_rho_t * (r_t + discount_t V(x_{t+1}) - V(x_t)),
        v_s = V(x_s) + sum_{t>=s} (prod_{i=s}^{t-1} discount_i c_i) delta_t        (eq. 1, as a recursion:
        v_s - V(x_s) = delta_s + discount_s c_s (v_{s+1} - V(x_{s+1})), v_T = V(x_T) = bootstrap_values),
        pg_advantages_s = min(rho_bar_pg, rho_s) * (r_s + discount_s v_{s+1} - V(x_s)).

    ``discount_t`` already includes episode ends: ``gamma * (1 - terminal_t)``. As in the reference
    implementation (deepmind/scalable_agent, vtrace.py) both outputs are constants for gradients.

    Args:
        rho_bar: Clipping threshold of the importance weights in the temporal differences (None: none).
        rho_bar_pg: Clipping threshold of the importance weights in the policy-gradient advantages (None:
            none).
        c_bar: Clipping threshold of the trace-cutting weights ``c_t`` (None: none).
        lambda_: Mixes in TD(lambda)-style trace decay, ``c_t = lambda_ * min(c_bar, rho_t)`` (paper, Remark 2).
        time_major: Whether sequences are [T, B] (True) or [B, T] (False).

    API:
        calc_v_trace_values(log_probs_target [T, B], log_probs_behaviour [T, B], discounts [T, B],
            rewards [T, B], values [T, B], bootstrap_values [B]) -> (vs [T, B], pg_advantages [T, B]).
            ``log_probs_*`` are the log-likelihoods of the taken actions under the learner (target) and
            the actor (behaviour) policy, ``values`` = V(x_t) and ``bootstrap_values`` = V(x_T).
        calc_v_trace_terms(same arguments) -> (vs [T, B], td_advantages [T, B], clipped_pg_rhos [T, B]): the
            advantages' two factors, ``pg_advantages = clipped_pg_rhos * td_advantages`` with
            ``td_advantages_s = r_s + discount_s v_{s+1} - V(x_s)``, for losses that transform the advantages
            before weighting them (normalized advantages).
    """

    default_scope = "v-trace-function"

    def __init__(self, rho_bar=1.0, rho_bar_pg=1.0, c_bar=1.0, lambda_=1.0, time_major=True, scope=None, **kwargs):
        self.sequence_helper = SequenceHelper(time_major=time_major)
        super().__init__(self.sequence_helper, scope=scope, **kwargs)
        name = type(self).__name__
        self.rho_bar = check_number(name, "rho_bar", rho_bar, low=0.0, allow_none=True)
        self.rho_bar_pg = check_number(name, "rho_bar_pg", rho_bar_pg, low=0.0, allow_none=True)
        self.c_bar = check_number(name, "c_bar", c_bar, low=0.0, allow_none=True)
        self.lambda_ = check_number(name, "lambda_", lambda_, 0.0, 1.0)
        self.time_major = bool(time_major)

    def check_input_spaces(self, input_spaces, action_space=None):
        for arg in ("log_probs_target", "log_probs_behaviour", "discounts", "rewards", "values"):
            check_space(self, input_spaces, arg, "float", ranks="sequence", time_major=self.time_major)
        check_space(self, input_spaces, "bootstrap_values", "float", ranks="batch")

    @rlgraph_api
    def calc_v_trace_values(self, log_probs_target, log_probs_behaviour, discounts, rewards, values,
                            bootstrap_values):
        vs, td_advantages, clipped_pg_rhos = self.calc_v_trace_terms(log_probs_target, log_probs_behaviour, discounts,
                                                                     rewards, values, bootstrap_values)
        return vs, self._graph_fn_weigh(clipped_pg_rhos, td_advantages)

    @rlgraph_api
    def calc_v_trace_terms(self, log_probs_target, log_probs_behaviour, discounts, rewards, values,
                           bootstrap_values):
        # All outputs are constants for gradients: cut the inputs first, so that no backend records the
        # recursion for a backward pass (PyTorch's autograd would, at every step).
        log_probs_target, values, bootstrap_values = self._graph_fn_stop_gradient(log_probs_target, values,
                                                                                 bootstrap_values)
        clipped_rhos, cs, clipped_pg_rhos = self._graph_fn_importance_weights(log_probs_target, log_probs_behaviour)
        next_values = self.sequence_helper.calc_next_values(values, bootstrap_values)
        deltas, decays = self._graph_fn_temporal_differences(clipped_rhos, cs, discounts, rewards, values,
                                                             next_values)
        vs_minus_values = self.sequence_helper.reverse_discounted_cumsum(deltas, decays)
        vs = self._graph_fn_add(vs_minus_values, values)
        next_vs = self.sequence_helper.calc_next_values(vs, bootstrap_values)
        return self._graph_fn_targets_and_terms(vs, next_vs, clipped_pg_rhos, discounts, rewards, values)

    @graph_fn
    def _graph_fn_temporal_differences(self, clipped_rhos, cs, discounts, rewards, values, next_values):
        return clipped_rhos * (rewards + discounts * next_values - values), discounts * cs

    @graph_fn
    def _graph_fn_add(self, a, b):
        return a + b

    @graph_fn(returns=3)
    def _graph_fn_stop_gradient(self, log_probs_target, values, bootstrap_values):
        stop = self.ops.stop_gradient
        return stop(log_probs_target), stop(values), stop(bootstrap_values)

    @graph_fn
    def _graph_fn_importance_weights(self, log_probs_target, log_probs_behaviour):
        ops = self.ops
        rhos = ops.exp(log_probs_target - log_probs_behaviour)
        clip = lambda threshold: rhos if threshold is None else ops.minimum(rhos, threshold)  # noqa: E731
        return clip(self.rho_bar), self.lambda_ * clip(self.c_bar), clip(self.rho_bar_pg)

    @graph_fn(returns=3)
    def _graph_fn_targets_and_terms(self, vs, next_vs, clipped_pg_rhos, discounts, rewards, values):
        stop = self.ops.stop_gradient
        return stop(vs), stop(rewards + discounts * next_vs - values), stop(clipped_pg_rhos)

    @graph_fn
    def _graph_fn_weigh(self, weights, advantages):
        return weights * advantages
