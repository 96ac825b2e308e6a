"""Stochastic gradient descent with optional (Nesterov) momentum."""
from rlgraph.components.optimizers.optimizer import Optimizer
from rlgraph.utils.errors import RLGraphSpecError
from rlgraph.utils.validation import Bool, Number, check_args


class SGDOptimizer(Optimizer):
    """SGD, optionally with momentum (Polyak 1964) or Nesterov momentum (Sutskever et al. 2013).

    Update (the Keras/TF form, velocity v starts at 0)::

        momentum == 0:  w -= lr * g
        otherwise:      v = momentum * v - lr * g
                        w += v                       (or, Nesterov: w += momentum * v - lr * g)

    With a constant learning rate this equals PyTorch's ``torch.optim.SGD`` form (buffer without lr).

    Args:
        learning_rate: A number or any ``TimeDependentParameter`` spec.
        momentum: Momentum coefficient in [0, 1).
        nesterov: Use Nesterov momentum (needs momentum > 0).
        clip_grad_norm: Clip gradients to this global norm (None: no clipping).
    """

    __aliases__ = ("sgd",)
    default_scope = "sgd-optimizer"
    ARG_RULES = dict(momentum=Number(min=0.0, lt=1.0), nesterov=Bool())

    def __init__(self, learning_rate=0.01, momentum=0.0, nesterov=False, clip_grad_norm=None, scope=None, **kwargs):
        super().__init__(learning_rate=learning_rate, clip_grad_norm=clip_grad_norm, scope=scope, **kwargs)
        args = check_args("SGDOptimizer", SGDOptimizer.ARG_RULES, dict(momentum=momentum, nesterov=nesterov))
        momentum, nesterov = args["momentum"], args["nesterov"]
        if nesterov and momentum == 0.0:
            raise RLGraphSpecError("SGDOptimizer: nesterov=True needs momentum > 0.")
        self.momentum = float(momentum)
        self.nesterov = bool(nesterov)
        self.slot_names = ("velocity",) if self.momentum > 0.0 else ()

    def update_rule(self, grad, slots, learning_rate, step):
        if self.momentum == 0.0:
            return learning_rate * grad, {}
        velocity = self.momentum * slots["velocity"] - learning_rate * grad
        if self.nesterov:
            return -(self.momentum * velocity - learning_rate * grad), {"velocity": velocity}
        return -velocity, {"velocity": velocity}
