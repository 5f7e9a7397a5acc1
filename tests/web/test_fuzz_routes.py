"""Every route and both sockets walked with malformed input (Hypothesis, derandomized, a fixed
number of examples): NUL, lone surrogates, huge numbers, deep JSON, bad and foreign ids, wrong
types, in the path, the query string, form and JSON bodies and the headers. No answer is a 5xx
and no view raises (the test client re-raises whatever a view lets escape); every 4xx says why
(a body, or the header that is its message); a socket answers or closes with a protocol code
(1003, 1007, 1008, 1009, 4xxx), never with an error of the app's. In process, for breadth; the
real server under production settings has its own cases (test_bad_input_production.py)."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import pytest
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from responses_app import services, shares
from responses_app.models import Conversation, ResponseRequest, Share
from responses_app.routing import websocket_urlpatterns

pytestmark = [pytest.mark.usefixtures("no_upstream")]

# --- the routes ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Route:
    template: str  # e.g. "c/<uuid:conversation_id>/turns/<uuid:request_id>/"
    name: str

    @property
    def parameters(self) -> list[tuple[str, str]]:
        return re.findall(r"<(?:(\w+):)?(\w+)>", self.template)


def _walk(patterns: list[Any], prefix: str = "", namespace: str | None = None) -> Iterator[tuple[str, str, str | None]]:
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            yield from _walk(pattern.url_patterns, prefix + str(pattern.pattern), pattern.namespace or namespace)
        elif isinstance(pattern, URLPattern):
            yield prefix + str(pattern.pattern), pattern.name or "", namespace


def routes() -> list[Route]:
    """The app's routes and the demo's own (health, metrics, accounts), and the admin's of the app's
    models; not Django's other admin pages, nor the static files."""
    found = []
    for template, name, namespace in _walk(get_resolver().url_patterns):
        if template.startswith(("^", "admin/^")) or (namespace == "admin" and "responses_app" not in template):
            continue
        found.append(Route(template, name))
    return found


ROUTES = routes()

# --- what is sent ----------------------------------------------------------------------------------

NASTY = [
    "", " ", "\x00", "a\x00b", "\ud800", "x\udfffy", "\ufeff", "\u202e", "\U0001d54f", "9" * 5000, "1." + "9" * 5000,
    "-1", "0", "1e999999", "NaN", "-Infinity", "null", "true", "[]", "{}", "x" * 5000, "../../etc/passwd", "%00",
    "%ED%A0%80", "' OR 1=1 --", "<script>alert(1)</script>", "javascript:alert(1)", "\r\nX-Injected: 1",
    "00000000-0000-0000-0000-000000000000", "1.0t1", "1f.1", "1.1.0t" + "9" * 30, "msg-1",
]
nasty_text = st.sampled_from(NASTY) | st.text(max_size=30)
FIELDS = ["input", "model", "conversation", "client_request_id", "metadata", "max_output_tokens", "background",
          "tools", "id", "messages", "trigger", "threadId", "runId", "resume", "forwardedProps", "blocks", "entries",
          "turn", "anonymous", "title", "prompt", "approve", "text", "q", "days", "page", "last_event_id",
          "thread_id", "run_id", "v", "next", "username", "password", "o", "e", "p", "all", "continue_id"]
field_names = st.sampled_from(FIELDS) | st.text(max_size=6)
scalars = (st.none() | st.booleans() | st.integers() | st.integers(min_value=2**64, max_value=2**200)
           | st.floats(allow_nan=False, allow_infinity=False) | nasty_text)
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(field_names, inner, max_size=4), max_leaves=12)
DEEP = 100_000
RAW_BODIES = [b"", b"null", b"[]", b"{", b"\xff\xfe\x00", b"[" * DEEP + b"]" * DEEP,
              b'{"a":' * DEEP + b"1" + b"}" * DEEP, b"9" * 5000, b'{"input":"\\ud800","model":"sim-text"}',
              b"a=1&" * 2000]
CONTENT_TYPES = ["multipart/form-data; boundary=x", "multipart/form-data", "text/plain",
                 "application/json; charset=utf-16", "x/\x00", ""]


def _encode(text: str) -> str:
    return quote(text.encode("utf-8", "surrogatepass"), safe="")


def _header(text: str) -> str:
    """A header's value as a server hands it to Django: its bytes, read as latin-1."""
    return text.encode("utf-8", "surrogatepass").decode("latin-1")


