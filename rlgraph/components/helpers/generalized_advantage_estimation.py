"""Generalized advantage estimation (Schulman et al. 2016)."""
from rlgraph.components.component import Component
from rlgraph.components.helpers.input_checks import check_number, check_space
from rlgraph.components.helpers.sequence_helper import SequenceHelper
from rlgraph.utils.decorators import graph_fn, rlgraph_api


class GeneralizedAdvantageEstimation(Component):
    """GAE(gamma, lambda) advantages of unrolls with episode boundaries (Schulman et al. 2016, eq. 16).

    ``delta_t = r_t + gamma (1 - terminal_t) V(s_{t+1}) - V(s_t)`` with ``V(s_T) = bootstrap_values`` and
    ``A_t = delta_t + gamma lambda (1 - terminal_t) A_{t+1}`` (``A_T = 0``), i.e. ``A_t = sum_l (gamma
    lambda)^l delta_{t+l}`` cut at the end of each episode. Value targets are ``A_t + V(s_t)`` (the
    lambda-returns).

    Args:
        discount: The discount factor gamma.
        gae_lambda: The GAE lambda in [0, 1] (0: one-step TD errors, 1: Monte-Carlo advantages).
        time_major: Whether sequences are [T, B] (True) or [B, T] (False).

    API:
        calc_advantages(rewards [T, B], terminals [T, B], values [T, B], bootstrap_values [B])
            -> (advantages [T, B], value_targets [T, B]).
    """

    default_scope = "generalized-advantage-estimation"

    def __init__(self, discount=0.99, gae_lambda=0.95, time_major=True, scope=None, **kwargs):
        self.sequence_helper = SequenceHelper(time_major=time_major)
        super().__init__(self.sequence_helper, scope=scope, **kwargs)
        self.discount = check_number(type(self).__name__, "discount", discount, 0.0, 1.0)
        self.gae_lambda = check_number(type(self).__name__, "gae_lambda", gae_lambda, 0.0, 1.0)
        self.time_major = bool(time_major)

    def check_input_spaces(self, input_spaces, action_space=None):
        for arg, kind in (("rewards", "float"), ("terminals", "flag"), ("values", "float")):
            check_space(self, input_spaces, arg, kind, ranks="sequence", time_major=self.time_major)
        check_space(self, input_spaces, "bootstrap_values", "float", ranks="batch")

    @rlgraph_api
    def calc_advantages(self, rewards, terminals, values, bootstrap_values):
        discounts = self.sequence_helper.calc_discounts(terminals, self.discount)
        next_values = self.sequence_helper.calc_next_values(values, bootstrap_values)
        deltas, decays = self._graph_fn_td_errors(rewards, discounts, values, next_values)
        advantages = self.sequence_helper.reverse_discounted_cumsum(deltas, decays)
        return advantages, self._graph_fn_add(advantages, values)

    @graph_fn
    def _graph_fn_td_errors(self, rewards, discounts, values, next_values):
        return rewards + discounts * next_values - values, discounts * self.gae_lambda

    @graph_fn
    def _graph_fn_add(self, a, b):
        return a + b
