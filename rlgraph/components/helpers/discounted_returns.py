"""Discounted returns of unrolls with episode boundaries and bootstrap values."""
from rlgraph.components.component import Component
from rlgraph.components.helpers.input_checks import check_number, check_space
from rlgraph.components.helpers.sequence_helper import SequenceHelper
from rlgraph.utils.decorators import rlgraph_api


class DiscountedReturns(Component):
    """Monte-Carlo returns ``R_t = r_t + discount * (1 - terminal_t) * R_{t+1}``, ``R_T = bootstrap_values``.

    Episodes that end inside the unroll (``terminals[t]`` True) do not see later rewards; the unroll's
    last, unfinished episode is completed with the bootstrap value V(s_T) (Sutton & Barto 2018, ch. 3).

    Args:
        discount: The discount factor gamma.
        time_major: Whether sequences are [T, B] (True) or [B, T] (False).

    API:
        calc_discounted_returns(rewards [T, B], terminals [T, B], bootstrap_values [B]) -> returns [T, B].
    """

    default_scope = "discounted-returns"

    def __init__(self, discount=0.99, time_major=True, scope=None, **kwargs):
        self.sequence_helper = SequenceHelper(time_major=time_major)
        super().__init__(self.sequence_helper, scope=scope, **kwargs)
        self.discount = check_number(type(self).__name__, "discount", discount, 0.0, 1.0)
        self.time_major = bool(time_major)

    def check_input_spaces(self, input_spaces, action_space=None):
        check_space(self, input_spaces, "rewards", "float", ranks="sequence", time_major=self.time_major)
        check_space(self, input_spaces, "terminals", "flag", ranks="sequence", time_major=self.time_major)
        check_space(self, input_spaces, "bootstrap_values", "float", ranks="batch")

    @rlgraph_api
    def calc_discounted_returns(self, rewards, terminals, bootstrap_values):
        discounts = self.sequence_helper.calc_discounts(terminals, self.discount)
        return self.sequence_helper.reverse_discounted_cumsum(rewards, discounts, bootstrap_values)