def _form(pairs: Any) -> bytes:
    if not isinstance(pairs, dict):  # the whole seed replaced
        return _encode(str(pairs)).encode()
    return "&".join(f"{_encode(k)}={_encode(str(v))}" for k, v in pairs.items()).encode()


def seeds(ids: dict[str, str]) -> dict[str, list[tuple[str, Any]]]:
    """Well-formed bodies of each route ("json" or "form", by route name), for the walk to break."""
    request, conversation = ids["request"], ids["conversation"]
    user_message = {"id": "m1", "role": "user", "parts": [{"type": "text", "text": "Hi"}]}
    answered = {"id": request, "role": "assistant", "parts": [
        {"type": "tool-x", "state": "approval-responded", "approval": {"id": "mcpr_1", "approved": True}}]}
    run = {"threadId": "t1", "runId": "r1", "forwardedProps": {"model": "sim-text"},
           "messages": [{"id": "1", "role": "user", "content": "Hi"}]}
    submit = {"input": "Hi", "model": "sim-text", "conversation": conversation, "client_request_id": "k1",
              "metadata": {"a": "b"}, "max_output_tokens": 16, "background": True}
    return {
        "api-requests": [("json", submit), ("form", {"input": "Hi", "model": "sim-text"})],
        "api-request-approve": [("json", {"approve": True})],
        "api-request-continue": [("json", {"client_request_id": "k2"}), ("form", {"client_request_id": "k3"})],
        "agui-run": [("json", run),
                     ("json", {**run, "resume": [{"interruptId": "mcpr_1", "payload": {"approve": True}}]})],
        "aisdk-chat": [("json", {"id": "chat-1", "messages": [user_message]}),
                       ("json", {"id": "chat-1", "messages": [user_message, answered]}),
                       ("json", {"id": "chat-1", "messages": [user_message, {**answered, "id": "msg-1"}]})],
        "render-blocks": [("json", {"blocks": [{"id": "t", "kind": "text", "text": "**a**", "state": "done"}],
                                    "entries": ["t"]})],
        "share-create": [("form", {"turn": request, "anonymous": "1"})],
        "shared-continue": [("form", {"continue_id": "6f1c1e43-6a3f-4f0e-9a59-3c2b8b7c2d10"})],
        "conversation-rename": [("form", {"title": "New"})],
        "conversation-settings": [("form", {"instructions": "Be brief.", "temperature": "0.5",
                                            "reasoning_effort": "low", "max_output_tokens": "64"})],
        "conversation-preset": [("form", {"preset": "1"})],
        "chat-edit": [("form", {"prompt": "Again", "client_request_id": "k2"})],
        "chat-regenerate": [("form", {"client_request_id": "k3"})],
        "chat": [("form", {"input": "Hi", "model": "sim-text", "client_request_id": "k4"})],
        "conversation-new": [("form", {"input": "Hi", "model": "sim-text", "client_request_id": "k5"})],
        "login": [("form", {"username": "owner", "password": "x"})],
    }


