"""The invertible value-function rescaling of Pohlen et al. 2018, as used by R2D2 (Kapturowski et al. 2019)."""
from rlgraph.components.component import Component
from rlgraph.components.helpers.input_checks import check_number, check_space
from rlgraph.utils.decorators import graph_fn, rlgraph_api


class ValueFunctionRescaling(Component):
    """``h(x) = sign(x) (sqrt(|x| + 1) - 1) + epsilon x`` and its closed-form inverse.

    Pohlen et al. 2018 (Observe and Look Further, Proposition A.2); Kapturowski et al. 2019 (R2D2) use it
    in the targets ``h(r + gamma^n h^-1(Q_target(s', a*)))``. The inverse is

        h^-1(x) = sign(x) (((sqrt(1 + 4 epsilon (|x| + 1 + epsilon)) - 1) / (2 epsilon))^2 - 1),

    and, for ``epsilon = 0``, ``sign(x) ((|x| + 1)^2 - 1)``.

    Args:
        epsilon: The linear term's weight (>= 0); keeps h^-1 Lipschitz.
        enabled: False makes both maps the identity (targets without rescaling, e.g. R2D2's
            ``value_rescaling=False``).

    API:
        rescale(x [any shape]) -> h(x), same shape.
        inverse_rescale(x [any shape]) -> h^-1(x), same shape.
    """

    default_scope = "value-function-rescaling"

    def __init__(self, epsilon=1e-3, enabled=True, scope=None, **kwargs):
        super().__init__(scope=scope, **kwargs)
        self.epsilon = check_number(type(self).__name__, "epsilon", epsilon, low=0.0)
        self.enabled = bool(enabled)

    def check_input_spaces(self, input_spaces, action_space=None):
        check_space(self, input_spaces, "x", "float", rank=None, ranks="any")

    @rlgraph_api
    def rescale(self, x):
        return self._graph_fn_rescale(x)

    @rlgraph_api
    def inverse_rescale(self, x):
        return self._graph_fn_inverse_rescale(x)

    # Both are computed in forms without cancellation near 0 (same values):
    # sign(x) (sqrt(|x| + 1) - 1) = x / (sqrt(|x| + 1) + 1) and, with z = |x| + 1 + epsilon,
    # (sqrt(1 + 4 epsilon z) - 1) / (2 epsilon) = 2 z / (sqrt(1 + 4 epsilon z) + 1) (also valid for epsilon = 0).

    @graph_fn
    def _graph_fn_rescale(self, x):
        if not self.enabled:
            return x
        return x / (self.ops.sqrt(self.ops.abs(x) + 1.0) + 1.0) + self.epsilon * x

    @graph_fn
    def _graph_fn_inverse_rescale(self, x):
        if not self.enabled:
            return x
        ops = self.ops
        z = ops.abs(x) + 1.0 + self.epsilon
        root = 2.0 * z / (ops.sqrt(1.0 + 4.0 * self.epsilon * z) + 1.0)
        return ops.sign(x) * (ops.square(root) - 1.0)
