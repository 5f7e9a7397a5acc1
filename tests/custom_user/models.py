"""A host's own user model: the app relates to AUTH_USER_MODEL, never to auth.User."""

from __future__ import annotations

from django.contrib.auth.models import AbstractUser
from django.db import models


class Member(AbstractUser):
    team = models.CharField(max_length=50, blank=True)

    class Meta:
        app_label = "custom_user"
