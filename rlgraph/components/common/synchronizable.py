"""Target networks: a wrapper that adds a hard or soft (Polyak) ``sync`` to any component."""
import numbers
import types

from rlgraph.components.component import Component
from rlgraph.utils.decorators import graph_fn, rlgraph_api
from rlgraph.utils.errors import RLGraphAPIError, RLGraphError, RLGraphSpaceError


def _forwarding_api(name, info):
    """An API method (wrapper, info) that calls API method ``name`` of ``self.component`` with its arguments."""
    def forward(self, *args, **kwargs):
        return getattr(self.component, name)(*args, **kwargs)
    forward.__name__ = forward.__qualname__ = name
    forward.__doc__ = f"Forwards to API method '{name}' of the wrapped component."
    forward.__signature__ = info.signature
    wrapper = rlgraph_api(forward, name=name, must_be_complete=info.must_be_complete)
    return wrapper, wrapper._rlgraph_api


class Synchronizable(Component):
    """Wraps a component (typically a copy of a network: a target network) and adds ``sync``.

    The wrapper exposes every API method of the wrapped component unchanged (``call``, ...), including
    ``variables()``, whose keys are relative to the wrapped component. So a target network built as
    ``Synchronizable(network.copy(scope="target"))`` has the same variable keys as ``network`` and is
    synced with ``target.sync(network.variables(), tau)`` from their common parent; it is not trained
    unless passed to an optimizer.

    ``sync`` copies each source variable into the wrapped component's variable of the same key:
    ``target = tau * source + (1 - tau) * target`` (Polyak averaging, e.g. DDPG/SAC), a plain copy for
    ``tau = 1`` (DQN-style hard updates, Mnih et al. 2015). Keys and shapes must match; a mismatch raises
    ``RLGraphSpaceError`` naming the keys.

    API:
        sync(source_variables, tau=1.0): Updates the wrapped component's variables from ``source_variables``
            (a dict as returned by ``variables()``); ``tau`` in (0, 1].
        variables(): The wrapped component's trainable variables, keyed relative to it.
        Every other API method of the wrapped component.

    Args:
        component: The component whose variables are synced (it becomes this one's only sub-component).
        scope: This wrapper's scope (default: ``"<wrapped scope>-sync"``).
    """

    def __init__(self, component, scope=None, **kwargs):
        if not isinstance(component, Component):
            raise RLGraphError(f"Synchronizable: expected a Component to wrap, got {component!r}.")
        super().__init__(component, scope=scope or f"{component.scope}-sync", **kwargs)
        self.component = component
        self._forwarded = {}
        for name, info in component.api_methods.items():
            if name in self.api_methods:
                if name in ("sync",):
                    raise RLGraphAPIError(f"Synchronizable: the wrapped component '{component.scope}' already has an "
                                          f"API method '{name}'.")
                continue  # variables(): defined here, forwarding as well.
            wrapper, new_info = _forwarding_api(name, info)
            self._forwarded[name] = wrapper
            self.api_methods[name] = new_info

    def __getattr__(self, name):
        # Forwarded API methods (until the build binds their implementations on the instance).
        forwarded = self.__dict__.get("_forwarded")
        if forwarded is not None and name in forwarded:
            return types.MethodType(forwarded[name], self)
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    @rlgraph_api
    def variables(self):
        return self.component.variables()

    @rlgraph_api
    def sync(self, source_variables, tau=1.0):
        # A constant tau is checked while the graph is assembled (not yet built), a tau input at run time.
        if not self.built and isinstance(tau, (int, float)) and not isinstance(tau, bool) and not 0.0 < tau <= 1.0:
            raise RLGraphSpaceError(f"Synchronizable '{self.global_scope}', API method 'sync', argument 'tau': "
                                    f"expected a number in (0, 1], got {tau!r}.")
        return self._graph_fn_sync(source_variables, self.component.variables(), tau)

    def _pairs(self, source, target):
        """(source, target) variable pairs; checks shapes, and keys outside the build runs.

        During the build the variable dicts may still be partial (sub-components create their variables in
        the order their inputs become known), so only keys present in both are paired then.
        """
        self.check_at_run_time(
            lambda: set(target) == set(source),
            lambda: f"Synchronizable '{self.global_scope}', API method 'sync', argument 'source_variables': keys "
                    f"must equal those of the wrapped component's variables(); missing: "
                    f"{sorted(set(target) - set(source))}, unexpected: {sorted(set(source) - set(target))}.",
            RLGraphSpaceError)
        pairs = []
        for key, var in target.items():
            if key not in source:
                continue
            src_shape = tuple(self.backend.shape_and_dtype(source[key])[0])
            own_shape = tuple(self.backend.shape_and_dtype(var)[0])
            if src_shape != own_shape:
                raise RLGraphSpaceError(f"Synchronizable '{self.global_scope}', API method 'sync': variable '{key}' "
                                        f"has shape {own_shape}, but the source's has shape {src_shape}.")
            pairs.append((source[key], var))
        return pairs

    @graph_fn
    def _graph_fn_sync(self, source_variables, own_variables, tau):
        ops = self.ops
        pairs = self._pairs(source_variables, own_variables)
        message = f"Synchronizable {self.global_scope}, API method sync: tau must lie in (0, 1]"
        if isinstance(tau, numbers.Number):  # A Python number: PyTorch's input, or a constant (API-checked).
            tau = float(tau)
            self.check_at_run_time(0.0 < tau <= 1.0, lambda: f"{message}, got {tau!r}.")
        else:  # A tensor (TF's input): checked when the graph runs.
            tau = ops.cast(tau, "float32")
            if not self.in_build_run:  # The updates are computed from the checked tau: none after a failure.
                tau = ops.check(ops.logical_and(tau > 0.0, tau <= 1.0), message, tau)
        for source, var in pairs:
            source, own = ops.stop_gradient(source), ops.stop_gradient(var)  # Constants: no backward pass.
            if isinstance(tau, float):
                ops.assign(var, source if tau == 1.0 else tau * source + (1.0 - tau) * own)
            else:
                t = ops.cast(tau, ops.dtype(var))
                ops.assign(var, t * source + (1.0 - t) * own)
