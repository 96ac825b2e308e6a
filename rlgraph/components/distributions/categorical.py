"""The categorical distribution, parameterized by logits."""
import numpy as np

from rlgraph.components.distributions.distribution import Distribution
from rlgraph.spaces import FloatBox, IntBox
from rlgraph.utils.decorators import graph_fn
from rlgraph.utils.errors import RLGraphSpaceError

_TINY = float(np.finfo(np.float32).tiny)


class Categorical(Distribution):
    """Categorical distribution over the last axis of ``logits`` (``p = softmax(logits)``).

    ``parameters`` are logits of shape ``[..., n]``; values are integer category indices of shape ``[...]``.
    Stochastic samples use the Gumbel-max trick (``argmax(logits + Gumbel noise)``, Gumbel 1954;
    Maddison et al. 2014), so any number of leading dimensions works; the deterministic sample is
    ``argmax(logits)``. Closed forms: ``log p(a) = log_softmax(logits)[a]``, ``H = -sum p log p``,
    ``KL(p || q) = sum p (log p - log q)``.

    Args:
        action_space: See ``Distribution`` (an IntBox; default sample dtype int32).
    """

    __aliases__ = ("categorical-distribution",)

    space_type = IntBox
    default_dtype = "int32"

    def _check_parameters(self, space, arg):
        if not isinstance(space, FloatBox) or space.rank < 1 or space.shape[-1] < 1:
            raise RLGraphSpaceError(self._where("log_prob" if arg == "parameters" else "kl_divergence", arg) +
                                    f": expected logits, a FloatBox of rank >= 1 whose last axis holds the "
                                    f"categories, got {space!r}.")

    def _check_values(self, space, parameters_space):
        if not isinstance(space, IntBox):
            raise RLGraphSpaceError(self._where("log_prob", "values") + f": expected an IntBox of category "
                                    f"indices, got {space!r}.")
        if parameters_space is not None and tuple(space.shape) != tuple(parameters_space.shape[:-1]):
            raise RLGraphSpaceError(self._where("log_prob", "values") + f": expected values of item shape "
                                    f"{tuple(parameters_space.shape[:-1])} for logits {parameters_space!r}, "
                                    f"got {space!r}.")

    @graph_fn
    def _graph_fn_sample_stochastic(self, parameters):
        ops = self.ops  # u in [tiny, 1): the Gumbel noise -log(-log(u)) stays finite.
        u = ops.clip(ops.random_uniform(ops.shape(parameters), dtype=parameters.dtype, like=parameters), low=_TINY)
        return ops.cast(ops.argmax(parameters - ops.log(-ops.log(u)), axis=-1), self.dtype)

    @graph_fn
    def _graph_fn_sample_deterministic(self, parameters):
        return self.ops.cast(self.ops.argmax(parameters, axis=-1), self.dtype)

    @graph_fn
    def _graph_fn_log_prob(self, parameters, values):
        return self.ops.take_along_last(self.ops.log_softmax(parameters, axis=-1), values)

    # 0 log 0 = 0: a category of probability 0 (a -inf logit) adds nothing.
    @graph_fn
    def _graph_fn_entropy(self, parameters):
        ops = self.ops
        log_p = ops.log_softmax(parameters, axis=-1)
        p = ops.exp(log_p)
        return -ops.sum(ops.where(p > 0, p * log_p, 0.0), axis=-1)

    @graph_fn
    def _graph_fn_kl_divergence(self, parameters, other_parameters):
        ops = self.ops
        log_p = ops.log_softmax(parameters, axis=-1)
        log_q = ops.log_softmax(other_parameters, axis=-1)
        p = ops.exp(log_p)
        return ops.sum(ops.where(p > 0, p * (log_p - log_q), 0.0), axis=-1)
