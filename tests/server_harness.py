"""Start the real guidewire server (uvicorn, a free loopback port) in a background thread for tests."""

from __future__ import annotations

import socket
import threading
import time


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RunningServer:
    """A uvicorn server over ``create_app(load_model(model))``; ``url`` is its ``/v1`` base."""

    def __init__(self, model: str = "smollm2", **app_options):
        import uvicorn

        from guidewire.api import get_model
        from guidewire.server import create_app

        self.app = create_app(get_model(model), **app_options)
        self.port = free_port()
        self.server = uvicorn.Server(uvicorn.Config(self.app, host="127.0.0.1", port=self.port, log_level="error"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 60
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the server did not start")
            time.sleep(0.05)
        self.url = f"http://127.0.0.1:{self.port}/v1"

    @property
    def scheduler(self):
        return self.app.state.scheduler

    def client(self, **kw):
        import openai

        return openai.OpenAI(base_url=self.url, api_key="unused", max_retries=0, timeout=kw.pop("timeout", 300), **kw)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(30)
