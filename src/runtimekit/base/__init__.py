"""The base layer: small mechanisms every part of the kit shares, each written once.

`runtimekit.base` sits below every other package (`.importlinter`) and imports none of them, so
the protocol loader, the model, the kube layer and every component may use it, as kopf's helpers
and client-go's `util/` packages serve the code above them:

- `backoff`: exponential back-off with a cap and optional jitter (`Backoff`);
- `workqueue`: a work queue of keys with delays and rate-limited retries (client-go's);
- `threads`: named daemon threads that share one stop event (`Workers`);
- `timestamps`: RFC 3339 times as Kubernetes writes and reads them;
- `files`: atomic, durable file replacement;
- `config`: typed configuration from plain mappings (`msgspec.convert` into frozen types);
- `keyring`: HMAC signatures with a rotating key ring read from a folder (a mounted Secret);
- `rpcerrors`: refusals with a code, and the one decorator that maps them to gRPC statuses.
"""
