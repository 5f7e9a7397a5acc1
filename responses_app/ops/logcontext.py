"""Which logical request a log line belongs to: its request id and its upstream response id.

`bind()` is called where a request is handled (the runner's task, a websocket consumer's task);
every record logged from then on in that task, in the tasks it starts and in the database threads
it calls (asgiref copies the context), carries `request_id` and `response_id`, which LOGGING's
format shows. The response id is read when a line is logged, not when the context is bound: it
arrives later (response.created) and changes with each tool round.

Pure: no Django (LOGGING instantiates the filter while settings load).
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

NONE = "-"


@dataclass(frozen=True, slots=True)
class RequestContext:
    request_id: str
    response_id: Callable[[], str | None]


_current: contextvars.ContextVar[RequestContext | None] = contextvars.ContextVar("relay_request", default=None)


def bind(request_id: str, response_id: Callable[[], str | None] | str | None = None) -> RequestContext:
    """From now on in this context, log lines name this request (and its response, when known)."""
    if response_id is None or isinstance(response_id, str):
        fixed = response_id
        context = RequestContext(str(request_id), lambda: fixed)
    else:
        context = RequestContext(str(request_id), response_id)
    _current.set(context)
    return context


@contextmanager
def using(context: RequestContext | None) -> Iterator[None]:
    """Log as `context` for a moment: a process-wide task (the lease keeper) acting on one request."""
    token = _current.set(context)
    try:
        yield
    finally:
        _current.reset(token)


def about(request_id: object, response_id: str | None = None) -> contextlib.AbstractContextManager[None]:
    """Log as this request for a moment, from a task that is not its own (the takeover sweep, the
    checkpoint writer), when all it has is the id."""
    return using(RequestContext(str(request_id), lambda: response_id))


def current() -> tuple[str, str]:
    context = _current.get()
    if context is None:
        return NONE, NONE
    return context.request_id, context.response_id() or NONE


def install() -> None:
    """Every record made anywhere in the process gets the two fields (caplog's and any handler's,
    not only the console's, which also has the filter below). Idempotent."""
    previous = logging.getLogRecordFactory()
    if getattr(previous, "relay_request_context", False):
        return

    def factory(*args: object, **kwargs: object) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        record.request_id, record.response_id = current()
        return record

    factory.relay_request_context = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(factory)


class RequestContextFilter(logging.Filter):
    """Adds `request_id` and `response_id` to every record ("-" outside a request); drops nothing."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "request_id"):
            record.request_id, record.response_id = current()
        return True
