"""Every game's Dockerfile from one template: ``python -m envs.template GAME`` writes
``envs/GAME/Dockerfile`` from ``envs/Dockerfile.template``.

The four built-in images differ only in the game's name, so they are written, not edited:
``tests/test_openenv.py`` checks that each committed Dockerfile is the template's rendering, and a
change to the image is a change to the template. A game of your own gets the same image once its
folder holds a ``server.py`` with an ``app`` (three lines, as ``envs/catch/server.py``).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

ENVS = Path(__file__).resolve().parent
TEMPLATE = ENVS / "Dockerfile.template"


def dockerfile(game: str) -> str:
    """The Dockerfile that serves ``envs.<game>.server:app`` on port 8000."""
    if not re.fullmatch(r"[a-z][a-z0-9_]*", game):
        raise ValueError(
            f"game {game!r}: a folder name under envs/ is lowercase letters, digits and _"
        )
    return TEMPLATE.read_text(encoding="utf-8").replace("{game}", game)


def write(game: str, *, force: bool = False, root: Path = ENVS) -> Path:
    """Write ``<root>/<game>/Dockerfile``; refuse to replace a different one unless ``force``."""
    text = dockerfile(game)
    folder = root / game
    if not (folder / "server.py").is_file():
        raise FileNotFoundError(
            f"{folder / 'server.py'} does not exist: the image serves its `app`"
        )
    path = folder / "Dockerfile"
    if path.exists() and path.read_text(encoding="utf-8") != text and not force:
        raise FileExistsError(f"{path} differs from the template's rendering; --force replaces it")
    path.write_text(text, encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m envs.template", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "games", nargs="+", metavar="GAME", help="a folder under envs/ with a server.py"
    )
    parser.add_argument(
        "--force", action="store_true", help="replace a Dockerfile that was edited by hand"
    )
    args = parser.parse_args(argv)
    for game in args.games:
        try:
            print(write(game, force=args.force).relative_to(ENVS.parent))
        except (ValueError, FileNotFoundError, FileExistsError) as error:
            parser.error(str(error))


if __name__ == "__main__":
    main()
