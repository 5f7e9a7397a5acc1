from django.apps import AppConfig


class ResponsesAppConfig(AppConfig):
    name = "responses_app"
    verbose_name = "Responses relay"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import checks  # noqa: F401 - checks registers the system checks
        from .ops import logcontext

        logcontext.install()  # every log record names the request being handled
        connect_receivers()


def connect_receivers() -> None:
    """Every signal receiver of the app, connected here and nowhere else (not as a side effect of
    whichever module happens to be imported first)."""
    from django.conf import settings
    from django.contrib.auth.signals import user_logged_out
    from django.core.signals import request_started, setting_changed
    from django.db.models.signals import post_delete, post_save

    from .attachments import forget_deleted
    from .conf import reload_on_setting_changed
    from .models import Attachment
    from .relay.worker import start_with_the_first_request
    from .viewers.guard import close_sockets_on_logout, recheck_sockets_on_user_save

    setting_changed.connect(reload_on_setting_changed, dispatch_uid="responses_app-settings-reload")
    # A runner starts with the first request an ASGI server handles.
    request_started.connect(start_with_the_first_request, dispatch_uid="relay-start-runner-with-the-first-request")
    # Sockets close on logout, and re-read their session when the user's password or activity changes.
    user_logged_out.connect(close_sockets_on_logout, dispatch_uid="relay-close-sockets-on-logout")
    post_save.connect(recheck_sockets_on_user_save, sender=settings.AUTH_USER_MODEL,
                      dispatch_uid="relay-recheck-sockets-on-user-save")
    # An attachment's bytes go with its row (a conversation deleted for good, a user removed).
    post_delete.connect(forget_deleted, sender=Attachment, dispatch_uid="relay-attachment-bytes")
