"""The HTTP sidecar (SPEC §8, seed 000): an aiohttp adapter around the agent core.

Only this package imports aiohttp's server side. ``server.py`` runs it, ``api.py`` holds
the router/error/body helpers, ``openapi.py`` describes it, and each area of the API is
one module under ``routes/``.

Public API: ``kernel.gateway.server.Gateway`` (the sidecar the entry point starts and stops,
imported off the event loop); nothing else is imported from outside.
"""
