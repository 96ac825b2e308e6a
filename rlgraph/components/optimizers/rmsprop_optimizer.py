"""RMSProp (Tieleman & Hinton 2012), with TensorFlow's centered and momentum options."""
from rlgraph.components.optimizers.optimizer import Optimizer
from rlgraph.utils.validation import Bool, Number, check_args


class RMSPropOptimizer(Optimizer):
    """RMSProp (Tieleman & Hinton 2012; Graves 2013 for the centered form), as TensorFlow defines it.

    With mean square ms (and, centered, mean gradient mg) starting at 0 and momentum buffer mom at 0::

        ms  = decay * ms + (1 - decay) * g^2
        mg  = decay * mg + (1 - decay) * g               (centered only)
        var = ms - mg^2 if centered else ms
        denominator = sqrt(var + epsilon)                 (epsilon_inside_sqrt=True: TF1, as in IMPALA)
                    = sqrt(var) + epsilon                 (epsilon_inside_sqrt=False: Keras, PyTorch)
        mom = momentum * mom + lr * g / denominator
        w  -= mom                                         (w -= lr * g / denominator when momentum == 0)

    ``ms - mg^2`` is clamped at 0 against rounding. TF1 started ms at 1; here it starts at 0, like Keras
    and PyTorch.

    Args:
        learning_rate: A number or any ``TimeDependentParameter`` spec.
        decay: Discount of the moving averages (rho), in [0, 1).
        momentum: Momentum coefficient in [0, 1).
        epsilon: Stabilizer (> 0), see ``epsilon_inside_sqrt``.
        centered: Normalize by the variance estimate ms - mg^2 instead of ms.
        epsilon_inside_sqrt: Where epsilon goes, see above.
        clip_grad_norm: Clip gradients to this global norm (None: no clipping).
    """

    __aliases__ = ("rmsprop", "rms-prop")
    default_scope = "rmsprop-optimizer"
    ARG_RULES = dict(decay=Number(min=0.0, lt=1.0), momentum=Number(min=0.0, lt=1.0), epsilon=Number(gt=0.0),
                     centered=Bool(), epsilon_inside_sqrt=Bool())

    def __init__(self, learning_rate=0.001, decay=0.9, momentum=0.0, epsilon=1e-10, centered=False,
                 epsilon_inside_sqrt=True, clip_grad_norm=None, scope=None, **kwargs):
        super().__init__(learning_rate=learning_rate, clip_grad_norm=clip_grad_norm, scope=scope, **kwargs)
        args = check_args("RMSPropOptimizer", RMSPropOptimizer.ARG_RULES,
                          dict(decay=decay, momentum=momentum, epsilon=epsilon, centered=centered,
                               epsilon_inside_sqrt=epsilon_inside_sqrt))
        self.decay, self.momentum, self.epsilon = args["decay"], args["momentum"], args["epsilon"]
        self.centered = args["centered"]
        self.epsilon_inside_sqrt = args["epsilon_inside_sqrt"]
        self.slot_names = ("ms",) + (("mg",) if self.centered else ()) + (("momentum",) if self.momentum else ())

    def update_rule(self, grad, slots, learning_rate, step):
        new = {"ms": self.decay * slots["ms"] + (1.0 - self.decay) * grad * grad}
        variance = new["ms"]
        if self.centered:
            new["mg"] = self.decay * slots["mg"] + (1.0 - self.decay) * grad
            variance = variance - new["mg"] * new["mg"]
            variance = (variance + abs(variance)) * 0.5  # max(variance, 0) in plain arithmetic.
        if self.epsilon_inside_sqrt:
            denominator = (variance + self.epsilon) ** 0.5
        else:
            denominator = variance ** 0.5 + self.epsilon
        delta = learning_rate * grad / denominator
        if self.momentum:
            new["momentum"] = self.momentum * slots["momentum"] + delta
            delta = new["momentum"]
        return delta, new
