"""A bare grpcio.aio server stream: the floor StreamRun's text deltas are measured against (section b).

`python -m bench.bare` serves one method, `BARE_METHOD` (`/bench.Bare/Stream`), and prints `{"address": ...}` once
listening; it stops when its stdin closes. Its request is a `StreamRunRequest` whose `spec.text` is
the number of events; it answers with that many events built exactly like StreamRun's text deltas
(same IDs, sequence, timestamp and 8-character `part_delta`), one `StreamRunResponse` each, so both
streams carry the same events, and the difference is everything a harness run adds. A `spec.text` of
`EVENTS/MESSAGES` packs the events into that many messages (`StreamRunResponse.events`, spread
evenly), as StreamRun packs them for the SDKs: the floor at StreamRun's own packing.
With `spec.agent == "idle"` it sends one message and then holds the stream open for `spec.text`
seconds: the floor of what an idle open stream costs in memory.
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import grpc
from google.protobuf.timestamp_pb2 import Timestamp
from threadline.v1 import events_pb2, harness_service_pb2

from .wire import BARE_METHOD, DELTA

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _now() -> Timestamp:
    # As the server's `fill_timestamp(..., datetime.now(UTC))`, without importing the server (pydantic-ai).
    delta = datetime.now(UTC) - _EPOCH
    return Timestamp(seconds=delta.days * 86400 + delta.seconds, nanos=delta.microseconds * 1000)


async def _stream(
    request: harness_service_pb2.StreamRunRequest, context: grpc.aio.ServicerContext[Any, Any]
) -> AsyncIterator[harness_service_pb2.StreamRunResponse]:
    if request.spec.agent == "idle":  # one message, then an open, idle stream (section e)
        yield harness_service_pb2.StreamRunResponse(
            event=events_pb2.RunEvent(run_started=events_pb2.RunStarted())
        )
        await asyncio.sleep(float(request.spec.text))
        return
    count_text, _, messages_text = request.spec.text.partition("/")
    count = int(count_text)
    thread_id = f"thread_{uuid.uuid4().hex}"
    run_id = f"run-{uuid.uuid4().hex}"

    def event(sequence: int) -> events_pb2.RunEvent:
        return events_pb2.RunEvent(
            thread_id=thread_id,
            run_id=run_id,
            sequence=sequence,
            occurred_at=_now(),
            part_delta=events_pb2.PartDelta(
                part_index=0, kind=events_pb2.PART_KIND_TEXT, content_delta=DELTA
            ),
        )

    if not messages_text:  # one event per message
        for sequence in range(count):
            yield harness_service_pb2.StreamRunResponse(event=event(sequence))
        return
    messages = max(1, min(count, int(messages_text)))
    for index in range(
        messages
    ):  # message `index` holds events [count*index/messages, count*(index+1)/messages)
        first, end = count * index // messages, count * (index + 1) // messages
        yield harness_service_pb2.StreamRunResponse(
            events=[event(sequence) for sequence in range(first, end)]
        )


async def main() -> None:
    server = grpc.aio.server()
    handler = grpc.unary_stream_rpc_method_handler(
        _stream,
        request_deserializer=harness_service_pb2.StreamRunRequest.FromString,
        response_serializer=harness_service_pb2.StreamRunResponse.SerializeToString,
    )
    service, method = BARE_METHOD.strip("/").split("/")
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service, {method: handler}),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    print(json.dumps({"address": f"127.0.0.1:{port}"}), flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    await server.stop(None)


if __name__ == "__main__":
    asyncio.run(main())
