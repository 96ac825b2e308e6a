"""Synchronous multi-device towers: one copy of an update per device on a slice of the batch, one step.

A device strategy as a graph rewrite done by the executor (RLgraph, Schaarschmidt et al. 2019, Sec. 3.3;
the multi-GPU strategy of its TF executor). For every root API method whose call graph reaches an
``Optimizer``'s ``step`` (an "update" method), the executor runs instead:

1. every batched argument split into K equal slices along its batch axis (axis 1 for time-major arguments
   with a time rank, else 0; read off the argument's space); an ``int`` argument declared as the method's
   ``batch_size_arg`` (``@rlgraph_api(batch_size_arg=...)``, e.g. DQN's ``update_from_memory``, which
   samples its memory in the graph) is divided by K, so that each tower draws its own share; all other
   arguments go to every tower unchanged;
2. the API method once per tower on its slice, on that tower's device (TF: ``tf.device`` inside the one
   ``tf.function``; PyTorch: one after another, each on its device, where a tower on another device than
   the weights' runs on per-device replicas of the variables, ``WeightReplicas``), with every optimizer's ``step``
   rewritten to compute and record the tower's gradients (and learning rate) instead of applying them;
3. the K gradient dicts averaged and applied once per optimizer (one step counter increment, clipping on
   the averaged gradients); all towers read the same weights;
4. the towers' outputs merged: outputs with a batch rank concatenated along their batch axis in tower
   order, other float outputs averaged (a step's gradient norm is replaced by the norm of the averaged
   gradients, where the method returns it unchanged), other outputs taken from tower 0.

Losses that are means over the batch (all of rlgraph's) give the same update as one device on the whole
batch; statistics over the batch inside a loss (e.g. IMPALA's and APPO's ``normalize_advantages``) are per tower.

JAX does this the XLA way instead of steps 2-4: the update stays one program, its batched arguments sharded over a
``Mesh`` of the towers' devices along their batch axes and the variables replicated, and XLA's SPMD partitioner
runs each device's share of the batch there and all-reduces the gradients (``rlgraph.executors.jax_executor``);
step 1's split rules and divisibility check are the same. Statistics over the batch are over the whole batch.
"""
import contextlib
import functools
import logging
import re

import numpy as np

from rlgraph.components.optimizers.optimizer import Optimizer
from rlgraph.executors.device_strategy import DeviceStrategy, parse_device
from rlgraph.graphs.meta_graph import APICall
from rlgraph.graphs.records import Record
from rlgraph.spaces import Space
from rlgraph.utils.errors import RLGraphAPIError, RLGraphBuildError, RLGraphSpaceError, RLGraphSpecError

logger = logging.getLogger(__name__)

#: Split rule of an ``int`` argument that is a batch size (divided by the number of towers).
DIVIDE = "divide"
_DEVICE_KINDS = re.compile(r".*:(CPU|GPU):\d+$")


