"""LiteLLM's proxy as the relay's upstream: a real third-party Responses API server (pinned, in an
environment of its own: tests/litellm/venv.py) bridging a Chat Completions backend (our mock,
tests/litellm/chat_mock.py), in front of the real server (project.serve) on PostgreSQL, which
enforces column lengths: the proxy's response ids are hundreds of characters long.

Each answer is followed through the JSON API to its end, bounded: a request left streaming fails
the test. Skipped where the environment cannot be made or PostgreSQL is absent, never under CI."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from tests.conftest import IN_CI
from tests.host.test_restart import PASSWORD, logged_in, start, submit_and_wait
from tests.litellm import chat_mock, venv
from tests.servers import ROOT, free_port, stop

# The proxy may take its own readiness bound (wait_for below) to start on a loaded machine; the
# first test's budget includes that start, so the suite's default would cut it short.
pytestmark = [pytest.mark.services, pytest.mark.timeout(300)]

MASTER_KEY = "sk-litellm-test"  # the proxy's own key: what the relay sends as its provider key
MODELS = ("mock-text", "mock-tool", "mock-die")
PG_SERVER = os.environ.get("LITELLM_TEST_PG", "postgres://postgres@127.0.0.1:5432/postgres")


def unavailable(why: str) -> None:
    if IN_CI:
        pytest.fail(f"CI must run LiteLLM's proxy tests: {why}")
    pytest.skip(why)


def wait_for(url: str, proc: subprocess.Popen[Any], log: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            stop(proc)
            raise RuntimeError(f"{url} never answered:\n{log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.2)


@pytest.fixture(scope="module")
def backend(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The Chat Completions mock; its base URL (…/v1)."""
    log = tmp_path_factory.mktemp("mock") / "mock.log"
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "tests.litellm.chat_mock", "--port", str(port)], cwd=ROOT,
                            stdout=log.open("ab"), stderr=subprocess.STDOUT)
    try:
        wait_for(f"http://127.0.0.1:{port}/v1/models", proc, log, 30)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        stop(proc)


