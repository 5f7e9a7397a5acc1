from django.contrib import admin
from django.contrib.auth import urls as auth_urls
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.staticfiles.urls import staticfiles_urlpatterns
from django.core.validators import MaxLengthValidator
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.templatetags.static import static
from django.urls import URLPattern, URLResolver, include, path
from django.utils.cache import patch_cache_control


def favicon(request: HttpRequest) -> HttpResponse:
    """/favicon.ico, which browsers ask for by themselves (a JSON page, the admin): the app's icon
    (responses_app/favicon.svg; its pages also link it). Its static address, hashed by the storage,
    changes with a release: a redirect cached for a day, not a permanent one."""
    response = HttpResponseRedirect(static("responses_app/favicon.svg"))
    patch_cache_control(response, public=True, max_age=86400)
    return response


class LoginForm(AuthenticationForm):
    """Django's login form with its username's length checked: it sets max_length after the field
    is made, so no validator checks it, and a longer name reached authenticate() and django-axes'
    record of the failure (a 255-character column: a 500 on PostgreSQL)."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        field = self.fields["username"]
        field.validators.append(MaxLengthValidator(field.max_length))  # type: ignore[attr-defined]


urlpatterns: list[URLPattern | URLResolver] = [
    path("healthz", include("responses_app.health")),  # probes: database and channel layer reachable
    path("metrics", include("responses_app.metrics")),  # Prometheus: loopback only, or a bearer token
    path("favicon.ico", favicon),
    path("admin/", admin.site.urls),
    path("accounts/login/", auth_views.LoginView.as_view(authentication_form=LoginForm), name="login"),
    # logout and passwords: Django's own, its login replaced above
    path("accounts/", include([p for p in auth_urls.urlpatterns if getattr(p, "name", None) != "login"])),
    path("", include("responses_app.urls")),
]
# Static files under DEBUG for servers other than `runserver` (e.g. plain daphne in browser tests).
urlpatterns += staticfiles_urlpatterns()
