"""A real portal process (``streamlit run app.py`` on 127.0.0.1) and a minimal Streamlit client: one
WebSocket connection with chosen request headers, one script run, the text it shows.

No browser: what a hostile local user can send with any HTTP library is exactly what this sends.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from tests.helpers import free_port, wait_until

REPO = Path(__file__).resolve().parents[2]
RUN_TIMEOUT_S = 90


def _answers(port: int) -> bool:
    import socket

    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        return True
    except OSError:
        return False


@contextmanager
def live_portal(config: Path, home: Path, log: Path, env: Mapping[str, str] | None = None) -> Iterator[int]:
    """Start the portal with the settings file ``config`` the way a site may (plain ``streamlit run``,
    the server's defaults); yield its port; stop it."""
    port = free_port()
    environ = {k: v for k, v in os.environ.items() if not k.startswith("FLOWTRAIN_") and k != "FORWARDED_ALLOW_IPS"}
    environ.update(FLOWTRAIN_CONFIG=str(config), FLOWTRAIN_HOME=str(home), **(env or {}))
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
             "--server.address", "127.0.0.1", "--server.headless", "true", "--browser.gatherUsageStats", "false",
             "--server.fileWatcherType", "none"],
            cwd=REPO, env=environ, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: _answers(port) or proc.poll() is not None, timeout=60, message="the portal to listen")
        if proc.poll() is not None:
            raise AssertionError(f"streamlit exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def page_text(port: int, headers: Mapping[str, str]) -> str:
    """Everything one run of the main page sends to a client that connected with ``headers``
    (the ForwardMsgs as protobuf text, so every caption, error and label is in it)."""
    return asyncio.run(_page_text(port, dict(headers)))


async def _page_text(port: int, headers: dict[str, str]) -> str:
    import websockets
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    async with websockets.connect(f"ws://127.0.0.1:{port}/_stcore/stream", subprotocols=["streamlit"],  # type: ignore[list-item]
                                  additional_headers=headers, max_size=2**26) as ws:
        msg = BackMsg()
        msg.rerun_script.query_string = ""
        msg.rerun_script.page_script_hash = ""
        await ws.send(msg.SerializeToString())
        texts = []
        while True:
            data = await asyncio.wait_for(ws.recv(), RUN_TIMEOUT_S)
            forward = ForwardMsg()
            forward.ParseFromString(data)  # type: ignore[arg-type]
            texts.append(str(forward))
            if forward.WhichOneof("type") == "script_finished":
                return "\n".join(texts)