class MultiDeviceSyncStrategy(DeviceStrategy):
    """Synchronous data-parallel towers over ``devices`` (see the module's doc).

    Args:
        devices: One device string per tower ("gpu:0", "cuda:1", "cpu", "cpu:1", "/device:GPU:0"); a device
            may repeat (several towers on one device). On TensorFlow every device must exist
            (``tf.config.list_logical_devices``; logical CPU devices with ``set_logical_device_configuration``).
            On PyTorch every CUDA device must exist ("cpu:i" counts as "cpu"); a tower on another device than
            the weights' (the root's ``device``, default the CPU) runs on replicas of the variables on its
            device (``rlgraph.executors.weight_replicas``), and its gradients are averaged where the weights
            are. On JAX every device must exist (``jax.devices(kind)``; several CPU devices with
            ``XLA_FLAGS=--xla_force_host_platform_device_count=N``); the batch is sharded over the distinct ones.
        where: The config path named in errors.

    Attributes:
        plans: Root API method name -> its ``TowerPlan`` (after ``prepare``).
        tower_devices: The backend's names of the towers' devices (after ``prepare``).
    """

    type_name = "multi_device_sync"
    #: PyTorch: run every tower on replicas, even on the weights' own device (copies there). Tests set it to
    #: exercise the replica path of several devices on a machine with one.
    replicate_on_one_device = False

    def __init__(self, devices, where="device_strategy"):
        if isinstance(devices, str) or not isinstance(devices, (list, tuple)) or not devices:
            raise RLGraphSpecError(f"{where}.devices: 'multi_device_sync' needs a non-empty list of devices, one "
                                   f"per tower (e.g. [\"gpu:0\", \"gpu:1\"]), got {devices!r}.")
        self.where = where
        self.devices = list(devices)
        self.parsed = [parse_device(d, f"{where}.devices[{i}]") for i, d in enumerate(self.devices)]
        self.num_towers = len(self.devices)
        self.plans = {}
        self.tower_devices = None
        self.ops = None

    def to_spec(self):
        return {"type": self.type_name, "devices": list(self.devices)}

    def __repr__(self):
        return f"MultiDeviceSyncStrategy(devices={self.devices})"

    # --- build --------------------------------------------------------------------------------------------
    def prepare(self, executor):
        backend = executor.backend.name
        self.tower_devices = self._check_devices(backend, executor.root)
        if backend == "jax":
            self.ops = None  # JAX: no rewrite; the executor shards the batch of one program over the devices.
        else:
            self.ops = _TFOps() if backend == "tf" else _TorchOps(executor.root, self.tower_devices,
                                                                   self.replicate_on_one_device)
        meta = executor.meta_graph
        self.plans = {}
        for name, call in meta.api.items():
            optimizers = _optimizers_stepped(call)
            if optimizers:
                self.plans[name] = TowerPlan(name, executor.root, call, optimizers, executor.input_spaces,
                                             self.num_towers)
        meta.towers = {name: list(self.tower_devices) for name in self.plans}
        if self.plans:
            logger.info("multi_device_sync: %d towers on %s for %s.", self.num_towers, self.tower_devices,
                        ", ".join(self.plans))

    def _check_devices(self, backend, root):
        where = f"{self.where}.devices"
        if backend == "tf":
            pinned = [c.global_scope for c in root.get_all_sub_components(include_self=True) if c._device]
            if pinned:
                raise RLGraphSpecError(f"{where}: the towers place the update's components, but {pinned[:3]} have "
                                       f"their own device (an agent's or component's 'device'), which would override "
                                       f"the towers' placement; leave 'device' out with a multi-device strategy.")
            from rlgraph.utils.backend import tf
            names = [d.name for d in tf.config.list_logical_devices()]
            # Multi-worker names carry a job prefix ("/job:worker/replica:0/task:1/device:CPU:0").
            have = {parse_device(n.rsplit("/device:", 1)[-1]) for n in names if _DEVICE_KINDS.match(n)}
            out = []
            for i, (kind, idx) in enumerate(self.parsed):
                if (kind, idx) not in have:
                    count = sum(1 for k, _ in have if k == kind)
                    raise RLGraphSpecError(
                        f"{where}[{i}]: device {self.devices[i]!r} does not exist: TensorFlow has {count} "
                        f"{kind.upper()} device(s) ({', '.join(names)}). Name existing devices (for several "
                        f"towers on one CPU, repeat 'cpu', or create logical CPU devices with "
                        f"tf.config.set_logical_device_configuration before TensorFlow initialises).")
                out.append(f"/device:{kind.upper()}:{idx}")
            return out
        if backend == "jax":
            return _jax_devices(self.parsed, self.devices, where)
        from rlgraph.utils.backend import torch
        available = torch.cuda.device_count()
        out = []
        for i, (kind, idx) in enumerate(self.parsed):
            if kind == "gpu" and idx >= available:
                raise RLGraphSpecError(f"{where}[{i}]: device {self.devices[i]!r} does not exist: PyTorch sees "
                                       f"{available} CUDA device(s).")
            out.append("cpu" if kind == "cpu" else f"cuda:{idx}")
        return out

    # --- execution ------------------------------------------------------------------------------------------
    def wrap_api_method(self, name, fn):
        plan = self.plans.get(name)
        if plan is None:
            return fn
        ops, devices, k = self.ops, self.tower_devices, self.num_towers
        params = plan.params

        @functools.wraps(fn)
        def towers(*args, **kwargs):
            values = dict(zip(params, args))
            values.update(kwargs)
            slices = [dict() for _ in range(k)]
            for p, v in values.items():
                rule = plan.split_rules.get(p)
                parts = [v] * k if rule is None else _split(v, rule, k, ops)
                for s, part in zip(slices, parts):
                    s[p] = part
            collector = _GradientCollector(ops, plan, k, self._reduce_gradients)
            outputs = []
            with collector:
                for i, device in enumerate(devices):
                    collector.tower = i
                    with ops.device(device):
                        outputs.append(fn(**ops.place(slices[i], device)))
            collector.apply()
            return ops.home(_merge(plan.output_rules, outputs, ops, collector))
        return self._wrap_towers(towers)

    def _reduce_gradients(self, gradients):
        """The gradients one step applies, from the towers' mean (a dict); subclasses reduce further."""
        return gradients

    def _wrap_towers(self, towers):
        """What the executor runs for an update method, from its towers' function (subclasses wrap it)."""
        return towers

    def wrap_call(self, name, call):
        plan = self.plans.get(name)
        if plan is None:
            return call
        params, k = plan.params, self.num_towers

        def checked(*args, **kwargs):
            values = dict(zip(params, args))
            values.update(kwargs)
            for p, rule in plan.split_rules.items():
                if p in values and values[p] is not None:
                    # Wrong types pass on to the executor's own checks, which name what was expected.
                    size = (int(values[p]) if isinstance(values[p], (int, np.integer)) else None) \
                        if rule == DIVIDE else _batch_size(values[p], rule)
                    if size is not None and size % k:
                        raise RLGraphSpaceError(
                            f"API method '{name}' of '{plan.component}', argument '{p}': a batch of {size} does not "
                            f"divide over {k} towers (device_strategy multi_device_sync on {self.devices}); use a "
                            f"multiple of {k} (replay agents: update_spec.batch_size; IMPALA/APPO: the environment "
                            f"columns per update, environment_spec.num_envs / num_minibatches).")
            return call(*args, **kwargs)
        return checked


