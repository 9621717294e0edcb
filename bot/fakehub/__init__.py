"""A local GitHub stand-in (shipped: `teaparty demo` runs against it).

REST endpoints checked against GitHub's OpenAPI description, bare git remotes, webhooks out.
The App never imports it; the demo and the tests do.
"""
