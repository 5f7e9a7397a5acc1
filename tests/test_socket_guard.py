"""The sockets' session rule without a socket (viewers/guard.py): a session is its user's while
Django's own rule holds against the user as stored now (the password's hash, a fallback secret's,
an active user, a configured backend); which saves of a user tell that user's sockets to look again."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.contrib.auth import get_user_model
from django.contrib.sessions.backends.db import SessionStore

from responses_app.viewers.guard import session_time_left, user_group

pytestmark = pytest.mark.django_db
MODEL_BACKEND = "django.contrib.auth.backends.ModelBackend"


def session_of(user: Any, *, auth_hash: str | None = None, backend: str = MODEL_BACKEND) -> str:
    store = SessionStore()
    store["_auth_user_id"] = str(user.pk)
    store["_auth_user_backend"] = backend
    store["_auth_user_hash"] = user.get_session_auth_hash() if auth_hash is None else auth_hash
    store.create()
    return str(store.session_key)


def test_a_live_session_has_its_expiry_left(owner: Any) -> None:
    left = session_time_left(session_of(owner), owner.pk)
    assert left is not None and 0 < left <= 14 * 24 * 3600


def test_a_password_changed_since_is_read_from_the_database(owner: Any) -> None:
    key = session_of(owner)
    stale = get_user_model().objects.get(pk=owner.pk)  # what a socket loaded at connect
    changed = get_user_model().objects.get(pk=owner.pk)
    changed.set_password("another secret")
    changed.save()
    assert stale.get_session_auth_hash() != changed.get_session_auth_hash()
    assert session_time_left(key, owner.pk) is None


def test_a_password_written_by_an_update_is_noticed_too(owner: Any) -> None:
    key = session_of(owner)
    get_user_model().objects.filter(pk=owner.pk).update(password="pbkdf2_sha256$1$x$y")
    assert session_time_left(key, owner.pk) is None


@pytest.mark.parametrize("change", ["deactivated", "deleted", "flushed", "another user", "unknown backend",
                                    "no hash"])
def test_sessions_that_are_no_longer_the_users(owner: Any, teammate: Any, change: str) -> None:
    key = session_of(owner, backend="x.Backend" if change == "unknown backend" else MODEL_BACKEND,
                     auth_hash="" if change == "no hash" else None)
    if change == "deactivated":
        get_user_model().objects.filter(pk=owner.pk).update(is_active=False)
    elif change == "deleted":
        user_id = owner.pk
        owner.delete()
        owner.pk = user_id
    elif change == "flushed":
        SessionStore(session_key=key).delete()
    user_id = teammate.pk if change == "another user" else owner.pk
    assert session_time_left(key, user_id) is None


def test_a_hash_made_with_a_fallback_secret_still_holds(owner: Any, settings: Any) -> None:
    old_hash = owner.get_session_auth_hash()
    settings.SECRET_KEY_FALLBACKS = [settings.SECRET_KEY]
    settings.SECRET_KEY = "a-new-secret-key-" + "x" * 40
    key = session_of(owner, auth_hash=old_hash)
    assert session_time_left(key, owner.pk) is not None
    settings.SECRET_KEY_FALLBACKS = []
    assert session_time_left(key, owner.pk) is None


@pytest.fixture
def listening(owner: Any) -> Any:
    """A channel in the owner's user group, as each of their sockets is."""
    layer = get_channel_layer()
    assert layer is not None
    owner.listener = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(user_group(owner.pk), owner.listener)
    return owner


def pending(owner: Any) -> int:
    layer = get_channel_layer()
    queue = layer.channels.get(owner.listener)  # type: ignore[union-attr]
    return 0 if queue is None else int(queue.qsize())


def test_a_password_set_tells_the_users_sockets_once_committed(listening: Any, commits: Any) -> None:
    with commits(execute=True) as callbacks:
        listening.set_password("new")
        listening.save()
        assert pending(listening) == 0, "not before the commit: a socket would read the old hash"
    assert len(callbacks) == 1 and pending(listening) == 1


@pytest.mark.parametrize("fields", [["password"], ["is_active"], None])
def test_saves_that_may_end_a_session_tell_the_sockets(listening: Any, commits: Any,
                                                       fields: list[str] | None) -> None:
    with commits(execute=True):
        listening.save(update_fields=fields)
    assert pending(listening) == 1


def test_a_login_or_another_field_tells_nothing(listening: Any, commits: Any) -> None:
    with commits(execute=True) as callbacks:
        listening.save(update_fields=["last_login"])
        listening.save(update_fields=["first_name"])
        get_user_model().objects.create_user("newcomer")
    assert callbacks == [] and pending(listening) == 0


@pytest.fixture
def commits(django_capture_on_commit_callbacks: Any) -> Any:
    return django_capture_on_commit_callbacks
