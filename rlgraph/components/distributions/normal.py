"""The diagonal normal (Gaussian) distribution, parameterized by mean and log standard deviation."""
import math

from rlgraph.components.distributions.distribution import Distribution
from rlgraph.spaces import FloatBox, Tuple
from rlgraph.utils.decorators import graph_fn
from rlgraph.utils.errors import RLGraphSpaceError

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


class Normal(Distribution):
    """Diagonal Gaussian ``N(mean, exp(log_std)^2)``, independent per action component.

    ``parameters`` are either a tuple ``(mean, log_std)`` of equal shapes, or one tensor whose last axis
    holds ``[mean, log_std]`` halves (``[..., 2k]`` -> mean ``[..., k]``, log_std ``[..., k]``).
    Closed forms, per component: ``log p(x) = -((x - mu) / sigma)^2 / 2 - log sigma - log(2 pi) / 2``,
    ``H = 1/2 + log(2 pi) / 2 + log sigma``, ``KL(p || q) = log(sigma_q / sigma_p) +
    (sigma_p^2 + (mu_p - mu_q)^2) / (2 sigma_q^2) - 1/2``. The deterministic sample is the mean;
    stochastic samples are ``mean + sigma * eps`` with ``eps ~ N(0, 1)`` (reparameterized, so gradients
    flow into the parameters).

    Args:
        action_space: See ``Distribution`` (a FloatBox; samples have the dtype of the parameters).
    """

    __aliases__ = ("gaussian", "normal-distribution", "diagonal-normal")

    space_type = FloatBox
    default_dtype = "float32"

    def __init__(self, action_space=None, scope=None, **kwargs):
        super().__init__(action_space=action_space, scope=scope, **kwargs)
        self._split_at = None  # Set for parameters given as one tensor: the size of the mean half.

    def _check_parameters(self, space, arg):
        where = self._where("log_prob" if arg == "parameters" else "kl_divergence", arg)
        if isinstance(space, Tuple):
            if len(space) != 2 or not all(isinstance(s, FloatBox) for s in space) or \
                    tuple(space[0].shape) != tuple(space[1].shape):
                raise RLGraphSpaceError(where + f": expected a tuple (mean, log_std) of two FloatBoxes of equal "
                                        f"shape, got {space!r}.")
        elif not isinstance(space, FloatBox) or space.rank < 1 or space.shape[-1] % 2 != 0:
            raise RLGraphSpaceError(where + f": expected a tuple (mean, log_std) or one FloatBox whose last axis "
                                    f"(of even size) holds the mean and log_std halves, got {space!r}.")

    def _check_values(self, space, parameters_space):
        if not isinstance(space, FloatBox):
            raise RLGraphSpaceError(self._where("log_prob", "values") + f": expected a FloatBox, got {space!r}.")
        if parameters_space is not None:
            shape = self._mean_shape(parameters_space)
            if tuple(space.shape) != shape:
                raise RLGraphSpaceError(self._where("log_prob", "values") + f": expected values of item shape "
                                        f"{shape} for parameters {parameters_space!r}, got {space!r}.")

    @staticmethod
    def _mean_shape(parameters_space):
        if isinstance(parameters_space, Tuple):
            return tuple(parameters_space[0].shape)
        shape = tuple(parameters_space.shape)
        return shape[:-1] + (shape[-1] // 2,)

    def create_variables(self, input_spaces, action_space=None):
        super().create_variables(input_spaces, action_space)
        space = input_spaces.get("parameters", input_spaces.get("other_parameters"))
        if isinstance(space, FloatBox):
            self._split_at = space.shape[-1] // 2

    def _mean_and_log_std(self, parameters):
        """``(mean, log_std)`` of a tuple or a last-axis-split tensor (slicing: the same on both backends)."""
        if isinstance(parameters, (tuple, list)):
            return parameters[0], parameters[1]
        k = self._split_at if self._split_at is not None else parameters.shape[-1] // 2
        return parameters[..., :k], parameters[..., k:]

    @graph_fn
    def _graph_fn_sample_deterministic(self, parameters):
        return self._mean_and_log_std(parameters)[0]

    @graph_fn
    def _graph_fn_entropy(self, parameters):
        return self._mean_and_log_std(parameters)[1] + (0.5 + _HALF_LOG_2PI)

    @graph_fn
    def _graph_fn_sample_stochastic(self, parameters):
        ops = self.ops
        mean, log_std = self._mean_and_log_std(parameters)
        return mean + ops.exp(log_std) * ops.random_normal(ops.shape(mean), dtype=mean.dtype, like=mean)

    @graph_fn
    def _graph_fn_log_prob(self, parameters, values):
        ops = self.ops
        mean, log_std = self._mean_and_log_std(parameters)
        z = (ops.cast(values, mean.dtype) - mean) * ops.exp(-log_std)
        return -0.5 * ops.square(z) - log_std - _HALF_LOG_2PI

    @graph_fn
    def _graph_fn_kl_divergence(self, parameters, other_parameters):
        ops = self.ops
        mean_p, log_std_p = self._mean_and_log_std(parameters)
        mean_q, log_std_q = self._mean_and_log_std(other_parameters)
        return (log_std_q - log_std_p + 0.5 * (ops.exp(2.0 * (log_std_p - log_std_q)) +
                                               ops.square((mean_p - mean_q) * ops.exp(-log_std_q))) - 0.5)
