"""A private moto server behind the local stack's layers (moto_serial.py) for the boto3 checks
in this directory: started on a free loopback port, its output to `log`, ready once moto's
own API answers. `MotoTestCase` gives each test one, and shows its log when the test failed."""

import socket
import subprocess
import sys
import tempfile
import time
import unittest
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


def stop(server: subprocess.Popen) -> None:
    server.terminate()
    try:
        server.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


class MotoTestCase(unittest.TestCase):
    """A test with its own moto_serial.py at `self.url`, stopped after it; when the test failed
    (a subtest, an assertion or a crash), the last 40 lines of the server's log follow."""

    def setUp(self) -> None:
        self.server, self.url = start(self.log)
        self.addCleanup(stop, self.server)

    def run(self, result=None):
        result = result or self.defaultTestResult()
        before = len(result.failures) + len(result.errors)
        with tempfile.TemporaryFile() as self.log:
            super().run(result)
            if len(result.failures) + len(result.errors) > before:
                self.log.seek(0)
                print("moto_serial.py's log (last 40 lines):", file=sys.stderr)
                for line in self.log.read().decode(errors="replace").splitlines()[-40:]:
                    print("  " + line, file=sys.stderr)
        return result
