from django.apps import AppConfig


class ResponsesAppConfig(AppConfig):
    name = "responses_app"
    verbose_name = "Responses relay"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import checks  # noqa: F401 - checks registers the system checks
        from .consumers import guard  # noqa: F401 - its receivers close sockets on logout, password change
        from .ops import logcontext

        logcontext.install()  # every log record names the request being handled
