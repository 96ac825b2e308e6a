"""Base class of optimizers: gradients of a loss w.r.t. a dict of variables, global-norm clipping, updates."""
import logging

from rlgraph.components.common.time_dependent_parameters import TimeDependentParameter
from rlgraph.components.component import Component
from rlgraph.spaces import Dict, FloatBox
from rlgraph.utils.backend import jax, tf, torch
from rlgraph.utils.decorators import graph_fn, rlgraph_api
from rlgraph.utils.errors import RLGraphBackendError, RLGraphSpaceError
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
        self._flat_slots = None  # PyTorch: the slots as slices of flat buffers (``_TorchFlatSlots``).

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
        # The backends differ in the two graph functions it calls (the calls are plain Python once built).
        gradients = self._graph_fn_calculate_gradients(variables, loss)
        return self.ops.stop_gradient(loss), self._graph_fn_apply_gradients(variables, gradients, learning_rate)

    # --- TensorFlow ------------------------------------------------------------------------------------------
    # Per backend: TF differentiates its traced graph (tf.gradients) and updates variable by variable; PyTorch
    # runs autograd and updates flat slot buffers (with fused kernels where an optimizer has one).
    @graph_fn(backend="tf")
    def _graph_fn_calculate_gradients(self, variables, loss):
        return self._tf_gradients(variables, loss)

    @graph_fn(backend="tf")
    def _graph_fn_apply_gradients(self, variables, gradients, learning_rate):
        return self._tf_apply(variables, gradients, learning_rate)

    def _tf_gradients(self, variables, loss):
        keys = list(variables)
        if self.in_build_run:
            # The build only infers spaces, and a gradient has its variable's: no backward graph for it (through
            # an LSTM's loop, most of a recurrent agent's build time).
            return {k: tf.zeros_like(variables[k]) for k in keys}
        grads = tf.gradients(loss, [variables[k] for k in keys])
        # Unconnected variables get zeros; IndexedSlices (from gathers) become dense.
        return {k: tf.zeros_like(variables[k]) if g is None else tf.convert_to_tensor(g) for k, g in zip(keys, grads)}

    def _tf_apply(self, variables, gradients, learning_rate):
        keys = self._check_keys(variables, gradients)
        grads = [tf.cast(gradients[k], variables[k].dtype) for k in keys]
        norm = tf.sqrt(tf.add_n([tf.reduce_sum(tf.square(tf.cast(g, tf.float32))) for g in grads])) \
            if grads else tf.constant(0.0)
        if self.clip_grad_norm is not None:
            scale = self.clip_grad_norm / tf.maximum(norm, self.clip_grad_norm)
            grads = [g * tf.cast(scale, g.dtype) for g in grads]
        step = self.steps.assign_add(1)
        for k, g in zip(keys, grads):
            var = variables[k]
            slots = self._slots_for(k, var)
            delta, new_slots = self.update_rule(g, {name: s.read_value() for name, s in slots.items()},
                                                tf.cast(learning_rate, var.dtype), tf.cast(step, var.dtype))
            for name, value in new_slots.items():
                slots[name].assign(value)
            var.assign_sub(delta)
        return norm

    # --- PyTorch ---------------------------------------------------------------------------------------------
    @graph_fn(backend="pytorch")
    def _graph_fn_calculate_gradients(self, variables, loss):
        return self._torch_gradients(variables, loss)

    @graph_fn(backend="pytorch")
    def _graph_fn_apply_gradients(self, variables, gradients, learning_rate):
        return self._torch_apply(variables, gradients, learning_rate)

    def _torch_gradients(self, variables, loss):
        keys = list(variables)
        if not keys:
            return {}
        grads = torch.autograd.grad(loss, [variables[k] for k in keys], allow_unused=True)
        return {k: torch.zeros_like(variables[k]) if g is None else g for k, g in zip(keys, grads)}

    def _torch_apply(self, variables, gradients, learning_rate):
        """Clips and applies ``gradients``: ``update_rule`` runs once per (device, dtype) group of variables,
        on their gradients and slots flattened into one vector each (``_TorchFlatSlots``), not per variable."""
        keys = self._check_keys(variables, gradients)
        with torch.no_grad():
            if self.in_build_run:
                # The build's sample runs: only create the slots. (Slots created here are not among the
                # variables the build restores afterwards, so they must not change.)
                grads = [gradients[k].to(variables[k].dtype) for k in keys]
                for k in keys:
                    self._slots_for(k, variables[k])
                return torch.sqrt(sum(torch.sum(torch.square(g.to(torch.float32))) for g in grads)) \
                    if grads else torch.tensor(0.0)
            flat = self._flat_slots
            if flat is None or not flat.fits(keys, variables):
                flat = self._flat_slots = _TorchFlatSlots(keys, variables, [self._slots_for(k, variables[k])
                                                                            for k in keys], self.slot_names)
            groups = flat.flat_gradients(gradients)
            # The sum of squares by torch.sum (pairwise summation): torch.linalg.vector_norm accumulates float32
            # serially on the CPU, 8e-5 relative off at 1.5M entries, enough to move every clipped step off TF's
            # and JAX's (tests/test_optimizers.py::test_global_norm_of_a_large_gradient_is_exact).
            squares = [torch.sum(torch.square(g if g.dtype == torch.float32 else g.float())) for g in groups]
            norm = torch.sqrt(sum(s.to(squares[0].device) for s in squares)) if squares else torch.tensor(0.0)
            if self.clip_grad_norm is not None:
                scale = self.clip_grad_norm / torch.clamp(norm, min=self.clip_grad_norm)
                groups = [g * scale.to(g.device, g.dtype) for g in groups]
            self.steps.add_(1)
            learning_rate = torch.as_tensor(learning_rate)
            for group, g in zip(flat.groups, groups):
                self._torch_group_step(group, g, learning_rate.to(g.dtype), self.steps.to(g.dtype))
        return norm

    def _torch_group_step(self, group, grad, learning_rate, step):
        """One step of ``update_rule`` for a group of ``_TorchFlatSlots`` (its flat gradient ``grad``); an
        optimizer with a backend-native fused kernel of its rule may run that instead (same update)."""
        delta, new_slots = self.update_rule(grad, dict(group.slots), learning_rate, step)
        for name, value in new_slots.items():
            group.slots[name].copy_(value)
        group.subtract(delta)

    # --- JAX -------------------------------------------------------------------------------------------------
    # A traced loss cannot be differentiated after the fact: the JAX executor runs an API method that reaches an
    # optimizer as ``jax_backend.differentiating`` (a loss pass under ``jax.value_and_grad`` up to this call,
    # then the whole method with the gradients it computed); the update is ``update_rule`` per variable, assigned
    # functionally. One API call is one jit program.
    @graph_fn(backend="jax")
    def _graph_fn_calculate_gradients(self, variables, loss):
        return self._jax_gradients(variables, loss)

    @graph_fn(backend="jax")
    def _graph_fn_apply_gradients(self, variables, gradients, learning_rate):
        return self._jax_apply(variables, gradients, learning_rate)

    def _jax_gradients(self, variables, loss):
        if self.in_build_run:  # The build infers spaces: a gradient has its variable's.
            return {k: jax.numpy.zeros(v.shape, v.dtype) for k, v in variables.items()}
        from rlgraph.backends.jax_backend import current_tape
        tape = current_tape()
        if tape is None:
            raise RLGraphBackendError(
                f"Optimizer '{self.global_scope}': on JAX gradients are computed inside the JAX executor's API calls "
                f"(rlgraph.backends.jax_backend.differentiating), not in a bare graph function call.")
        return tape.gradients(variables, loss, self.global_scope)

    def _jax_apply(self, variables, gradients, learning_rate):
        jnp = jax.numpy
        keys = self._check_keys(variables, gradients)
        grads = [jnp.asarray(gradients[k]).astype(variables[k].dtype) for k in keys]
        norm = jnp.sqrt(sum(jnp.sum(jnp.square(g.astype(jnp.float32))) for g in grads)) if grads \
            else jnp.zeros((), jnp.float32)
        if self.clip_grad_norm is not None:
            scale = self.clip_grad_norm / jnp.maximum(norm, self.clip_grad_norm)
            grads = [g * scale.astype(g.dtype) for g in grads]
        step = self.ops.assign(self.steps, self.ops.read_value(self.steps) + 1)
        for k, g in zip(keys, grads):
            var = variables[k]
            slots = self._slots_for(k, var)
            dtype = var.dtype
            delta, new_slots = self.update_rule(g, {name: self.ops.read_value(s) for name, s in slots.items()},
                                                jnp.asarray(learning_rate).astype(dtype), step.astype(dtype))
            for name, value in new_slots.items():
                self.ops.assign(slots[name], value)
            self.ops.assign(var, self.ops.read_value(var) - delta)
        return norm

    # --- helpers -----------------------------------------------------------------------------------------------
    def _slots_for(self, key, var):
        """The slot variables of variable ``key`` (created on first use with the variable's shape and dtype)."""
        slots = self.slots.get(key)
        if slots is None:
            shape, dtype = self.backend.shape_and_dtype(var)
            slots = {name: self.get_variable(f"{key}/{name}", shape=shape, dtype=dtype, trainable=False)
                     for name in self.slot_names}
            self.slots[key] = slots
        return slots

    def _check_keys(self, variables, gradients):
        keys = list(variables)
        self.check_at_run_time(
            lambda: set(keys) == set(gradients),
            lambda: f"Optimizer '{self.global_scope}', API method 'apply_gradients': gradients must have the keys of "
                    f"variables; variables: {sorted(keys)}, gradients: {sorted(gradients)}.",
            RLGraphSpaceError)
        return [k for k in keys if k in gradients]


