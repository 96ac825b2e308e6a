"""n-step returns of unrolls with episode boundaries."""
from rlgraph.components.component import Component
from rlgraph.components.helpers.input_checks import check_number, check_space
from rlgraph.utils.decorators import graph_fn, rlgraph_api


class NStepReturns(Component):
    """n-step bootstrapped targets (Sutton & Barto 2018, ch. 7; Mnih et al. 2016; Hessel et al. 2018).

    ``G_t = sum_{k<m} discount^k r_{t+k} + discount^m V(s_{t+m})``, ``m = min(n_step, T - t)``, where a
    terminal at step ``t + j`` (j < m) cuts the sum after ``r_{t+j}`` and drops the bootstrap term.
    ``V(s_{t+m})`` is ``values[t + m]`` inside the unroll and ``bootstrap_values`` (= V(s_T)) at its end,
    so the last ``n_step - 1`` steps get shorter (truncated) returns.

    Args:
        n_step: The number of rewards summed before bootstrapping.
        discount: The discount factor gamma.
        time_major: Whether sequences are [T, B] (True) or [B, T] (False).

    API:
        calc_n_step_returns(rewards [T, B], terminals [T, B], values [T, B], bootstrap_values [B] = None)
            -> returns [T, B]. ``values[t]`` is V(s_t) (``values[:n_step]`` are never used); without
            ``bootstrap_values`` V(s_T) counts as 0.
    """

    default_scope = "n-step-returns"

    def __init__(self, n_step=3, discount=0.99, time_major=True, scope=None, **kwargs):
        super().__init__(scope=scope, **kwargs)
        self.n_step = check_number(type(self).__name__, "n_step", n_step, low=1, integer=True)
        self.discount = check_number(type(self).__name__, "discount", discount, 0.0, 1.0)
        self.time_major = bool(time_major)

    def check_input_spaces(self, input_spaces, action_space=None):
        for arg, kind in (("rewards", "float"), ("terminals", "flag"), ("values", "float")):
            check_space(self, input_spaces, arg, kind, ranks="sequence", time_major=self.time_major)
        check_space(self, input_spaces, "bootstrap_values", "float", ranks="batch", required=False)

    @rlgraph_api
    def calc_n_step_returns(self, rewards, terminals, values, bootstrap_values=None):
        return self._graph_fn_calc_n_step_returns(rewards, terminals, values, bootstrap_values)

    # The sum runs over k = 0..n-1 (a static loop) on arrays padded with n steps past the unroll's end:
    # rewards with 0, per-step discounts with 1, values with V(s_T). ``scale`` is prod_{j<k} d_{t+j}.
    @graph_fn
    def _graph_fn_calc_n_step_returns(self, rewards, terminals, values, bootstrap_values):
        ops = self.ops
        if not self.time_major:
            rewards, terminals, values = (ops.transpose(x, (1, 0)) for x in (rewards, terminals, values))
        n, length = self.n_step, ops.shape(rewards)[0]
        discounts = self.discount * (1.0 - ops.cast(terminals, rewards.dtype))
        if bootstrap_values is None:
            bootstrap_values = ops.zeros_like(values[0])
        pad = ops.zeros_like(rewards[:1])
        rewards = ops.concat([rewards] + [pad] * n, axis=0)
        discounts = ops.concat([discounts] + [pad + 1.0] * n, axis=0)
        values = ops.concat([values] + [ops.cast(bootstrap_values, values.dtype)[None]] * n, axis=0)
        returns, scale = 0.0, 1.0
        for k in range(n):
            returns = returns + scale * rewards[k:k + length]
            scale = scale * discounts[k:k + length]
        returns = returns + scale * values[n:n + length]
        return returns if self.time_major else ops.transpose(returns, (1, 0))
