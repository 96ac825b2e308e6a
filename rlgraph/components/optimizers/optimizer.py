"""Base class of optimizers: gradients of a loss w.r.t. a dict of variables, global-norm clipping, updates."""
import logging

from rlgraph.components.common.time_dependent_parameters import TimeDependentParameter
from rlgraph.components.component import Component
from rlgraph.spaces import Dict, FloatBox
from rlgraph.utils.decorators import graph_fn, rlgraph_api
from rlgraph.utils.errors import RLGraphSpaceError
from rlgraph.utils.validation import Number, Optional, Schedule, check_args

logger = logging.getLogger(__name__)


class Optimizer(Component):
    """Computes gradients of a scalar loss w.r.t. a dict of variables and applies an update rule to them.

    The variables to optimize are passed in as the ``variables`` argument, a dict as returned by the
    built-in ``variables()`` API method of another component (e.g. ``self.optimizer.step(
    self.network.variables(), loss)``, where ``loss`` is computed in the same API call). Subclasses define
    the update rule once, in backend-free arithmetic (``update_rule``), so TF and PyTorch run the same math.

    Gradients are clipped by their global norm (``g *= clip / max(||g||, clip)``, as ``tf.clip_by_global_norm``)
    before the update. The learning rate may be any ``TimeDependentParameter`` spec (a number, or e.g.
    ``["linear", 1e-3, 1e-5]``), evaluated at ``time_percentage`` (training progress in [0, 1]; 0 if not given).

    Slot variables (moments, velocities) are created in ``create_variables`` for every variable in the
    ``variables`` argument's space (or, for variables only seen later, e.g. through ``apply_gradients``, on
    first use), with the variable's exact shape and dtype. They are named
    ``<optimizer scope>/<variable key>/<slot>`` and are not trainable. The step counter is ``steps``.

    API:
        step(variables, loss, time_percentage=None): Computes the gradients of ``loss`` and applies them;
            returns ``(loss, grad_norm)`` with the global norm before clipping.
        calculate_gradients(variables, loss): The gradients, a dict keyed like ``variables``.
        apply_gradients(variables, gradients, time_percentage=None): Clips and applies gradients (e.g.
            averaged over towers); returns the global norm before clipping.

    Args:
        learning_rate: The learning rate: a number or any ``TimeDependentParameter`` spec.
        clip_grad_norm: Clip gradients to this global norm (None: no clipping).
    """

    default_scope = "optimizer"
    #: What the constructor's arguments must be (``rlgraph.utils.validation``; a subclass declares its own).
    ARG_RULES = dict(learning_rate=Schedule(min=0.0), clip_grad_norm=Optional(Number(gt=0.0)))
    #: Learning rates above this draw a warning at construction (not an error: what is sane depends on the
    #: loss's scale, and a run may diverge on purpose). Adam and RMSProp move each weight by up to about the
    #: learning rate per update, so above 1 nothing is learned; plain SGD above 1 overshoots on any loss whose
    #: gradients are of order 1.
    usual_max_learning_rate = 1.0
    #: Names of the slot variables each optimized variable gets.
    slot_names = ()
    #: Its graph functions differentiate: the PyTorch executor keeps autograd on for the API methods that reach
    #: it (and runs all others without).
    differentiates = True

    def __init__(self, learning_rate=0.001, clip_grad_norm=None, scope=None, **kwargs):
        super().__init__(scope=scope, **kwargs)
        owner = type(self).__name__
        check_args(owner, Optimizer.ARG_RULES, dict(learning_rate=learning_rate, clip_grad_norm=clip_grad_norm))
        highest = max(_schedule_values(learning_rate), default=0.0)
        if highest > self.usual_max_learning_rate:
            logger.warning("%s.learning_rate: %g is far above any usual learning rate (at most %g; typical ones lie "
                           "in 1e-5 .. 1e-2): updates that large make the weights jump and the agent learns nothing. "
                           "Lower optimizer_spec.learning_rate.", owner, highest, self.usual_max_learning_rate)
        self.learning_rate = TimeDependentParameter.from_spec(learning_rate, _path="learning_rate",
                                                              scope="learning-rate")
        self.add_components(self.learning_rate)
        self.clip_grad_norm = None if clip_grad_norm is None else float(clip_grad_norm)
        self.steps = None
        self.slots = {}
        #: What a backend keeps per optimizer between updates (PyTorch: the slots' flat layout).
        self.backend_state = {}

    def check_input_spaces(self, input_spaces, action_space=None):
        variables = input_spaces.get("variables")
        if variables is not None:
            if not isinstance(variables, Dict):
                raise RLGraphSpaceError(f"API method 'step', argument 'variables': expected a dict of variables "
                                        f"(as returned by another component's variables()), got {variables!r}.")
            bad = [k for k, s in variables.flatten().items() if not isinstance(s, FloatBox)]
            if bad:
                raise RLGraphSpaceError(f"API method 'step', argument 'variables': only float variables can be "
                                        f"optimized; not float: {bad}.")
        loss = input_spaces.get("loss")
        if loss is not None and (not isinstance(loss, FloatBox) or loss.shape != () or loss.has_batch_rank
                                 or loss.has_time_rank):
            raise RLGraphSpaceError(f"API method 'step', argument 'loss': expected a scalar float loss (reduce "
                                    f"per-item losses first), got {loss!r}.")

    def create_variables(self, input_spaces, action_space=None):
        self.steps = self.get_variable("steps", dtype="int64", trainable=False)
        self.slots = {}
        variables = input_spaces.get("variables")
        if variables is not None:  # All of them: variables() waits until its whole component is built.
            for key, space in variables.items():
                self.slots[key] = {name: self.get_variable(f"{key}/{name}", shape=space.shape, dtype=space.dtype,
                                                           trainable=False) for name in self.slot_names}

    # --- update rule (subclasses) ----------------------------------------------------------------------------
    def update_rule(self, grad, slots, learning_rate, step):
        """The update of one variable, in arithmetic that serves both backends.

        Args:
            grad: The (clipped) gradient.
            slots: Slot name -> current slot value.
            learning_rate: The learning rate (scalar tensor of the variable's dtype).
            step: The 1-based number of this update (scalar tensor of the variable's dtype).

        Returns:
            ``(delta, new_slots)``: the variable becomes ``variable - delta``; ``new_slots`` maps slot names
            to their new values.
        """
        raise NotImplementedError

    # --- API ---------------------------------------------------------------------------------------------------
    @rlgraph_api
    def step(self, variables, loss, time_percentage=None):
        return self._graph_fn_step(variables, loss, self._learning_rate(time_percentage))

    @rlgraph_api
    def calculate_gradients(self, variables, loss):
        return self._graph_fn_calculate_gradients(variables, loss)

    # Not needed for create_variables (slots are made from the variables themselves), and the gradients may be
    # this optimizer's own calculate_gradients() output: no need to wait for these spaces.
    @rlgraph_api(must_be_complete=False)
    def apply_gradients(self, variables, gradients, time_percentage=None):
        return self._graph_fn_apply_gradients(variables, gradients, self._learning_rate(time_percentage))

    def _learning_rate(self, time_percentage):
        return self.learning_rate.get(0.0 if time_percentage is None else time_percentage)

    @graph_fn(returns=2)
    def _graph_fn_step(self, variables, loss, learning_rate):
        gradients = self._graph_fn_calculate_gradients(variables, loss)
        return self.ops.stop_gradient(loss), self._graph_fn_apply_gradients(variables, gradients, learning_rate)

    # Gradients and the update are the backend's (``Backend.gradients``, ``Backend.apply_gradients``): TF
    # differentiates its traced graph, PyTorch runs autograd and updates flat slot buffers, JAX takes the gradients
    # of the executor's loss pass; each applies this optimizer's ``update_rule``.
    @graph_fn
    def _graph_fn_calculate_gradients(self, variables, loss):
        if self.in_build_run:
            # The build only infers spaces, and a gradient has its variable's: no backward pass for it (through an
            # LSTM's loop, most of a recurrent agent's build time).
            return {k: self.ops.zeros(*self.backend.shape_and_dtype(v)) for k, v in variables.items()}
        return self.backend.gradients(loss, variables, self.global_scope)

    @graph_fn
    def _graph_fn_apply_gradients(self, variables, gradients, learning_rate):
        return self.backend.apply_gradients(self, variables, gradients, learning_rate)

    def fused_kernel(self):
        """``(name, keyword arguments)`` of a backend's fused kernel of ``update_rule`` (a backend without it, or
        for a dtype it does not serve, runs ``update_rule``); None: no such kernel."""
        return None

    # --- helpers -----------------------------------------------------------------------------------------------
    def slots_for(self, key, var):
        """The slot variables of variable ``key`` (created on first use with the variable's shape and dtype)."""
        slots = self.slots.get(key)
        if slots is None:
            shape, dtype = self.backend.shape_and_dtype(var)
            slots = {name: self.get_variable(f"{key}/{name}", shape=shape, dtype=dtype, trainable=False)
                     for name in self.slot_names}
            self.slots[key] = slots
        return slots

    def checked_keys(self, variables, gradients):
        """The keys of ``variables`` (a run-time error if ``gradients`` has other keys)."""
        keys = list(variables)
        self.check_at_run_time(
            lambda: set(keys) == set(gradients),
            lambda: f"Optimizer '{self.global_scope}', API method 'apply_gradients': gradients must have the keys of "
                    f"variables; variables: {sorted(keys)}, gradients: {sorted(gradients)}.",
            RLGraphSpaceError)
        return [k for k in keys if k in gradients]


def _schedule_values(spec):
    """The numbers of a learning-rate spec (a number, or a schedule's start and end values)."""
    if isinstance(spec, (list, tuple)):
        values = spec[1:3]
    elif isinstance(spec, dict):
        values = [spec[k] for k in Schedule.VALUE_KEYS if k in spec]
    else:
        values = [spec]
    return [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