QUERY_SEEDS = [{"q": "hi"}, {"days": "14"}, {"last_event_id": "1.0"}, {"last_event_id": "1." + "9" * 5000},
               {"tools": "open"}, {"v": "2"}, {"q": "x", "o": "1"}, {"next": "/"}, {"thread_id": "t1", "run_id": "r1"}]


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield path
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _leaves(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _leaves(item, (*path, index))


def _replace(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    copy = dict(value) if isinstance(value, dict) else list(value)
    copy[path[0]] = _replace(value[path[0]], path[1:], new)
    return copy


@st.composite
def mutated(draw: st.DrawFn, seed: Any, replacements: st.SearchStrategy[Any]) -> Any:
    """The seed with up to two of its values (or itself) replaced by a malformed one."""
    for _ in range(draw(st.integers(0, 2))):
        seed = _replace(seed, draw(st.sampled_from(list(_leaves(seed)))), draw(replacements))
    return seed


@st.composite
def bodies(draw: st.DrawFn, route_seeds: list[tuple[str, Any]]) -> tuple[bytes, str]:
    """A body and its content type: mostly a broken seed of the route, sometimes anything."""
    choice = draw(st.integers(0, 9))
    if route_seeds and choice < 7:
        kind, seed = draw(st.sampled_from(route_seeds))
        if kind == "json":
            return json.dumps(draw(mutated(seed, json_values))).encode(), "application/json"
        return _form(draw(mutated(seed, nasty_text))), "application/x-www-form-urlencoded"
    if choice < 8:
        return draw(st.sampled_from(RAW_BODIES)), draw(st.sampled_from(["application/json", *CONTENT_TYPES]))
    if choice < 9:
        return json.dumps(draw(json_values)).encode(), draw(st.sampled_from(["application/json", *CONTENT_TYPES]))
    pairs = draw(st.lists(st.tuples(field_names, nasty_text), max_size=4))
    return _form(dict(pairs)), "application/x-www-form-urlencoded"


# An AG-UI cursor (`run[f].parts(.index stage n)*`), well-formed or with a number past any bound.
cursors = st.sampled_from(["", "1.", "1f.2.", "1.1.0t", "3.2.1a"]).flatmap(
    lambda start: st.sampled_from([start + "0", start + "9" * 5000, start + "1" + "0" * 40, start + "\u0661"]))
headers = st.fixed_dictionaries({}, optional={
    "HTTP_LAST_EVENT_ID": st.one_of(cursors, cursors, nasty_text).map(_header),
    "HTTP_ACCEPT": st.sampled_from(["application/json", "text/html", "*/*", "text/event-stream"]) | nasty_text.map(
        _header),
    "HTTP_AUTHORIZATION": st.sampled_from(["Bearer x", "Bearer ", "Basic Og==", "Bearer \x00"]) | nasty_text.map(
        _header),
    "HTTP_RANGE": nasty_text.map(_header),
    "HTTP_X_REQUESTED_WITH": st.just("XMLHttpRequest"),
})
queries = st.one_of(st.sampled_from(QUERY_SEEDS).flatmap(lambda seed: mutated(seed, nasty_text)),
                    st.lists(st.tuples(field_names, nasty_text), max_size=3).map(dict)).map(
    lambda pairs: _form(pairs).decode())

# --- the world -------------------------------------------------------------------------------------


@dataclass
class World:
    clients: dict[str, Client]
    own: dict[str, str]  # a parameter's name -> the owner's valid value of it
    ids: list[str] = field(default_factory=list)  # ids of other users' objects, and of none
    seeds: dict[str, list[tuple[str, Any]]] = field(default_factory=dict)

    def restore(self) -> None:
        Conversation.objects.update(deleted_at=None)
        Share.objects.update(revoked_at=None)
        for name, client in self.clients.items():
            if name != "anonymous":
                client.force_login(get_user_model().objects.get(username=name))


@pytest.fixture
def world(transactional_db: Any, settings: Any) -> World:
    settings.RELAY_SUBMIT_RATE = "10000/m"
    settings.RELAY_MAX_CONCURRENT_PER_USER = 10_000
    users = get_user_model()
    owner = users.objects.create_user("owner", password="pw")
    other = users.objects.create_user("other", password="pw")
    root = users.objects.create_superuser("root", password="pw")
    made = {}
    for user in (owner, other):
        conversation = services.conversation_create(owner=user)
        request, _ = services.request_create(owner=user, input="Hi", model="sim-text", client_request_id="k",
                                             conversation=conversation, params={})
        ResponseRequest.objects.filter(pk=request.pk).update(status="completed")
        share = shares.share_create(conversation=conversation, user=user, request=None, anonymous=False)
        made[user.username] = {"conversation_id": str(conversation.pk), "request_id": str(request.pk),
                               "share_id": str(share.pk), "token": share.token, "key": str(request.pk),
                               "object_id": str(request.pk), "fmt": "md", "approval_request_id": "mcpr_1",
                               "conversation": str(conversation.pk), "request": str(request.pk)}
    clients = {"anonymous": Client(raise_request_exception=True)}
    for name, user in (("owner", owner), ("root", root)):
        clients[name] = Client(raise_request_exception=True)
        clients[name].force_login(user)
    return World(clients=clients, own=made["owner"], ids=[*made["other"].values(), str(uuid.uuid4()), "x"],
                 seeds=seeds(made["owner"]))


def known(world: World, route: Route) -> list[tuple[str, str, str, bytes, str, dict[str, str]]]:
    """The inputs a probe answered with a 500 once, always among the route's examples."""
    own = world.own
    path = "/" + route.template
    for converter, name in route.parameters:
        path = path.replace(f"<{converter}:{name}>", own.get(name, "x"), 1)
    form = "application/x-www-form-urlencoded"
    answered = {"id": "msg-1", "role": "assistant", "parts": [
        {"type": "tool-x", "state": "approval-responded", "approval": {"id": "mcpr_1", "approved": True}}]}
    by_name: dict[str, list[tuple[str, str, str, bytes, str, dict[str, str]]]] = {
        "share-create": [("owner", "POST", path, b"turn=x", form, {})],
        "aisdk-chat": [("owner", "POST", path, json.dumps({"id": "c", "messages": [answered]}).encode(),
                        "application/json", {})],
        "agui-stream": [("owner", "GET", path, b"", "", {"HTTP_LAST_EVENT_ID": "1." + "9" * 5000})],
        "render-blocks": [("anonymous", "POST", path, b'{"blocks":[{"id":"t","kind":"text","text":[1]}],'
                           b'"entries":["t"]}', "application/json", {})],
        "shared-turn": [("anonymous", "GET", "/s/x/turns/" + own["request_id"] + "/", b"", "", {})],
        "api-requests": [("owner", "POST", path, json.dumps({"input": "Hi", "model": "sim-text",
                                                               "max_output_tokens": "9" * 5000}).encode(),
                          "application/json", {})],
    }
    return by_name.get(route.name, [])


def clear_refusal(response: Any) -> bool:
    """A 4xx that says why: a body, or the header that carries its meaning."""
    if response.streaming or response.content.strip() or response.request["REQUEST_METHOD"] == "HEAD":
        return True
    return (response.status_code == 405 and response.has_header("Allow")) or (
        response.status_code == 401 and response.has_header("WWW-Authenticate"))


@st.composite
def calls(draw: st.DrawFn, world: World, route: Route) -> tuple[str, str, str, bytes, str, dict[str, str]]:
    path = route.template
    for converter, name in route.parameters:
        choice = draw(st.integers(0, 9))  # mostly the owner's own: the checks behind the route's lookup
        value = world.own.get(name, "x") if choice < 7 else draw(st.sampled_from(world.ids)) if choice < 9 else draw(
            nasty_text.filter(lambda t: "/" not in t).map(_encode))
        path = path.replace(f"<{converter + ':' if converter else ''}{name}>", value, 1)
    query = draw(queries)
    body, content_type = draw(bodies(world.seeds.get(route.name, [])))
    who = draw(st.sampled_from(["owner", "owner", "owner", "anonymous", "root"]))
    posted = route.name in world.seeds  # a route with bodies: mostly POSTed
    method = draw(st.sampled_from(["POST"] * (5 if posted else 1) + ["GET"] * (1 if posted else 4)
                                  + ["DELETE", "PUT", "HEAD"]))
    return who, method, "/" + path + (f"?{query}" if query else ""), body, content_type, draw(headers)


def test_every_route_answers_malformed_input_with_a_clear_4xx(world: World) -> None:
    seen: dict[str, set[int]] = {}
    through: set[str] = set()  # routes some call got through: a 2xx, or a redirect that is not to the login
    failures: dict[tuple[str, str, str], str] = {}  # (route, method, what) -> one example

    def walk_on(route: Route) -> None:
        @settings(max_examples=50 if route.name in world.seeds or "api/" in route.template else 12,
                  derandomize=True, deadline=None,
                  database=None, phases=[Phase.explicit, Phase.generate],
                  suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                         HealthCheck.data_too_large])
        @given(call=calls(world, route))
        def walk(call: tuple[str, str, str, bytes, str, dict[str, str]]) -> None:
            who, method, path, body, content_type, extra = call
            try:
                response = world.clients[who].generic(method, path, body, content_type, **extra)  # type: ignore[arg-type]
            except Exception as exc:  # a view let it escape: a 500 in production
                failures.setdefault((route.template, method, type(exc).__name__),
                                    f"{who} {path[:160]} {body[:120]!r} {exc!r:.200}")
                return
            try:
                seen.setdefault(route.template, set()).add(response.status_code)
                if response.status_code < 300 or (response.status_code < 400 and "login" not in response.get(
                        "Location", "login")):
                    through.add(route.template)
                if response.status_code >= 500 or (response.status_code >= 400 and not clear_refusal(response)):
                    failures.setdefault((route.template, method, str(response.status_code)),
                                        f"{who} {path[:160]} {body[:120]!r}")
            finally:
                response.close()

        for call in known(world, route):
            walk = example(call=call)(walk)
        walk()
        world.restore()  # what a route deleted, revoked or logged out is back for the next one

    for route in ROUTES:  # each route its own examples: none left to chance
        walk_on(route)
    assert not failures, "\n".join(f"{key}: {example}" for key, example in failures.items())
    assert len(seen) == len(ROUTES), "every route reached"
    assert len(through) > len(ROUTES) // 2, f"many got through: {len(through)} of {len(ROUTES)}"


# --- the sockets -----------------------------------------------------------------------------------

PROTOCOL_CLOSES = {1000, 1003, 1007, 1008, 1009}
typed_frames = st.fixed_dictionaries(
    {"type": st.sampled_from(["ping", "snapshot", "cancel", "show", "x", ""]) | json_values},
    optional={"id": json_values, "revision": json_values, "request": json_values}).map(lambda v: json.dumps(v))
frames = st.one_of(
    typed_frames, typed_frames, json_values.map(lambda v: json.dumps(v)),
    st.sampled_from(["", "{", "\x00", "\ud800", '{"type":"\\ud800"}', "[" * DEEP + "]" * DEEP, "x" * 5000,
                     '{"type":"ping"}' + " " * 5000, '{"type":' * 2000]),
    st.binary(max_size=20),
)


async def _socket_walk(path: str, user: Any, sent: list[str | bytes]) -> list[dict[str, Any]]:
    communicator = WebsocketCommunicator(URLRouter(websocket_urlpatterns), path)
    communicator.scope["user"] = user
    connected, _ = await communicator.connect(timeout=10)
    outputs: list[dict[str, Any]] = []
    try:
        for frame in sent:  # as the server hands a frame on (send_to refuses an empty one)
            await communicator.send_input({"type": "websocket.receive",
                                           "bytes" if isinstance(frame, bytes) else "text": frame})
        while True:  # what the app sends back, until it closes or goes quiet
            if await communicator.receive_nothing(timeout=0.05):
                break
            outputs.append(await communicator.receive_output(timeout=1))
            if outputs[-1]["type"] == "websocket.close":
                break
    finally:
        await communicator.disconnect()
    return outputs if connected else [{"type": "websocket.close", "code": 1000}]


def test_both_sockets_close_malformed_frames_with_a_protocol_code(world: World, caplog: Any) -> None:
    owner = get_user_model().objects.get(username="owner")
    mine = ResponseRequest.objects.get(owner=owner)
    paths = {f"/ws/requests/{mine.pk}/": 25, f"/ws/conversations/{mine.conversation_id}/": 25,
             f"/ws/requests/{uuid.uuid4()}/": 3, f"/ws/shares/x/requests/{mine.pk}/": 3,
             f"/ws/shares/x/conversations/{mine.conversation_id}/": 3}
    failures: list[str] = []

    def walk_on(path: str, examples: int) -> None:
        @settings(max_examples=examples, derandomize=True, deadline=None, database=None, phases=[Phase.generate],
                  suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
        @given(sent=st.lists(frames, min_size=1, max_size=4))
        def walk(sent: list[str | bytes]) -> None:
            try:
                outputs = asyncio.run(_socket_walk(path, owner, sent))
            except Exception as exc:  # the consumer raised: the server's 1011 and a traceback
                failures.append(f"{path} {[f[:60] for f in sent]!r}: {exc!r:.300}")
                return
            for output in outputs:
                code = output.get("code", 1000)
                if output["type"] == "websocket.close" and not (code in PROTOCOL_CLOSES or 4000 <= code < 5000):
                    failures.append(f"{path} {[f[:60] for f in sent]!r}: closed {code}")
                elif output["type"] not in ("websocket.close", "websocket.send"):
                    failures.append(f"{path} {[f[:60] for f in sent]!r}: {output!r:.200}")

        walk()

    with caplog.at_level(logging.ERROR):
        for path, examples in paths.items():
            walk_on(path, examples)
    assert not failures, "\n".join(failures[:20])
    assert not [r for r in caplog.records if r.exc_info], "no traceback logged"
