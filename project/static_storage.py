"""collectstatic's storage: WhiteNoise's compressed manifest storage, with the JavaScript modules'
own `import ... from "./x.js"` rewritten to the hashed names too.

Without it only the page's <script src> was hashed: main.<hash>.js imported `./composer.js` and the
rest by their plain names, which nginx caches for an hour (WhiteNoise a minute), so a browser could
run a new release's main module with the previous release's modules for that long. With it every
module a page loads is a hashed, immutable file of the same release.
"""

from __future__ import annotations

from whitenoise.storage import CompressedManifestStaticFilesStorage


class StaticStorage(CompressedManifestStaticFilesStorage):
    support_js_module_import_aggregation = True
