"""Device strategies: how a graph executor places a built graph's API methods on devices.

A device strategy is a rewrite of the graph done by the executor, never code in an agent or an algorithm
component (RLgraph: Schaarschmidt et al. 2019, "RLgraph: Modular Computation Graphs for Deep Reinforcement
Learning", Sec. 3.3: device strategies as graph rewrites). The default strategy places nothing (every
component on its own ``device``, else the backend's default); ``"multi_device_sync"`` runs each update
API method as one tower per device on a slice of the batch and applies the averaged gradients once (see
``rlgraph.executors.multi_device_sync``).

Spec forms (an executor's or agent's ``device_strategy`` argument, or a config's
``execution_spec.device_strategy`` with ``execution_spec.devices``)::

    None or "default"                                        # one device
    {"type": "multi_device_sync", "devices": ["gpu:0", "gpu:1"]}
    "multi_device_sync" (with devices=[...] beside it)
    {"type": "distributed_sync", "devices": None}            # learner processes (set by the distributed engine)
"""
import re

from rlgraph.utils.errors import RLGraphSpecError

#: Names of the strategies (``device_strategy`` values).
STRATEGIES = ("default", "multi_device_sync", "distributed_sync")

_DEVICE = re.compile(r"^/?(?:device:)?(cpu|gpu|cuda)(?::(\d+))?$", re.IGNORECASE)


def parse_device(device, where="devices"):
    """``(kind, index)`` of a device string: kind "cpu" or "gpu" ("cuda" is "gpu"), index an int.

    Accepts "cpu", "cpu:1", "gpu:0", "cuda:1", "/gpu:0", "/device:GPU:1" (any case).

    Raises:
        RLGraphSpecError: If the string does not parse (names ``where``).
    """
    match = _DEVICE.match(device.strip()) if isinstance(device, str) else None
    if match is None:
        raise RLGraphSpecError(f"{where}: cannot parse device {device!r}; expected e.g. 'cpu', 'cpu:1', 'gpu:0', "
                               f"'cuda:1' or '/device:GPU:0'.")
    kind = "gpu" if match.group(1).lower() in ("gpu", "cuda") else "cpu"
    return kind, int(match.group(2) or 0)


class DeviceStrategy:
    """The default strategy: the graph runs as built (components on their own devices).

    Subclasses rewrite API methods: ``prepare`` sees the built meta graph; ``wrap_api_method`` returns what
    the backend executor runs (traces) in place of a root API method; ``wrap_call`` may check the numpy
    arguments of a call before the backend sees them.
    """

    type_name = "default"

    def prepare(self, executor):
        """Validates the strategy against the built graph and backend of ``executor``; notes its rewrites."""

    def wrap_api_method(self, name, fn):
        """What the executor runs for root API method ``name`` (default: the bound method ``fn`` itself)."""
        return fn

    def wrap_call(self, name, call):
        """The executor's numpy-level callable for ``name`` (default: ``call`` unchanged)."""
        return call

    def to_spec(self):
        return {"type": self.type_name}

    def __repr__(self):
        return f"{type(self).__name__}()"


def make_device_strategy(spec, devices=None, where="device_strategy"):
    """The ``DeviceStrategy`` for a spec (see the module's doc); None and "default" give the default one.

    Args:
        spec: None, a strategy name, a dict with "type" (and "devices"), or a ``DeviceStrategy``.
        devices: The devices, where ``spec`` is a name (a config's ``execution_spec.devices``).
        where: The config path named in errors.

    Raises:
        RLGraphSpecError: Unknown strategy or keys, missing or unparsable devices.
    """
    if isinstance(spec, DeviceStrategy):
        return spec
    if spec is None or isinstance(spec, str):
        spec = {"type": spec or "default"}
        if devices is not None:
            spec["devices"] = devices
    elif isinstance(spec, dict):
        spec = dict(spec)
        if devices is not None and spec.setdefault("devices", devices) != devices:
            raise RLGraphSpecError(f"{where}: devices given twice ({spec['devices']!r} and {devices!r}).")
    else:
        raise RLGraphSpecError(f"{where}: expected None, one of {list(STRATEGIES)} or a dict with 'type', got "
                               f"{spec!r}.")
    kind = str(spec.pop("type", "default")).strip().lower().replace("-", "_")
    if kind not in STRATEGIES:
        raise RLGraphSpecError(f"{where}: unknown device strategy {kind!r}; expected one of {list(STRATEGIES)}.")
    if kind == "default":
        if spec.get("devices") not in (None, []):
            raise RLGraphSpecError(f"{where}: devices {spec['devices']!r} need device_strategy "
                                   f"'multi_device_sync' (the default strategy places nothing).")
        return DeviceStrategy()
    unknown = sorted(set(spec) - {"devices"})
    if unknown:
        raise RLGraphSpecError(f"{where}: unknown key(s) {unknown} of {kind!r} (accepted: devices).")
    if kind == "distributed_sync":
        from rlgraph.executors.distributed_sync import DistributedSyncStrategy
        return DistributedSyncStrategy(spec.get("devices"), where=where)
    from rlgraph.executors.multi_device_sync import MultiDeviceSyncStrategy
    return MultiDeviceSyncStrategy(spec.get("devices"), where=where)


__all__ = ["DeviceStrategy", "STRATEGIES", "make_device_strategy", "parse_device"]
