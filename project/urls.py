from django.contrib import admin
from django.contrib.staticfiles.urls import staticfiles_urlpatterns
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


urlpatterns: list[URLPattern | URLResolver] = [
    path("healthz", include("responses_app.health")),  # probes: database and channel layer reachable
    path("metrics", include("responses_app.metrics")),  # Prometheus: loopback only, or a bearer token
    path("favicon.ico", favicon),
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),  # login, logout, password change
    path("", include("responses_app.urls")),
]
# Static files under DEBUG for servers other than `runserver` (e.g. plain daphne in browser tests).
urlpatterns += staticfiles_urlpatterns()
