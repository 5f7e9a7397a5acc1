"""Django's ASGI handler with its middleware chain entered once per request, in one worker thread.

Under ASGI, Django calls every `MiddlewareMixin` middleware through its `__acall__`, which goes to
a thread and back for each `process_request` and each `process_response`: two hand-offs per
middleware per request (a thread pool submit, a GIL hand-over and a future chained back for
each), which cost the event loop's thread milliseconds of CPU per request that every viewer's
stream waits behind (bench/README.md, relay). Every middleware here is synchronous at heart
(sessions, authentication, CSRF, messages, axes), so the chain is built as Django builds it for
WSGI (its sync path, which calls an async view through `async_to_sync`, i.e. on this event loop)
and entered once, in the request's thread-sensitive thread, as Django's own adaptation of a sync
middleware would.
"""

from __future__ import annotations

import django
from django.core.handlers.asgi import ASGIHandler

from responses_app.compat import enter_middleware_once


class OneHopASGIHandler(ASGIHandler):
    def load_middleware(self, is_async: bool = False) -> None:
        super().load_middleware(is_async=False)
        enter_middleware_once(self)  # Django's private _middleware_chain: responses_app/compat.py


def get_asgi_application() -> OneHopASGIHandler:
    """As `django.core.asgi.get_asgi_application`, with the handler above."""
    django.setup(set_prefix=False)
    return OneHopASGIHandler()
