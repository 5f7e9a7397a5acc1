"""Per-user limits on starting requests, held in Django's cache (Redis when configured) and the
database, so they hold across processes.

- In flight: at most RELAY_MAX_CONCURRENT_PER_USER requests pending or streaming under a live
  lease. Counted in the database, never in a counter, so a runner that dies cannot leak a slot;
  a short per-user lock in the cache serialises the count with the create.
- Rate: at most RELAY_SUBMIT_RATE new requests per window (a fixed window counter in the cache).

A resubmit of an existing `client_request_id` is never refused: it starts nothing. Call
`submit_guard` around the submit; it yields a `Refusal` (answer 429 with Retry-After) or None.
"""

from __future__ import annotations

import math
import random
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from django.core.cache import BaseCache, caches
from django.db.models import Q
from django.http import HttpResponse
from django.utils import timezone

from .conf import app_settings
from .models import ResponseRequest
from .relay.dbthreads import ws_call

Status = ResponseRequest.Status
Answer = TypeVar("Answer", bound=HttpResponse)
LOCK_SECONDS = 10  # longer than any submit takes; a crashed holder frees it by itself
LOCK_WAIT_SECONDS = 5.0
CONCURRENT_RETRY_AFTER = 5


@dataclass(frozen=True)
class Refusal:
    code: str  # "too_many_requests_in_flight" | "rate_limited"
    message: str
    retry_after: int  # seconds

    def body(self) -> dict[str, Any]:
        return {"error": self.message, "code": self.code, "retry_after": self.retry_after}


def refusal_answer(response: Answer, *, status: int, retry_after: int | None) -> Answer:
    """The one answer to a refused use: `response` (a page, a JSON body) with the refusal's status
    and, when waiting helps, how long to wait (429 with Retry-After)."""
    response.status_code = status
    if retry_after is not None:
        response["Retry-After"] = str(retry_after)
    return response


def in_flight(*, user_id: int) -> int:
    now = timezone.now()
    live = Q(status=Status.PENDING) | Q(status=Status.STREAMING, lease_expires__gt=now)
    return ResponseRequest.objects.filter(live, owner_id=user_id).count()


