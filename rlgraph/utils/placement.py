"""Where PyTorch graph functions put the tensors they make from host (numpy) data.

A graph function that turns numpy data into tensors (a memory's sampled records) puts them on its
component's device; while a device strategy runs a tower on another device (per-device weight replicas),
``placed_on`` names that device instead, so that the records meet the tower's weights.
"""
import contextlib
import threading

_state = threading.local()


def host_data_device(default=None):
    """The device tensors made from host data go to: the active ``placed_on`` device, else ``default``."""
    return getattr(_state, "device", None) or default


@contextlib.contextmanager
def placed_on(device):
    """Within: ``host_data_device`` is ``device`` (this thread only)."""
    before = getattr(_state, "device", None)
    _state.device = device
    try:
        yield
    finally:
        _state.device = before


__all__ = ["host_data_device", "placed_on"]
