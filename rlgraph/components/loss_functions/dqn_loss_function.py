"""The (double, n-step, prioritized) DQN loss."""
from rlgraph.components.helpers.input_checks import check_same_item_shape, check_space
from rlgraph.components.loss_functions.loss_function import LossFunction
from rlgraph.utils.decorators import graph_fn, rlgraph_api
from rlgraph.utils.errors import RLGraphSpaceError
from rlgraph.utils.validation import Int, Number, check_args


class DQNLossFunction(LossFunction):
    """One-step or n-step (double) Q-learning loss on a batch of transitions.

    TD error ``delta = y - Q(s, a)`` with the target (a constant for gradients)

        y = r + discount^n_step * (1 - terminal) * Q_target(s', a*),
        a* = argmax_a Q(s', a) (double Q, van Hasselt et al. 2016) or argmax_a Q_target(s', a) (Mnih et al. 2015),

    where ``r`` is the (n-step) discounted sum of rewards up to ``s'`` (Hessel et al. 2018) and ``terminal``
    says whether the episode ended before ``s'``. The per-item loss is the Huber loss of ``delta``
    (``0.5 delta^2`` if ``|delta| <= huber_delta``, else ``huber_delta (|delta| - 0.5 huber_delta)``) or
    ``0.5 delta^2``. With prioritized replay (Schaul et al. 2016; Ape-X, Horgan et al. 2018) the mean is
    weighted by importance weights and ``|delta|`` gives the new priorities.

    Args:
        double_q: Pick the bootstrap action with the online network (needs ``q_values_sp``).
        huber_loss: Use the Huber loss instead of the squared loss.
        huber_delta: Where the Huber loss turns from quadratic to linear.
        n_step: The number of steps the rewards span; the bootstrap is discounted by ``discount ** n_step``.
        discount: The discount factor gamma.
        importance_weights: Weight each item's loss by ``importance_weights`` in ``loss``.

    API:
        loss(q_values_s [B, A], actions [B], rewards [B], terminals [B], qt_values_sp [B, A],
            q_values_sp [B, A] = None, importance_weights [B] = None) -> (loss [], td_errors [B]).
            ``q_values_s`` = Q(s, .) of the online network, ``qt_values_sp`` = Q_target(s', .) of the target
            network, ``q_values_sp`` = Q(s', .) of the online network (double Q only). ``td_errors`` are the
            signed ``y - Q(s, a)``; use their absolute values as new priorities.
        loss_per_item(q_values_s, actions, rewards, terminals, qt_values_sp, q_values_sp=None) -> [B].
    """

    default_scope = "dqn-loss-function"
    __aliases__ = ("dqn-loss",)
    #: What the constructor's arguments must be (``rlgraph.utils.validation``).
    ARG_RULES = dict(huber_delta=Number(gt=0.0), n_step=Int(min=1), discount=Number(min=0.0, max=1.0))

    def __init__(self, double_q=True, huber_loss=True, huber_delta=1.0, n_step=1, discount=0.99,
                 importance_weights=False, scope=None, **kwargs):
        super().__init__(scope=scope, **kwargs)
        args = check_args(type(self).__name__, DQNLossFunction.ARG_RULES,
                          dict(huber_delta=huber_delta, n_step=n_step, discount=discount))
        self.double_q = bool(double_q)
        self.huber_loss = bool(huber_loss)
        self.huber_delta, self.n_step, self.discount = args["huber_delta"], args["n_step"], args["discount"]
        self.importance_weights = bool(importance_weights)

    def check_input_spaces(self, input_spaces, action_space=None):
        for arg in ("q_values_s", "qt_values_sp"):
            check_space(self, input_spaces, arg, "float", rank=1)
        check_space(self, input_spaces, "q_values_sp", "float", rank=1, required=False)
        if self.double_q and input_spaces.get("q_values_sp") is None:
            raise RLGraphSpaceError(f"{type(self).__name__}, API method 'loss'/'loss_per_item', argument "
                                    f"'q_values_sp': double_q=True needs the online network's Q(s', .) [B, A].")
        check_same_item_shape(self, input_spaces, "q_values_s", "qt_values_sp", "q_values_sp")
        check_space(self, input_spaces, "actions", "int")
        check_space(self, input_spaces, "rewards", "float")
        check_space(self, input_spaces, "terminals", "flag")
        check_space(self, input_spaces, "importance_weights", "float", required=False)

    @rlgraph_api
    def loss(self, q_values_s, actions, rewards, terminals, qt_values_sp, q_values_sp=None, importance_weights=None):
        weights = self.select_importance_weights(importance_weights, self.importance_weights)
        loss_per_item, td_errors = self._graph_fn_loss_per_item(q_values_s, actions, rewards, terminals,
                                                                qt_values_sp, q_values_sp)
        return self._graph_fn_average(loss_per_item, weights), td_errors

    @rlgraph_api
    def loss_per_item(self, q_values_s, actions, rewards, terminals, qt_values_sp, q_values_sp=None):
        loss_per_item, _ = self._graph_fn_loss_per_item(q_values_s, actions, rewards, terminals, qt_values_sp,
                                                        q_values_sp)
        return loss_per_item

    @graph_fn
    def _graph_fn_loss_per_item(self, q_values_s, actions, rewards, terminals, qt_values_sp, q_values_sp):
        ops = self.ops
        q_s_a = ops.take_along_last(q_values_s, actions)
        selector = q_values_sp if self.double_q else qt_values_sp
        qt_sp = ops.take_along_last(qt_values_sp, ops.argmax(selector, axis=-1))
        not_done = 1.0 - ops.cast(terminals, rewards.dtype)
        targets = ops.stop_gradient(rewards + (self.discount ** self.n_step) * not_done * qt_sp)
        td_errors = targets - q_s_a
        loss = ops.huber(td_errors, self.huber_delta) if self.huber_loss else 0.5 * ops.square(td_errors)
        return loss, ops.stop_gradient(td_errors)
