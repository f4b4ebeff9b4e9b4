"""An OTLP/gRPC metrics receiver: grpcio's server with the official
OpenTelemetry protos, for tests/otlp/otlp_export.rs.

It prints `listening <port>` once it serves, then appends one JSON line per
call it answers to --out: the answer, the points, the call's metadata, and
(when taken) the request as grpcio decoded it, base64 of its serialisation.
--script gives the first calls' answers (a status code name, or
RESOURCE_EXHAUSTED:<seconds> for one with a RetryInfo delay), OK after.
--nan-invalid answers INVALID_ARGUMENT to a request holding a NaN point.
--max-receive-bytes is grpcio's own message size limit; past it grpcio
itself answers RESOURCE_EXHAUSTED. --echo CODE answers every call with that
code and a message echoing the call's metadata, as a careless receiver's
error does. --tls CERT KEY serves over TLS.
"""

import argparse
import base64
import json
import math
import sys
import threading
from concurrent import futures

import grpc
from google.protobuf import any_pb2, duration_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status
from opentelemetry.proto.collector.metrics.v1 import (
    metrics_service_pb2,
    metrics_service_pb2_grpc,
)


def number_points(request):
    for rm in request.resource_metrics:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                data = getattr(m, m.WhichOneof("data"))
                for p in data.data_points:
                    yield p


def value(point):
    return point.as_double if point.WhichOneof("value") == "as_double" else point.as_int


class Service(metrics_service_pb2_grpc.MetricsServiceServicer):
    def __init__(self, out, script, nan_invalid, echo):
        self.out = out
        self.script = script
        self.nan_invalid = nan_invalid
        self.echo = echo
        self.lock = threading.Lock()

    def record(self, line):
        with self.lock:
            self.out.write(json.dumps(line) + "\n")
            self.out.flush()

    def Export(self, request, context):
        with self.lock:
            answer = self.script.pop(0) if self.script else (self.echo or "OK")
        points = list(number_points(request))
        if answer == "OK" and self.nan_invalid and any(math.isnan(value(p)) for p in points):
            answer = "INVALID_ARGUMENT"
        line = {
            "answered": answer.split(":")[0],
            "points": len(points),
            "metadata": {k: v for k, v in context.invocation_metadata() if not k.endswith("-bin")},
        }
        if answer == "OK":
            line["request"] = base64.b64encode(request.SerializeToString()).decode()
            self.record(line)
            return metrics_service_pb2.ExportMetricsServiceResponse()
        self.record(line)
        if answer.startswith("RESOURCE_EXHAUSTED:"):
            seconds = int(answer.split(":")[1])
            detail = any_pb2.Any()
            detail.Pack(error_details_pb2.RetryInfo(retry_delay=duration_pb2.Duration(seconds=seconds)))
            status = status_pb2.Status(
                code=code_pb2.RESOURCE_EXHAUSTED, message="slow down", details=[detail]
            )
            context.abort_with_status(rpc_status.to_status(status))
        if self.echo:
            sent = "; ".join(f"{k}: {v}" for k, v in line["metadata"].items())
            context.abort(getattr(grpc.StatusCode, answer), f"refused; you sent {sent}")
        context.abort(getattr(grpc.StatusCode, answer), f"scripted {answer}")


def main():
    args = argparse.ArgumentParser()
    args.add_argument("--out", required=True)
    args.add_argument("--script", default="")
    args.add_argument("--nan-invalid", action="store_true")
    args.add_argument("--echo", default="")
    args.add_argument("--max-receive-bytes", type=int, default=4 * 1024 * 1024)
    args.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"))
    a = args.parse_args()
    script = [s for s in a.script.split(",") if s]
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=4),
        options=[("grpc.max_receive_message_length", a.max_receive_bytes)],
    )
    out = open(a.out, "a", encoding="utf-8")
    metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(
        Service(out, script, a.nan_invalid, a.echo), server
    )
    if a.tls:
        with open(a.tls[0], "rb") as c, open(a.tls[1], "rb") as k:
            credentials = grpc.ssl_server_credentials([(k.read(), c.read())])
        port = server.add_secure_port("127.0.0.1:0", credentials)
    else:
        port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(f"listening {port}", flush=True)
    server.wait_for_termination()


if __name__ == "__main__":
    sys.exit(main())
