"""`teaparty serve`'s moving parts: the webhook endpoint, the delivery worker, the runtime.

Owns HTTP in (FastAPI, uvicorn) and the background work of a serving process.
"""
