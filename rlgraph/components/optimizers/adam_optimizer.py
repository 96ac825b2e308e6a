"""Adam (Kingma & Ba 2015)."""
import math

from rlgraph.components.optimizers.optimizer import Optimizer
from rlgraph.utils.validation import Number, check_args


class AdamOptimizer(Optimizer):
    """Adam (Kingma & Ba 2015, Adam: A Method for Stochastic Optimization, Algorithm 1).

    With step t = 1, 2, ... and moments m, v starting at 0::

        m = beta_1 * m + (1 - beta_1) * g
        v = beta_2 * v + (1 - beta_2) * g^2
        w -= lr * (m / (1 - beta_1^t)) / (sqrt(v / (1 - beta_2^t)) + epsilon)

    i.e. epsilon is added to the bias-corrected sqrt(v-hat), as in the paper's Algorithm 1 and
    ``torch.optim.Adam`` (Keras adds it to the uncorrected sqrt(v), a slightly different epsilon).

    Args:
        learning_rate: A number or any ``TimeDependentParameter`` spec.
        beta_1: Decay of the first moment, in [0, 1).
        beta_2: Decay of the second moment, in [0, 1).
        epsilon: Added to the denominator (> 0).
        clip_grad_norm: Clip gradients to this global norm (None: no clipping).
    """

    __aliases__ = ("adam",)
    default_scope = "adam-optimizer"
    slot_names = ("m", "v")
    ARG_RULES = dict(beta_1=Number(min=0.0, lt=1.0), beta_2=Number(min=0.0, lt=1.0), epsilon=Number(gt=0.0))

    def __init__(self, learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-8, clip_grad_norm=None, scope=None,
                 **kwargs):
        super().__init__(learning_rate=learning_rate, clip_grad_norm=clip_grad_norm, scope=scope, **kwargs)
        args = check_args("AdamOptimizer", AdamOptimizer.ARG_RULES, dict(beta_1=beta_1, beta_2=beta_2, epsilon=epsilon))
        self.beta_1, self.beta_2, self.epsilon = args["beta_1"], args["beta_2"], args["epsilon"]

    def fused_kernel(self):
        """ATen's fused Adam (``torch.optim.Adam(fused=True)``'s kernel: the same update, one multi-tensor kernel
        instead of a dozen vector ops; agrees with ``update_rule`` to float rounding, ``tests/test_optimizers.py``)."""
        return "adam", dict(beta_1=self.beta_1, beta_2=self.beta_2, epsilon=self.epsilon)

    def update_rule(self, grad, slots, learning_rate, step):
        m = self.beta_1 * slots["m"] + (1.0 - self.beta_1) * grad
        v = self.beta_2 * slots["v"] + (1.0 - self.beta_2) * grad * grad
        # The bias corrections 1 - beta ** t as -expm1(t log beta): in float32, 1 - 0.999 ** t rounds beta first and
        # loses 1.3e-5 of 1 - beta_2 at t = 1 (a 6e-6 scale error in every early step); ATen's fused kernel
        # computes them exactly.
        m_hat = m / -self.ops.expm1(step * math.log(self.beta_1)) if self.beta_1 > 0 else m
        v_hat = v / -self.ops.expm1(step * math.log(self.beta_2)) if self.beta_2 > 0 else v
        return learning_rate * m_hat / (v_hat ** 0.5 + self.epsilon), {"m": m, "v": v}
