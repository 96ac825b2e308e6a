"""The distributed engine's control channel: framed JSON headers with raw numpy payloads over TCP.

A frame is ``[4 bytes header length][8 bytes payload length][header: UTF-8 JSON][payload: .npz]``. Arrays
travel as an ``.npz`` archive read with ``allow_pickle=False``: nothing received is ever unpickled.
"""
import io
import json
import socket
import struct
import time

import numpy as np

from rlgraph.utils.errors import RLGraphLearnerGroupError

_PREFIX = struct.Struct("!IQ")
#: The largest header accepted (a header holds a command and small statistics, never arrays).
MAX_HEADER = 64 << 20


class ControlChannel:
    """One end of a control connection (``send(header, arrays)``, ``recv(timeout)``)."""

    def __init__(self, sock, peer):
        self.sock, self.peer = sock, peer
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def send(self, header, arrays=None):
        payload = b""
        if arrays:
            buf = io.BytesIO()
            np.savez(buf, **arrays)
            payload = buf.getvalue()
        body = json.dumps(header).encode()
        try:
            self.sock.sendall(_PREFIX.pack(len(body), len(payload)) + body + payload)
        except OSError as e:
            raise RLGraphLearnerGroupError(f"{self.peer}: the control connection broke ({e}).") from None

    def recv(self, timeout=None):
        """``(header, arrays)`` of the next frame; waits at most ``timeout`` seconds (None: forever)."""
        self.sock.settimeout(timeout)
        try:
            head_len, payload_len = _PREFIX.unpack(self._read(_PREFIX.size))
            if head_len > MAX_HEADER:
                raise RLGraphLearnerGroupError(f"{self.peer}: a control header of {head_len} bytes; not a learner "
                                               f"of this run.")
            header = json.loads(self._read(head_len))
            arrays = None
            if payload_len:
                with np.load(io.BytesIO(self._read(payload_len)), allow_pickle=False) as f:
                    arrays = {k: f[k] for k in f.files}
        except socket.timeout:
            raise RLGraphLearnerGroupError(f"{self.peer} did not answer within {timeout:g} s.") from None
        except (OSError, ValueError) as e:
            raise RLGraphLearnerGroupError(f"{self.peer}: the control connection broke ({e}).") from None
        if not isinstance(header, dict):
            raise RLGraphLearnerGroupError(f"{self.peer}: a malformed control message.")
        return header, arrays

    def _read(self, n):
        chunks, got = [], 0
        while got < n:
            chunk = self.sock.recv(min(n - got, 1 << 20))
            if not chunk:
                raise ConnectionError("closed by the other side")
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def connect(host, port, timeout, peer):
    """A ``ControlChannel`` to ``host:port``, retrying until ``timeout`` seconds have passed."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            sock = socket.create_connection((host, port), timeout=max(0.1, deadline - time.monotonic()))
            return ControlChannel(sock, peer)
        except OSError as e:
            if time.monotonic() >= deadline:
                raise RLGraphLearnerGroupError(f"{peer} at {host}:{port} did not answer within {timeout:g} s "
                                               f"({e}).") from None
            time.sleep(0.2)


def free_port(host="127.0.0.1"):
    """A TCP port on ``host`` that nothing listens on now."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]
