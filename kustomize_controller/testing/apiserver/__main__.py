"""``python -m kustomize_controller.testing.apiserver --port 0 --kubeconfig-out FILE``.

Starts the embedded API server, prints its address (``https://127.0.0.1:PORT``) on one line of stdout,
writes a kubeconfig to FILE when asked, and serves until SIGTERM or SIGINT, then shuts down cleanly.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys

from .server import ApiServer


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m kustomize_controller.testing.apiserver",
                                     description="Embedded Kubernetes API server for tests and local runs")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="port to listen on (0: any free port)")
    parser.add_argument("--kubeconfig-out", default=None, help="write a kubeconfig for the admin user here")
    parser.add_argument("--token", default=None, help="admin bearer token (default: random)")
    parser.add_argument("--history-size", type=int, default=10000, help="watch events kept for resuming")
    parser.add_argument("--rbac", action="store_true", help="enforce RBAC for non-admin users")
    parser.add_argument("--anonymous-auth", action="store_true",
                        help="treat requests without a token as system:anonymous (403) instead of 401")
    parser.add_argument("--simulate-workloads", action="store_true",
                        help="report Deployments, StatefulSets, Jobs, Pods… ready right after each write")
    parser.add_argument("--populate-namespaces", action="store_true",
                        help="give new namespaces the default ServiceAccount and kube-root-ca.crt, as clusters do")
    parser.add_argument("--plain-http", action="store_true",
                        help="serve plain HTTP (kubectl and client-go then send no bearer token)")
    parser.add_argument("--no-flow-control-headers", action="store_true",
                        help="send no X-Kubernetes-PF-* headers (a server without API Priority and Fairness: "
                             "clients then keep their client-side rate limiter)")
    parser.add_argument("--throttle-share", type=float, default=0.0,
                        help="answer this share (0..1) of resource requests with 429 + Retry-After: 1")
    return parser.parse_args(argv)


async def _serve(args: argparse.Namespace) -> None:
    server = ApiServer(host=args.host, port=args.port, token=args.token, history_size=args.history_size,
                       rbac=args.rbac, anonymous_auth=args.anonymous_auth, kubeconfig_path=args.kubeconfig_out,
                       tls=not args.plain_http, simulate_workloads=args.simulate_workloads,
                       populate_namespaces=args.populate_namespaces,
                       flow_control_headers=not args.no_flow_control_headers, throttle_share=args.throttle_share)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with server:
        print(server.url, flush=True)
        if args.kubeconfig_out:
            print(f"kubeconfig: {server.kubeconfig_path}", file=sys.stderr, flush=True)
        await stop.wait()


def main(argv: list[str] | None = None) -> int:
    args = _parse(sys.argv[1:] if argv is None else argv)
    asyncio.run(_serve(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
