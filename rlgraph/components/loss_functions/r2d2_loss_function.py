"""The R2D2 sequence loss: n-step double Q-learning with value rescaling and burn-in (Kapturowski et al. 2019)."""
from rlgraph.components.helpers.input_checks import check_same_item_shape, check_space
from rlgraph.components.helpers.n_step_returns import NStepReturns
from rlgraph.components.helpers.value_function_rescaling import ValueFunctionRescaling
from rlgraph.components.loss_functions.loss_function import LossFunction
from rlgraph.utils.decorators import graph_fn, rlgraph_api
from rlgraph.utils.validation import Int, Number, check_args


class R2D2LossFunction(LossFunction):
    """Recurrent replay DQN loss on stored sequences (R2D2, Kapturowski et al. 2019).

    A sequence of T steps holds ``burn_in`` steps that only warm up the recurrent state, then the trained
    steps ``t`` in ``[burn_in, T - n_step)``; its last ``n_step`` steps only serve as bootstrap states. For a
    trained step, with ``h`` the value rescaling (``ValueFunctionRescaling``, Pohlen et al. 2018; the identity with
    ``value_rescaling=False``):

        a*_{t+n} = argmax_a Q(s_{t+n}, a)                                   (online network: double Q)
        y_t      = h(sum_{k<n} gamma^k r_{t+k} + gamma^n h^-1(Q_target(s_{t+n}, a*_{t+n})))
        delta_t  = y_t - Q(s_t, a_t)

    where a terminal inside ``[t, t + n)`` cuts the sum and drops the bootstrap term (``NStepReturns``).
    The per-sequence loss is the mean over the trained steps of ``0.5 delta_t^2`` (or the Huber loss); the
    burn-in and bootstrap-only steps contribute nothing (also no gradients). The sequence's new replay
    priority is ``eta max_t |delta_t| + (1 - eta) mean_t |delta_t|`` over the trained steps.

    Sequences must be longer than ``burn_in + n_step``; a shorter one raises ``RLGraphRuntimeError``.

    Args:
        burn_in: Number of leading steps left out of the loss.
        n_step: The n of the n-step targets.
        discount: The discount factor gamma.
        epsilon: The value rescaling's epsilon (``h(x) = sign(x)(sqrt(|x|+1) - 1) + epsilon x``).
        value_rescaling: Whether targets are rescaled by ``h`` (R2D2); False: plain n-step double-Q targets.
        eta: Mix of max and mean in the priorities.
        huber_loss: Use the Huber loss with ``huber_delta`` instead of ``0.5 delta^2``.
        huber_delta: Where the Huber loss turns from quadratic to linear.
        importance_weights: Weight each sequence's loss by ``importance_weights`` in ``loss``.
        time_major: Whether sequences are batch-major [B, T] (False, as a replay memory returns them) or
            time-major [T, B] (True). The shapes below are batch-major.

    API:
        loss(q_values [B, T, A], target_q_values [B, T, A], actions [B, T], rewards [B, T], terminals [B, T],
            importance_weights [B] = None) -> (loss [], priorities [B]).
            ``q_values`` = Q(s_t, .) of the online network and ``target_q_values`` = Q_target(s_t, .) of the
            target network over the whole sequence; ``rewards[t]``/``terminals[t]`` belong to step t (the
            episode ended with step t).
        loss_per_item(q_values, target_q_values, actions, rewards, terminals) -> [B], per-sequence losses.
    """

    default_scope = "r2d2-loss-function"
    __aliases__ = ("r2d2-loss",)
    #: What the constructor's arguments must be (``rlgraph.utils.validation``).
    ARG_RULES = dict(burn_in=Int(min=0), n_step=Int(min=1), discount=Number(min=0.0, max=1.0), epsilon=Number(min=0.0),
                     eta=Number(min=0.0, max=1.0), huber_delta=Number(gt=0.0))

    def __init__(self, burn_in=40, n_step=5, discount=0.997, epsilon=1e-3, eta=0.9, huber_loss=False,
                 huber_delta=1.0, importance_weights=False, time_major=False, value_rescaling=True, scope=None,
                 **kwargs):
        args = check_args(type(self).__name__, R2D2LossFunction.ARG_RULES, dict(
            burn_in=burn_in, n_step=n_step, discount=discount, epsilon=epsilon, eta=eta, huber_delta=huber_delta))
        self.n_step, self.discount = args["n_step"], args["discount"]
        self.time_major = bool(time_major)
        self.value_rescaling = ValueFunctionRescaling(epsilon=args["epsilon"], enabled=value_rescaling)
        self.n_step_returns = NStepReturns(n_step=self.n_step, discount=self.discount, time_major=self.time_major)
        super().__init__(self.value_rescaling, self.n_step_returns, scope=scope, **kwargs)
        self.burn_in = args["burn_in"]
        self.eta = args["eta"]
        self.huber_loss = bool(huber_loss)
        self.huber_delta = args["huber_delta"]
        self.importance_weights = bool(importance_weights)

    def check_input_spaces(self, input_spaces, action_space=None):
        for arg in ("q_values", "target_q_values"):
            check_space(self, input_spaces, arg, "float", rank=1, ranks="sequence", time_major=self.time_major)
        check_same_item_shape(self, input_spaces, "q_values", "target_q_values")
        check_space(self, input_spaces, "actions", "int", ranks="sequence", time_major=self.time_major)
        check_space(self, input_spaces, "rewards", "float", ranks="sequence", time_major=self.time_major)
        check_space(self, input_spaces, "terminals", "flag", ranks="sequence", time_major=self.time_major)
        check_space(self, input_spaces, "importance_weights", "float", required=False)

    @rlgraph_api
    def loss(self, q_values, target_q_values, actions, rewards, terminals, importance_weights=None):
        weights = self.select_importance_weights(importance_weights, self.importance_weights)
        loss_per_item, priorities = self._sequence_losses(q_values, target_q_values, actions, rewards, terminals)
        return self._graph_fn_average(loss_per_item, weights), priorities

    @rlgraph_api
    def loss_per_item(self, q_values, target_q_values, actions, rewards, terminals):
        loss_per_item, _ = self._sequence_losses(q_values, target_q_values, actions, rewards, terminals)
        return loss_per_item

    def _sequence_losses(self, q_values, target_q_values, actions, rewards, terminals):
        """Wires the computation (called from the API bodies); returns (per-sequence losses, priorities)."""
        q_taken, target_q_best = self._graph_fn_select_q_values(q_values, target_q_values, actions)
        bootstrap_values = self.value_rescaling.inverse_rescale(target_q_best)
        returns = self.n_step_returns.calc_n_step_returns(rewards, terminals, bootstrap_values)
        targets = self.value_rescaling.rescale(returns)
        return self._graph_fn_sequence_losses(q_taken, targets)

    @graph_fn
    def _graph_fn_select_q_values(self, q_values, target_q_values, actions):
        """Q(s_t, a_t) and Q_target(s_t, argmax_a Q(s_t, a)), both [B, T]."""
        ops = self.ops
        q_taken = ops.take_along_last(q_values, actions)
        return q_taken, ops.stop_gradient(ops.take_along_last(target_q_values, ops.argmax(q_values, axis=-1)))

    @graph_fn
    def _graph_fn_sequence_losses(self, q_taken, targets):
        ops = self.ops
        time_axis = 0 if self.time_major else 1
        length = ops.shape(q_taken)[time_axis]
        if not self.in_build_run:  # The build's sample sequences may be shorter (a run-time check on TensorFlow).
            q_taken = ops.check(length > self.burn_in + self.n_step, f"R2D2LossFunction: sequences must be longer "
                                f"than burn_in + n_step = {self.burn_in + self.n_step}.", q_taken)
        steps = ops.arange(length, "int32", like=q_taken)
        mask = ops.cast(ops.logical_and(steps >= self.burn_in, steps < length - self.n_step), q_taken.dtype)
        mask = mask[:, None] if self.time_major else mask[None, :]
        td_errors = (ops.stop_gradient(targets) - q_taken) * mask
        losses = ops.huber(td_errors, self.huber_delta) if self.huber_loss else 0.5 * ops.square(td_errors)
        # The build's sample sequences may be shorter than burn_in + n_step: keep the division defined.
        count = ops.maximum(ops.sum(mask, axis=time_axis), 1.0)
        abs_td = ops.stop_gradient(ops.abs(td_errors))
        priorities = (self.eta * ops.max(abs_td, axis=time_axis)
                      + (1.0 - self.eta) * ops.sum(abs_td, axis=time_axis) / count)
        return ops.sum(losses, axis=time_axis) / count, priorities
