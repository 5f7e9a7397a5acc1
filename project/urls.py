from django.contrib import admin
from django.contrib.staticfiles.urls import staticfiles_urlpatterns
from django.urls import URLPattern, URLResolver, include, path

urlpatterns: list[URLPattern | URLResolver] = [
    path("healthz", include("responses_app.health")),  # probes: database and channel layer reachable
    path("metrics", include("responses_app.metrics")),  # Prometheus: loopback only, or a bearer token
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),  # login, logout, password change
    path("", include("responses_app.urls")),
]
# Static files under DEBUG for servers other than `runserver` (e.g. plain daphne in browser tests).
urlpatterns += staticfiles_urlpatterns()
