"""What every server the tests start on loopback needs: a free port, and a stop by process group."""

from __future__ import annotations

import os
import signal
import socket
import subprocess


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop_group(process: subprocess.Popen, timeout: float = 10) -> None:
    """SIGTERM to the process group ``process`` leads (started with ``start_new_session``), SIGKILL
    if it has not ended within ``timeout`` seconds."""
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=timeout)
