"""Protobuf <-> core conversions, one module per message family, both directions side by side.

`state` (envelope), `deferred` (batches), `run` (requests and results), `events` (stream events) and
`errors` (`HarnessError`/`ServerError` -> rich gRPC status). No business rule lives here: every decision
is a core function the mapping calls, so a host embedding `harness/` gets the same answer.
"""