def rate_check(*, key: str, rate: tuple[int, int], now: float, what: str = "requests") -> Refusal | None:
    """Count one use under `key` in the current fixed window of `rate` (count, seconds); a Refusal
    (429, Retry-After) once the window is full. `what` names the uses in its message."""
    count, window = rate
    start = int(now // window) * window
    key = f"relay:{key}:{window}:{start}"
    process_cache().add(key, 0, timeout=window + 1)
    try:
        used = process_cache().incr(key)
    except ValueError:  # expired between add and incr
        process_cache().add(key, 1, timeout=window + 1)
        used = 1
    if used <= count:
        return None
    retry = max(1, math.ceil(start + window - now))
    return Refusal("rate_limited", f"Too many {what}: at most {count} per {window_words(window)}. "
                   f"Try again in {retry} s.", retry)


def _rate_check(*, user_id: int, now: float) -> Refusal | None:
    """Count this submit in the current window; a Refusal once the window is full."""
    return rate_check(key=f"submit-rate:{user_id}", rate=app_settings.SUBMIT_RATE, now=now)


def running_words(limit: int) -> str:
    """Why a send is refused while `limit` answers run, in words (a person reads it: no setting)."""
    return (f"You have {limit} answer{'' if limit == 1 else 's'} running. "
            "Wait for one to finish or stop one, then send again.")


def window_words(seconds: int) -> str:
    return {1: "second", 60: "minute", 3600: "hour", 86400: "day"}.get(seconds, f"{seconds} s")


@contextmanager
def _user_lock(user_id: int) -> Iterator[None]:
    key, token = f"relay:submit-lock:{user_id}", uuid.uuid4().hex
    deadline = time.monotonic() + LOCK_WAIT_SECONDS
    while not process_cache().add(key, token, timeout=LOCK_SECONDS):
        if time.monotonic() > deadline:
            break  # a stuck holder: the database count still bounds the damage to one race
        time.sleep(0.01)
    try:
        yield
    finally:
        if process_cache().get(key) == token:
            process_cache().delete(key)


@contextmanager
def submit_guard(*, user: Any, client_request_id: Any) -> Iterator[Refusal | None]:
    """Hold the user's submit lock; yield why this submit is refused, or None to go ahead."""
    if isinstance(client_request_id, str) and client_request_id.strip() and ResponseRequest.objects.filter(
            owner=user, client_request_id=client_request_id.strip()).exists():
        yield None  # a resubmit: the same logical request, nothing new starts
        return
    with _user_lock(user.pk):
        limit = app_settings.MAX_CONCURRENT_PER_USER
        if in_flight(user_id=user.pk) >= limit:
            yield Refusal("too_many_requests_in_flight", running_words(limit), CONCURRENT_RETRY_AFTER)
            return
        yield _rate_check(user_id=user.pk, now=time.time())


# --- websockets -------------------------------------------------------------------------------

SOCKET_SLOT_TTL = 60  # seconds; a live socket refreshes its slot well before (see SOCKET_REFRESH)
SOCKET_REFRESH = 20


_process_cache: BaseCache | None = None


def process_cache() -> BaseCache:
    """One cache object for the whole process. `django.core.cache.cache` is one per asyncio
    context (asgiref's Local): each socket's task built a Redis client and pool of its own, whose
    connections outlived the socket, so a web process held ever more of them."""
    global _process_cache
    if _process_cache is None:
        _process_cache = caches.create_connection("default")
    return _process_cache


async def cache_call(method: str, *args: Any, **kwargs: Any) -> Any:
    """`cache.<method>(...)` on the websocket pool (dbthreads.ws_call), not on asgiref's one
    thread-sensitive thread where Django's `cache.aadd` & co. run it: a connect never waits for
    that thread in a burst of connects (bench/README.md, relay). The cache touches no database."""
    return await ws_call(getattr(process_cache(), method), database=False)(*args, **kwargs)


class SocketSlots:
    """At most RELAY_MAX_SOCKETS_PER_USER open sockets per user, across processes.

    Each socket holds one numbered slot key (`cache.add`, so two sockets never take the same one)
    and refreshes it while open; `release` frees it on disconnect. A process that dies without
    disconnecting frees its slots by expiry, so a count can never leak for longer than the TTL.
    """

    def __init__(self, *, user_id: int | str, owner: str) -> None:
        self.user_id = user_id
        self.owner = owner
        self.key: str | None = None

    async def acquire(self) -> bool:
        limit = app_settings.MAX_SOCKETS_PER_USER
        start = random.randrange(limit)  # probing from a random slot finds a free one at once
        for step in range(limit):
            key = f"relay:ws-slot:{self.user_id}:{(start + step) % limit}"
            if await cache_call("add", key, self.owner, timeout=SOCKET_SLOT_TTL):
                self.key = key
                return True
        return False

    async def refresh(self) -> None:
        if self.key is not None and not await cache_call("touch", self.key, SOCKET_SLOT_TTL):
            await cache_call("add", self.key, self.owner, timeout=SOCKET_SLOT_TTL)  # expired meanwhile

    async def release(self) -> None:
        if self.key is not None and await cache_call("get", self.key) == self.owner:
            await cache_call("delete", self.key)
        self.key = None


class FrameBudget:
    """A token bucket of frames a socket may send: `rate` per second, bursts up to `burst`.
    Time is an argument, so it is testable without sleeping."""

    def __init__(self, *, rate: float, burst: int, now: float) -> None:
        self.rate = rate
        self.burst = burst
        self.tokens = float(burst)
        self.stamp = now
        self.refused = 0  # frames refused since the last one allowed

    def allow(self, now: float) -> bool:
        self.tokens = min(float(self.burst), self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            self.refused = 0
            return True
        self.refused += 1
        return False

    @property
    def exhausted(self) -> bool:
        """A client that keeps sending past the limit: close it rather than keep reading."""
        return self.refused > self.burst