@pytest.fixture(scope="module")
def proxy(backend: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`litellm --config` with the mock's models; its base URL (…/v1)."""
    try:
        venv.create()
    except (subprocess.SubprocessError, OSError) as exc:
        unavailable(f"no environment with litellm {venv.VERSION} could be made here: {exc}")
    tmp = tmp_path_factory.mktemp("litellm")
    # custom_openai/: an OpenAI-compatible Chat Completions backend, which the proxy's Responses
    # API bridges to (for openai/ models it would call the backend's own /responses).
    entries = "".join(f"  - model_name: {m}\n    litellm_params:\n      model: custom_openai/{m}\n"
                      f"      api_base: {backend}\n      api_key: sk-mock\n" for m in MODELS)
    config = tmp / "proxy.yaml"
    config.write_text(f"model_list:\n{entries}general_settings:\n  master_key: {MASTER_KEY}\n")
    port = free_port()
    log = tmp / "proxy.log"
    env = {"PATH": f"{venv.venv_dir() / 'bin'}:/usr/bin:/bin", "HOME": str(tmp), "PYTHONUNBUFFERED": "1",
           "LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_TELEMETRY": "False", "NO_DOCS": "True"}
    proc = subprocess.Popen([str(venv.executable()), "--config", str(config), "--host", "127.0.0.1",
                             "--port", str(port)], cwd=tmp, env=env, stdout=log.open("ab"), stderr=subprocess.STDOUT)
    try:
        wait_for(f"http://127.0.0.1:{port}/health/liveliness", proc, log, 180)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        stop(proc)


@pytest.fixture(scope="module")
def database() -> Iterator[str]:
    """A database of this module's own on the PostgreSQL server; its URL."""
    name = f"relay_litellm_{uuid.uuid4().hex[:10]}"
    try:
        with psycopg.connect(PG_SERVER, autocommit=True, connect_timeout=5) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
    except psycopg.Error as exc:
        unavailable(f"PostgreSQL at {PG_SERVER} is not reachable: {exc}")
    try:
        yield PG_SERVER.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with psycopg.connect(PG_SERVER, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="module")
def relay(proxy: str, database: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The real server, its upstream LiteLLM's proxy, on PostgreSQL; its base URL."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RELAY_", "DATABASE_", "REDIS_"))}
    env.update({"DJANGO_ENV": "development", "DATABASE_URL": database, "REDIS_URL": "", "OPENAI_BASE_URL": "",
                "OPENAI_API_KEY": "", "SIMULATOR_BASE_URL": "", "PYTHONUNBUFFERED": "1",
                "RELAY_UPSTREAM_BASE_URL": proxy, "RELAY_UPSTREAM_API_KEY": MASTER_KEY})
    for args in (["migrate", "--noinput"],
                 ["shell", "-c", "from django.contrib.auth import get_user_model; "
                                 f"get_user_model().objects.create_user('alice', password={PASSWORD!r})"]):
        subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, check=True, capture_output=True,
                       timeout=180)
    port = free_port()
    log = tmp_path_factory.mktemp("relay") / "server.log"
    proc = start(env, port, log)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(proc)  # type: ignore[arg-type]


@pytest.fixture
def client(relay: str) -> Iterator[httpx.Client]:
    http = logged_in(relay)
    try:
        yield http
    finally:
        http.close()


def rows(database: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(database) as conn:
        return conn.execute(sql, params).fetchall()


def text_of(view: dict[str, Any]) -> str:
    return "".join(b.get("text", "") for b in view["blocks"] if b.get("kind") == "text")


def ask(client: httpx.Client, model: str, text: str = "Hello") -> dict[str, Any]:
    return submit_and_wait(client, {"input": text, "model": model, "client_request_id": uuid.uuid4().hex},
                           timeout_s=60)


def test_text_is_relayed_whole_and_the_long_id_stored_whole(client: httpx.Client, database: str) -> None:
    detail = ask(client, "mock-text")
    assert detail["status"] == "completed", detail
    assert text_of(detail["view"]) == chat_mock.ANSWER
    response_id = detail["response_id"]
    assert response_id.startswith("resp_") and len(response_id) > 128, "LiteLLM's ids are hundreds long"
    stored = rows(database, "SELECT r.response_id, r.final_text, c.last_response_id "
                            "FROM responses_app_responserequest r JOIN responses_app_conversation c "
                            "ON c.id = r.conversation_id WHERE r.id = %s", detail["id"])
    assert stored == [(response_id, chat_mock.ANSWER, response_id)]
    segments = rows(database, "SELECT response_id FROM responses_app_segment WHERE request_id = %s", detail["id"])
    assert segments and all(s == (response_id,) for s in segments)


def test_a_tool_round_runs_the_tool_and_answers_with_its_output(client: httpx.Client, database: str) -> None:
    detail = ask(client, "mock-tool", "What's the weather in Paris?")
    assert detail["status"] == "completed", detail
    kinds = rows(database, "SELECT kind, outcome FROM responses_app_segment WHERE request_id = %s ORDER BY \"index\"",
                 detail["id"])
    assert kinds == [("initial", "completed"), ("continuation", "completed")], "chained by its long id"
    calls = rows(database, "SELECT name, status, output FROM responses_app_toolcall WHERE request_id = %s",
                 detail["id"])
    assert len(calls) == 1 and calls[0][1] == "done", calls
    assert text_of(detail["view"]).startswith(chat_mock.TOOL_ANSWER)
    assert calls[0][2] and calls[0][2] in text_of(detail["view"]), "the model answered with our tool's output"


def test_the_backend_dying_mid_answer_ends_honestly_and_frees_the_slot(client: httpx.Client,
                                                                       database: str) -> None:
    detail = ask(client, "mock-die")
    # The proxy says so itself: response.failed, its error `server_error` (its own connection error).
    assert detail["status"] == "failed", detail
    assert rows(database, "SELECT error_code FROM responses_app_responserequest WHERE id = %s",
                detail["id"]) == [("server_error",)]
    words = chat_mock.words(chat_mock.ANSWER)
    shown = text_of(detail["view"])
    assert chat_mock.ANSWER.startswith(shown) and len(shown) < len(chat_mock.ANSWER), "what came, not more"
    assert shown.startswith("".join(words[:1]))
    in_flight = rows(database, "SELECT count(*) FROM responses_app_responserequest "
                               "WHERE status IN ('pending', 'streaming')")
    assert in_flight == [(0,)], "nothing left streaming: the user's slot is free"
    after = ask(client, "mock-text")
    assert after["status"] == "completed"