def _jax_devices(parsed, devices, where):
    """JAX: "cpu:i" / "gpu:i" of each tower's XLA device (``jax.devices(kind)[i]``), checked to exist."""
    from rlgraph.utils.backend import jax
    out = []
    for i, (kind, idx) in enumerate(parsed):
        try:
            available = len(jax.devices(kind))
        except RuntimeError:  # No backend of that platform.
            available = 0
        if idx >= available:
            raise RLGraphSpecError(
                f"{where}[{i}]: device {devices[i]!r} does not exist: JAX has {available} {kind.upper()} device(s) "
                f"({', '.join(str(d) for d in jax.devices())}); for several CPU devices set "
                f"XLA_FLAGS=--xla_force_host_platform_device_count=N before JAX initialises.")
        out.append(f"{kind}:{idx}")
    return out


class TowerPlan:
    """How one root API method is split over towers: its argument split rules and output merge rules.

    Attributes:
        params: The API method's parameter names, in order.
        split_rules: Parameter name -> ``DIVIDE`` (a batch-size int) or a nested structure of batch axes
            (None: the leaf has no batch rank and goes to every tower whole). Parameters without a rule go to
            every tower unchanged.
        output_rules: The outputs' structure with a rule per leaf: ``("concat", axis)``, ``("mean",)``,
            ``("first",)``.
        optimizers: The optimizers whose ``step`` the method calls.
    """

    def __init__(self, name, root, call, optimizers, input_spaces, num_towers):
        info = root.api_methods[name]
        self.name, self.component = name, root.global_scope
        self.params = [p.name for p in info.params]
        self.optimizers = optimizers
        self.split_rules = {}
        for p in self.params:
            space = input_spaces.get(p)
            if p == info.batch_size_arg:
                if space is not int:
                    raise RLGraphBuildError(f"API method '{name}' of '{self.component}': its batch_size_arg '{p}' "
                                            f"must have input space int, got {space!r}.")
                self.split_rules[p] = DIVIDE
            elif isinstance(space, Space):
                axes = space.unflatten({key: s.batch_axis if s.has_batch_rank else None
                                        for key, s in space.flatten().items()})
                if any(a is not None for a in _leaves(axes)):
                    self.split_rules[p] = axes
        if not self.split_rules:
            raise RLGraphBuildError(
                f"API method '{name}' of '{self.component}' steps {[o.global_scope for o in optimizers]} but has no "
                f"argument with a batch rank to split over {num_towers} towers; give it a batched input, or declare "
                f"the int argument that is its batch size with @rlgraph_api(batch_size_arg=...).")
        self.output_rules = _output_rules(call.outputs)


def _optimizers_stepped(call):
    """The optimizers whose ``step`` API method the call graph of ``call`` reaches (in call order, unique)."""
    found = []

    def walk(c):
        if isinstance(c.component, Optimizer) and c.info.name == "step" and c.component not in found:
            found.append(c.component)
        for sub in c.calls:
            if isinstance(sub, APICall):
                walk(sub)
    walk(call)
    return found


def _output_rules(out):
    if isinstance(out, Record):
        space = out.space
        if isinstance(space, Space):
            return space.unflatten({k: _leaf_rule(s) for k, s in space.flatten().items()})
        return ("mean",) if space is float else ("first",)
    if isinstance(out, dict):
        return {k: _output_rules(v) for k, v in out.items()}
    if isinstance(out, (tuple, list)):
        return tuple(_output_rules(v) for v in out)
    return None


