from django.apps import AppConfig


class ResponsesAppConfig(AppConfig):
    name = "responses_app"
    verbose_name = "Responses relay"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import checks, logcontext  # noqa: F401 - checks registers the system checks
        from .viewers import guard  # noqa: F401 - its receivers close sockets on logout, password change

        logcontext.install()  # every log record names the request being handled
