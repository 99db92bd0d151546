"""A private moto server behind the local stack's layers (moto_serial.py) for the boto3 checks
in this directory: started on a free loopback port, its output to `log`, ready once moto's
own API answers."""

import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

SERVER = Path(__file__).resolve().parent.parent / "moto_serial.py"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(log) -> tuple[subprocess.Popen, str]:
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, str(SERVER), "-H", "127.0.0.1", "-p", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(150):
        if server.poll() is not None:
            break
        try:
            with urllib.request.urlopen(url + "/moto-api/", timeout=1):
                return server, url
        except OSError:
            time.sleep(0.1)
    server.kill()
    raise RuntimeError(f"moto_serial.py did not start on port {port}")