def _leaf_rule(space):
    if space.has_batch_rank:
        return ("concat", space.batch_axis)
    if np.dtype(space.dtype).kind == "f":
        return ("mean",)
    return ("first",)


def _leaves(structure):
    if isinstance(structure, dict):
        return [x for v in structure.values() for x in _leaves(v)]
    if isinstance(structure, (tuple, list)):
        return [x for v in structure for x in _leaves(v)]
    return [structure]


def _split(value, rule, k, ops):
    """``value`` in ``k`` tower slices (``rule``: ``DIVIDE`` or the nested batch axes of its leaves)."""
    if rule == DIVIDE:
        return [value // k] * k
    if isinstance(rule, dict):
        parts = {key: _split(value[key], r, k, ops) for key, r in rule.items()}
        return [{key: p[i] for key, p in parts.items()} for i in range(k)]
    if isinstance(rule, tuple):
        parts = [_split(value[j], r, k, ops) for j, r in enumerate(rule)]
        return [tuple(p[i] for p in parts) for i in range(k)]
    if rule is None or value is None:
        return [value] * k
    return ops.split(value, k, rule)


def _batch_size(value, axes):
    """The batch size of a numpy argument: the size along the batch axis of its first batched leaf."""
    if isinstance(axes, dict):
        for key, a in axes.items():
            if isinstance(value, dict) and key in value:
                size = _batch_size(value[key], a)
                if size is not None:
                    return size
        return None
    if isinstance(axes, tuple):
        for j, a in enumerate(axes):
            if isinstance(value, (tuple, list)) and j < len(value):
                size = _batch_size(value[j], a)
                if size is not None:
                    return size
        return None
    if axes is None:
        return None
    try:
        shape = np.shape(value)
    except ValueError:  # A ragged value: the executor's checks report it.
        return None
    return int(shape[axes]) if len(shape) > axes else None


def _merge(rule, outputs, ops, collector):
    """The towers' outputs merged by ``rule`` (see ``TowerPlan.output_rules``)."""
    if isinstance(rule, dict):
        return {key: _merge(r, [o[key] for o in outputs], ops, collector) for key, r in rule.items()}
    if isinstance(rule, tuple) and (not rule or not isinstance(rule[0], str)):
        return tuple(_merge(r, [o[j] for o in outputs], ops, collector) for j, r in enumerate(rule))
    if rule is None or outputs[0] is None:
        return outputs[0]
    if rule[0] == "concat":
        return ops.concat(outputs, rule[1])
    if rule[0] == "mean":
        norm = collector.global_norm_of(outputs)
        return norm if norm is not None else ops.mean(outputs)
    return outputs[0]


class _GradientCollector:
    """While active, the plan's optimizers' ``step`` records each tower's gradients instead of applying them.

    The rewrite replaces the optimizer's bound ``_graph_fn_step`` (the step's numerics) by one that calls the
    optimizer's own ``calculate_gradients`` graph function; ``apply`` then calls its ``apply_gradients``
    graph function once on the averaged gradients.
    """

    def __init__(self, ops, plan, num_towers, reduce=None):
        self.ops, self.plan = ops, plan
        self.reduce = reduce or (lambda gradients: gradients)
        self.records = [[] for _ in range(num_towers)]
        self.tower = 0
        self._saved = {}
        self._norms = {}  # id(a tower's gradient norm) -> the norm of the averaged gradients

    def __enter__(self):
        for opt in self.plan.optimizers:
            self._saved[opt] = opt.__dict__.get("_graph_fn_step")
            opt.__dict__["_graph_fn_step"] = functools.partial(self._collect, opt)
        return self

    def __exit__(self, *exc):
        for opt, fn in self._saved.items():
            if fn is None:
                opt.__dict__.pop("_graph_fn_step", None)
            else:
                opt.__dict__["_graph_fn_step"] = fn
        self._saved = {}

    def _collect(self, opt, variables, loss, learning_rate):
        tower = self.records[self.tower]
        if any(o is opt for o, *_ in tower):
            raise RLGraphAPIError(f"API method '{self.plan.name}' of '{self.plan.component}' steps optimizer "
                                  f"'{opt.global_scope}' twice in one call; multi_device_sync averages one step per "
                                  f"optimizer and call.")
        grads = opt._graph_fn_calculate_gradients(variables, loss)
        norm = self.ops.global_norm(list(grads.values()))
        tower.append((opt, variables, grads, learning_rate, norm))
        return self.ops.stop_gradient(loss), norm

    def apply(self):
        first = self.records[0]
        for i, tower in enumerate(self.records[1:], 1):
            if [r[0] for r in tower] != [r[0] for r in first]:
                raise RLGraphAPIError(f"API method '{self.plan.name}': tower {i} stepped other optimizers than "
                                      f"tower 0; every tower must run the same steps.")
        for j, (opt, variables, grads, learning_rate, _) in enumerate(first):
            mean = self.reduce({key: self.ops.mean([tower[j][2][key] for tower in self.records]) for key in grads})
            norm = opt._graph_fn_apply_gradients(variables, mean, learning_rate)
            for tower in self.records:
                self._norms[id(tower[j][4])] = norm

    def global_norm_of(self, outputs):
        """The averaged gradients' norm, where ``outputs`` are the towers' own gradient norms (else None)."""
        if not all(id(o) in self._norms for o in outputs):
            return None
        norms = {id(self._norms[id(o)]) for o in outputs}
        return self._norms[id(outputs[0])] if len(norms) == 1 else None


class _TFOps:
    """The tensor operations of the rewrite on TensorFlow."""

    def __init__(self):
        from rlgraph.utils.backend import tf
        self.tf = tf

    def device(self, device):
        return self.tf.device(device)

    def place(self, values, device):
        return values  # Inside ``tf.device`` TensorFlow copies the inputs where the ops run.

    def home(self, values):
        return values

    def split(self, x, k, axis):
        return self.tf.split(x, k, axis=axis)

    def concat(self, xs, axis):
        return self.tf.concat(xs, axis=axis)

    def mean(self, xs):
        if len(xs) == 1:
            return xs[0]
        return self.tf.add_n(xs) / self.tf.cast(len(xs), xs[0].dtype)

    def global_norm(self, grads):
        tf = self.tf
        if not grads:
            return tf.constant(0.0)
        return tf.sqrt(tf.add_n([tf.reduce_sum(tf.square(tf.cast(g, tf.float32))) for g in grads]))

    def stop_gradient(self, x):
        return self.tf.stop_gradient(x)


class _TorchOps:
    """The tensor operations of the rewrite on PyTorch (towers run one after another, each on its device).

    Args:
        root: The root component (its ``device`` is where the weights are, default the CPU).
        devices: The towers' torch devices.
        always_copy: Replicas even for towers on the weights' device (see ``WeightReplicas``).
    """

    def __init__(self, root, devices, always_copy=False):
        from rlgraph.executors.weight_replicas import WeightReplicas
        from rlgraph.utils.backend import torch
        self.torch = torch
        self.home_device = torch.device(root.backend.normalize_device(root.device) or "cpu")
        self.replicas = None
        if always_copy or any(torch.device(d) != self.home_device for d in devices):
            # Optimizer variables (slots, step counters) are only used by the one step on the averaged
            # gradients, where the weights are.
            skip = {id(v) for c in root.get_all_sub_components(include_self=True) if isinstance(c, Optimizer)
                    for v in c.variable_registry.values()}
            variables = [v for v in root.all_variables().values() if id(v) not in skip]
            self.replicas = WeightReplicas(variables, self.home_device, always_copy)

    def device(self, device):
        if self.replicas is None:
            return contextlib.nullcontext()
        return self.replicas.on(device)

    def place(self, values, device):
        if self.replicas is None or not self.replicas.needed(device):
            return values
        return self._to(values, self.torch.device(device), True)

    def home(self, values):
        """``values`` where the weights are (blocking: a device-to-host copy must be complete when read)."""
        return values if self.replicas is None else self._to(values, self.home_device, False)

    def _to(self, values, device, non_blocking):
        if isinstance(values, self.torch.Tensor):
            return values.to(device, non_blocking=non_blocking)
        if isinstance(values, dict):
            return {k: self._to(v, device, non_blocking) for k, v in values.items()}
        if isinstance(values, (tuple, list)):
            return type(values)(self._to(v, device, non_blocking) for v in values)
        return values

    def split(self, x, k, axis):
        return list(self.torch.split(x, x.shape[axis] // k, dim=axis))

    def concat(self, xs, axis):
        return self.torch.cat(self.home(list(xs)), dim=axis)

    def mean(self, xs):
        if len(xs) == 1:
            return self.home(xs[0])
        xs = self.home(list(xs))
        out = xs[0]
        for x in xs[1:]:
            out = out + x
        return out / len(xs)

    def global_norm(self, grads):
        torch = self.torch
        with torch.no_grad():
            if not grads:
                return torch.tensor(0.0)
            return torch.sqrt(sum(torch.sum(torch.square(g.to(torch.float32))) for g in grads))

    def stop_gradient(self, x):
        return x.detach()


__all__ = ["MultiDeviceSyncStrategy", "TowerPlan"]
