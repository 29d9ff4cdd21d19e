"""``serve --http`` as an OAuth 2.1 resource server: tokens verified (``verify``, ``keys``, ``introspect``), the HTTP
gate (``gate``), scopes as roles (``scopes``) and the app with its metadata documents (``app``). The settings and
who may use which vault are the hardened mode's (``vaultsync.hardened.access``)."""
