"""The categorical distribution, parameterized by logits."""
import numpy as np

from rlgraph.components.distributions.distribution import Distribution
from rlgraph.spaces import FloatBox, IntBox
from rlgraph.backends.pytorch_backend import torch_random
from rlgraph.backends.tf_backend import tf_random
from rlgraph.utils.backend import tf, torch
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

    # --- TensorFlow ---------------------------------------------------------------------------------------
    @graph_fn(backend="tf")
    def _graph_fn_sample_stochastic(self, parameters):
        u = tf_random.uniform(tf.shape(parameters), minval=_TINY, maxval=1.0, dtype=parameters.dtype)
        return tf.cast(tf.argmax(parameters - tf.math.log(-tf.math.log(u)), axis=-1), self.dtype)

    @graph_fn(backend="tf")
    def _graph_fn_sample_deterministic(self, parameters):
        return tf.cast(tf.argmax(parameters, axis=-1), self.dtype)

    @graph_fn(backend="tf")
    def _graph_fn_log_prob(self, parameters, values):
        log_p = tf.nn.log_softmax(parameters, axis=-1)
        indices = tf.cast(values, tf.int32)
        return tf.gather(log_p, indices, axis=-1, batch_dims=indices.shape.rank)

    @graph_fn(backend="tf")
    def _graph_fn_entropy(self, parameters):
        log_p = tf.nn.log_softmax(parameters, axis=-1)
        return -tf.reduce_sum(tf.math.multiply_no_nan(log_p, tf.exp(log_p)), axis=-1)

    @graph_fn(backend="tf")
    def _graph_fn_kl_divergence(self, parameters, other_parameters):
        log_p = tf.nn.log_softmax(parameters, axis=-1)
        log_q = tf.nn.log_softmax(other_parameters, axis=-1)
        return tf.reduce_sum(tf.math.multiply_no_nan(log_p - log_q, tf.exp(log_p)), axis=-1)

    # --- PyTorch ------------------------------------------------------------------------------------------
    @graph_fn(backend="pytorch")
    def _graph_fn_sample_stochastic(self, parameters):
        u = torch_random.rand(parameters.shape, dtype=parameters.dtype, device=parameters.device).clamp_(min=_TINY)
        return torch.argmax(parameters - torch.log(-torch.log(u)), dim=-1).to(getattr(torch, self.dtype.name))

    @graph_fn(backend="pytorch")
    def _graph_fn_sample_deterministic(self, parameters):
        return torch.argmax(parameters, dim=-1).to(getattr(torch, self.dtype.name))

    @graph_fn(backend="pytorch")
    def _graph_fn_log_prob(self, parameters, values):
        log_p = torch.log_softmax(parameters, dim=-1)
        return torch.gather(log_p, -1, values.long().unsqueeze(-1)).squeeze(-1)

    @graph_fn(backend="pytorch")
    def _graph_fn_entropy(self, parameters):
        log_p = torch.log_softmax(parameters, dim=-1)
        p = log_p.exp()
        return -torch.where(p > 0, p * log_p, torch.zeros_like(p)).sum(-1)

    @graph_fn(backend="pytorch")
    def _graph_fn_kl_divergence(self, parameters, other_parameters):
        log_p = torch.log_softmax(parameters, dim=-1)
        log_q = torch.log_softmax(other_parameters, dim=-1)
        p = log_p.exp()
        return torch.where(p > 0, p * (log_p - log_q), torch.zeros_like(p)).sum(-1)
