"""The HTTP sidecar (SPEC §8, seed 000): an aiohttp adapter around the agent core.

Only this package imports aiohttp's server side. Public API:

- :class:`kernel.gateway.server.Gateway` ``(deps, routers)``: start/stop the sidecar;
  the composition root hands it the services the routes use
  (:class:`kernel.gateway.deps.GatewayDeps`, never the whole Kernel) and
  :data:`kernel.gateway.routes.ROUTERS`.
- :mod:`kernel.gateway.api`: what a route module uses (``Router``, whose ``body=``
  model validates the body the handler is handed, ``ApiError``, ``refusal``,
  ``json_response``, ``deps_of``).
- :mod:`kernel.gateway.browser`: the Origin/Host checks against web pages.
- :mod:`kernel.gateway.schema`: the pydantic bases (``BodyModel``, ``Shape``) that
  validate bodies, describe answers and make ``/openapi.json`` (:mod:`.openapi`).
- :mod:`kernel.gateway.v1`, :mod:`.claude_format`, :mod:`.claude_reply`,
  :mod:`.openai_format`, :mod:`.responses_format`, :mod:`.responses_reply`: the Claude-
  and OpenAI-compatible model APIs (Messages, Chat Completions, Responses).

Each area of the API is one module under ``routes/``.
"""
