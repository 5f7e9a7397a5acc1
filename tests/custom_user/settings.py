"""The demo's settings with a custom user model (tests/host/test_custom_user_model.py runs under it)."""

from project.settings import *  # noqa: F403

INSTALLED_APPS = [*INSTALLED_APPS, "tests.custom_user"]  # noqa: F405
AUTH_USER_MODEL = "custom_user.Member"
