"""``python -m kit.serve wordle --port 8000``: serve one game over OpenEnv until interrupted."""

from __future__ import annotations

import argparse

import uvicorn

from kit.serve import DEFAULT_MAX_CONCURRENT_ENVS, ENVIRONMENTS, build_app, environment_class


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m kit.serve", description=__doc__)
    parser.add_argument(
        "environment", help=f"a game ({', '.join(ENVIRONMENTS)}) or a 'module:Class' entrypoint"
    )
    parser.add_argument("--host", default="127.0.0.1", help="0.0.0.0 to serve other machines")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument(
        "--max-concurrent-envs",
        type=int,
        default=None,
        help="sessions held at once (default: the MAX_CONCURRENT_ENVS variable, else "
        f"{DEFAULT_MAX_CONCURRENT_ENVS}); a TRL run opens one per pooled env instance",
    )
    parser.add_argument("--seed", type=int, default=None, help="seeds the tasks a bare reset draws")
    args = parser.parse_args(argv)
    try:
        environment = environment_class(args.environment)
    except ValueError as error:
        parser.error(str(error))
    app = build_app(environment, args.max_concurrent_envs, seed=args.seed)
    uvicorn.run(app, host=args.host, port=args.port, ws_per_message_deflate=False)


if __name__ == "__main__":
    main()