class _TorchFlatSlots:
    """The optimizer's slot variables of a set of PyTorch variables as slices of one flat buffer per slot.

    Variables are grouped by (device, dtype); per group, each slot name has one 1-D buffer, and every
    variable's slot variable is re-pointed (``Tensor.set_``) to its slice of it, so that it stays the same
    tensor object under the same name (checkpoints, ``read_variable_values``) while the update rule runs
    once on the whole group: a dozen vector ops instead of a dozen per variable (the per-variable Python
    loop cost more than the backward pass of small networks).

    Args:
        keys: The variables' keys, in the order of the gradients.
        variables: Key -> variable.
        slots: Per key, slot name -> slot variable (same shape and dtype as the variable).
        slot_names: The slot names.
    """

    class Group:
        """The variables of one (device, dtype): keys, variables, shapes, sizes and the flat slot buffers."""

        def __init__(self, dtype):
            self.dtype = dtype
            self.keys, self.variables, self.shapes, self.sizes = [], [], [], []
            self.slots = {}
            self.slot_views = {}  # slot name -> each variable's slot variable (views of ``slots[name]``)
            self.contiguous = True

        def subtract(self, delta):
            """``variable -= delta`` for each variable, ``delta`` being the group's flat update."""
            torch._foreach_sub_(self.variables, self.views(delta))

        def views(self, flat):
            """A flat vector of the group as one view per variable, in the variables' shapes."""
            return [c.view(s) for c, s in zip(flat.split(self.sizes), self.shapes)]

    def __init__(self, keys, variables, slots, slot_names):
        self.keys = tuple(keys)
        self.variables = [variables[k] for k in keys]
        slots_of = dict(zip(keys, slots))
        groups = {}
        for k, var in zip(keys, self.variables):
            group = groups.get((var.device, var.dtype))
            if group is None:
                group = groups[(var.device, var.dtype)] = self.Group(var.dtype)
            group.keys.append(k)
            group.variables.append(var)
            group.shapes.append(tuple(var.shape))
            group.sizes.append(var.numel())
        self.groups = list(groups.values())
        for group in self.groups:
            members = [slots_of[k] for k in group.keys]
            for name in slot_names:
                # Current values are kept (slots restored from a checkpoint, or of an earlier layout).
                buffer = torch.cat([m[name].detach().reshape(-1) for m in members])
                offset = 0
                for m, shape, size in zip(members, group.shapes, group.sizes):
                    m[name].set_(buffer[offset:offset + size].view(shape))
                    offset += size
                group.slots[name] = buffer
                group.slot_views[name] = [m[name] for m in members]
            # Multi-tensor kernels walk each tensor's memory in order: they need contiguous variables.
            group.contiguous = all(v.is_contiguous() for v in group.variables)
        self.single = len(self.groups) == 1

    def fits(self, keys, variables):
        """Whether this layout serves these variables (same keys, same variable objects, in order)."""
        return tuple(keys) == self.keys and all(variables[k] is v for k, v in zip(keys, self.variables))

    def flat_gradients(self, gradients):
        """Per group, the gradients of its variables concatenated into one vector of the group's dtype."""
        if self.single:
            group = self.groups[0]
            return [torch.cat([gradients[k].reshape(-1) for k in group.keys]).to(group.dtype)]
        return [torch.cat([gradients[k].reshape(-1).to(group.dtype) for k in group.keys]) for group in self.groups]


def _schedule_values(spec):
    """The numbers of a learning-rate spec (a number, or a schedule's start and end values)."""
    if isinstance(spec, (list, tuple)):
        values = spec[1:3]
    elif isinstance(spec, dict):
        values = [spec[k] for k in Schedule.VALUE_KEYS if k in spec]
    else:
        values = [spec]
    return [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
