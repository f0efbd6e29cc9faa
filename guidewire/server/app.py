"""The FastAPI application: ``/v1/chat/completions``, ``/v1/completions``, ``/v1/models``, ``/health``,
and llama.cpp's ``/infill`` (:mod:`.infill`).

Handlers parse and validate (:mod:`.plans`), submit one :class:`~.scheduler.Job` per choice
and read the jobs' events from an asyncio queue; all decoding happens on the scheduler thread.
A client that disconnects cancels its jobs (they leave the batch before the next forward).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Callable

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.concurrency import run_in_threadpool

from .errors import APIError
from .plans import Plan, chat_plan, completion_plan
from .responses import Choice, total_usage
from .scheduler import Job, Scheduler


def _error_response(err: APIError) -> JSONResponse:
    return JSONResponse(err.body(), status_code=err.status, headers=err.headers)


async def _body(request: Request) -> dict:
    try:
        body = json.loads(await request.body())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise APIError(f"the request body is not valid JSON: {exc}", code="invalid_json") from None
    if not isinstance(body, dict):
        raise APIError("the request body must be a JSON object", code="invalid_json")
    return body


class _Run:
    """The jobs of one request and the queue their events arrive on (tagged with the choice index)."""

    def __init__(self, scheduler: Scheduler, plan: Plan, time_limit: float):
        loop = asyncio.get_running_loop()
        self.queue: asyncio.Queue = asyncio.Queue()
        self.jobs = []
        for i, sp in enumerate(plan.samplings):
            def sink(ev, i=i):
                try:
                    loop.call_soon_threadsafe(self.queue.put_nowait, (i, ev))
                except RuntimeError:  # the event loop is gone (shutdown)
                    pass
            self.jobs.append(Job(plan.prompt_ids, sink, plan.make_constraint, plan.constraint_param, sp,
                                 plan.max_tokens, plan.stop, time_limit))
        try:
            for job in self.jobs:
                scheduler.submit(job)
        except APIError:
            self.cancel()
            raise

    def cancel(self) -> None:
        for job in self.jobs:
            job.cancel()

    async def next(self, request: Request):
        """The next (choice, event); cancels the jobs if the client went away meanwhile."""
        while True:
            try:
                return await asyncio.wait_for(self.queue.get(), 0.25)
            except asyncio.TimeoutError:
                if await request.is_disconnected():
                    self.cancel()
                    raise asyncio.CancelledError() from None


def create_app(lm, *, model_name: str | None = None, max_batch: int = 16, max_queue: int = 64,
               time_limit: float = 300.0, default_max_tokens: int = 1024,
               on_idle: Callable[[], object] | None = None) -> FastAPI:
    """The server app over a loaded model (the scheduler thread starts with the app); ``on_idle``
    runs on that thread whenever decoding goes idle (see :class:`~.scheduler.Scheduler`)."""
    scheduler = Scheduler(lm, max_batch=max_batch, max_queue=max_queue, on_idle=on_idle)
    name = model_name or lm.name

    from contextlib import asynccontextmanager

    @asynccontextmanager
    async def lifespan(_app):
        scheduler.start()
        yield
        scheduler.close()

    app = FastAPI(title="guidewire", lifespan=lifespan)
    app.state.scheduler = scheduler

    @app.exception_handler(APIError)
    async def _api_error(_request, exc: APIError):
        return _error_response(exc)

    @app.exception_handler(Exception)
    async def _internal(_request, exc: Exception):
        return _error_response(APIError(f"internal error: {type(exc).__name__}: {exc}", status=500,
                                        type="server_error", code="internal_error"))

    @app.get("/health")
    async def health():
        return {"status": "ok", "model": name, **scheduler.load()}

    @app.get("/v1/models")
    async def models():
        return {"object": "list", "data": [{"id": name, "object": "model", "created": 0, "owned_by": "guidewire"}]}

    async def _serve(request: Request, chat: bool):
        body = await _body(request)
        plan = await run_in_threadpool(chat_plan if chat else completion_plan, body, lm,
                                       default_max=default_max_tokens if chat else 16)
        run = _Run(scheduler, plan, time_limit)
        rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex[:24]
        head = {"id": rid, "object": "chat.completion" if chat else "text_completion", "created": int(time.time()),
                "model": name}
        choices = [Choice(i, plan.tool_mode if chat else "none") for i in range(len(plan.samplings))]
        if not plan.stream:
            return await _whole(request, run, choices, head, chat)
        # wait for every choice's first event, so that errors are still HTTP errors
        first = []
        started = set()
        try:
            while len(started) < len(choices):
                i, ev = await run.next(request)
                if ev[0] == "error":
                    run.cancel()
                    return _error_response(ev[1])
                started.add(i)
                first.append((i, ev))
        except asyncio.CancelledError:
            return JSONResponse({}, status_code=499)
        return StreamingResponse(_sse(request, run, choices, head, chat, plan.include_usage, first),
                                 media_type="text/event-stream", headers={"Cache-Control": "no-cache"})

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request):
        return await _serve(request, True)

    @app.post("/v1/completions")
    async def completions(request: Request):
        return await _serve(request, False)

    @app.post("/infill")
    async def infill(request: Request):
        from .infill import infill_plan, infill_reply

        t0 = time.monotonic()
        plan = await run_in_threadpool(infill_plan, await _body(request), lm)
        return await infill_reply(request, _Run(scheduler, plan, time_limit), plan, name, t0)

    return app


async def _whole(request, run: _Run, choices: list[Choice], head: dict, chat: bool):
    left = len(choices)
    try:
        while left:
            i, ev = await run.next(request)
            c = choices[i]
            if ev[0] == "error":
                run.cancel()
                return _error_response(ev[1])
            if ev[0] == "delta":
                c.deltas(ev[1])
            else:
                c.deltas("", final=True)
                c.done(ev[1], ev[2])
                left -= 1
    except asyncio.CancelledError:
        return JSONResponse({}, status_code=499)
    if chat:
        out = [{"index": c.index, "message": c.message(), "finish_reason": c.finish_reason, "logprobs": None}
               for c in choices]
    else:
        out = [{"index": c.index, "text": c.content, "finish_reason": c.finish_reason, "logprobs": None}
               for c in choices]
    return JSONResponse({**head, "choices": out, "usage": total_usage(choices)})


def _chunk(head: dict, chat: bool, index: int, delta: dict | None = None, finish: str | None = None) -> str:
    if chat:
        choice = {"index": index, "delta": delta or {}, "finish_reason": finish, "logprobs": None}
        obj = {**head, "object": "chat.completion.chunk", "choices": [choice]}
    else:
        obj = {**head, "choices": [{"index": index, "text": (delta or {}).get("content", ""),
                                    "finish_reason": finish, "logprobs": None}]}
    return f"data: {json.dumps(obj)}\n\n"


async def _sse(request, run: _Run, choices: list[Choice], head: dict, chat: bool, include_usage: bool, first):
    left = len(choices)
    try:
        if chat:
            for c in choices:
                yield _chunk(head, chat, c.index, {"role": "assistant", "content": ""})
        pending = list(first)
        while left:
            i, ev = pending.pop(0) if pending else await run.next(request)
            c = choices[i]
            if ev[0] == "error":
                yield f"data: {json.dumps(ev[1].body())}\n\n"
                run.cancel()
                break
            if ev[0] == "delta":
                for d in c.deltas(ev[1]):
                    yield _chunk(head, chat, i, d)
                continue
            for d in c.deltas("", final=True):
                yield _chunk(head, chat, i, d)
            c.done(ev[1], ev[2])
            yield _chunk(head, chat, i, {}, c.finish_reason)
            left -= 1
        if include_usage and not left:
            obj = {**head, "choices": [], "usage": total_usage(choices)}
            if chat:
                obj["object"] = "chat.completion.chunk"
            yield f"data: {json.dumps(obj)}\n\n"
        yield "data: [DONE]\n\n"
    finally:
        run.cancel()   # a client that went away stops its jobs at once (no-op when they are done)
