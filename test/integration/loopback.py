"""What every server the tests start on loopback needs: a free port, and a stop by process group."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import urllib.request
import time
from typing import Callable


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def accepts(port: int) -> bool:
    """Whether something accepts TCP connections on 127.0.0.1:``port``."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def answers(url: str) -> bool:
    """Whether ``url`` answers a GET with a success status."""
    try:
        with urllib.request.urlopen(url, timeout=1):
            return True
    except OSError:
        return False


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


def start_listening(command: Callable[[int], list[str]], ready: Callable[[int], bool], log=subprocess.PIPE,
                    what: str = "server", timeout: float = 30) -> tuple[subprocess.Popen, int]:
    """Starts ``command(port)`` on a free port in a process group of its own, until ``ready(port)``
    answers (five ports tried); the process and its port."""
    for _ in range(5):
        port = free_port()
        process = subprocess.Popen(command(port), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and process.poll() is None:
            if ready(port):
                return process, port
            time.sleep(0.1)
        stop_group(process)
    raise RuntimeError(f"{what} did not start")
