"""Load the official client code (OpenEnv's typed clients, TRL's example env classes) from checkouts.

Why: the kit's servers claim that the clients written for OpenEnv's official servers play them
unchanged. Only the real client code can prove that, and it is not ours to commit: it lives in
github:meta-pytorch/OpenEnv (``envs/textarena_env``, ``envs/openspiel_env``, ``envs/echo_env``)
and github:huggingface/trl (``examples/scripts/openenv/*.py``). So a developer points
``KIT_OPENENV_REPO`` and ``KIT_TRL_REPO`` at checkouts (a work tree or a bare git directory) and
this module loads the code from there, as it is, for ``tests/test_official_clients.py``:

* OpenEnv's client packages are copied out of git (HEAD; ``echo_env`` from the parent of
  a75310c5, the last one before it became MCP-only, which is the one TRL's ``echo.py`` imports
  ``echo_env.models.EchoAction`` from) into a temporary folder and imported under their own
  names, so TRL's ``from textarena_env import ...`` finds them.
* TRL's env classes are defined inside each script's ``main()`` (closures over ``env_url`` or
  ``args``), next to ``trl``/``datasets`` imports and a training run. ``trl_class`` takes the
  class's source with ``ast``, with the module-level helpers and constants it uses and the
  imports of those that come from the standard library or the OpenEnv clients, and runs it with
  the closure's variables as globals: the class body is TRL's own, byte for byte.

Run it to see what a pair of checkouts provides::

    KIT_OPENENV_REPO=... KIT_TRL_REPO=... python scripts/official_clients.py
"""

from __future__ import annotations

import ast
import builtins
import importlib
import os
import subprocess
import symtable
import sys
import tempfile
import textwrap
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

OPENENV_VAR = "KIT_OPENENV_REPO"
TRL_VAR = "KIT_TRL_REPO"

ECHO_PRE_MCP = "a75310c5^"
"""The last OpenEnv revision whose ``echo_env`` has ``EchoAction`` (a75310c5 made it MCP-only)."""

PACKAGES = {"textarena_env": "HEAD", "openspiel_env": "HEAD", "echo_env": ECHO_PRE_MCP}
"""OpenEnv's client packages (``envs/<name>``, without ``server/``) and the revision to load."""

TRL_SCRIPTS = "examples/scripts/openenv"


class Unavailable(LookupError):
    """The official code cannot be loaded here; the message says why (a test skips with it)."""


def checkout(variable: str) -> Path:
    """The checkout an environment variable names, or ``Unavailable`` saying what is missing."""
    value = os.environ.get(variable, "").strip()
    if not value:
        raise Unavailable(
            f"{variable} is not set (point it at a checkout, work tree or bare git dir)"
        )
    path = Path(value).expanduser()
    if not path.is_dir():
        raise Unavailable(f"{variable}={value!r} is not a directory")
    return path


def _git(repo: Path, *args: str) -> str | None:
    """``git -C repo args`` output, or None where ``repo`` is not a git checkout at all."""
    try:
        result = subprocess.run(
            ["git", "-C", str(repo), *args], capture_output=True, text=True, check=False
        )
    except FileNotFoundError:  # no git on this machine: only a plain tree at HEAD can be read
        return None
    return result.stdout if result.returncode == 0 else None


def _is_git(repo: Path) -> bool:
    return _git(repo, "rev-parse", "--git-dir") is not None


def read(repo: Path, revision: str, path: str) -> str:
    """The file ``path`` of ``repo`` at ``revision``: from git (bare or not), else from the tree.

    From git even in a work tree, so that local edits of the official code cannot pass for it.
    """
    if _is_git(repo):
        text = _git(repo, "show", f"{revision}:{path}")
        if text is None:
            raise Unavailable(f"{repo} has no {path} at {revision}")
        return text
    if revision != "HEAD":
        raise Unavailable(f"{repo} is not a git checkout: cannot read {path} at {revision}")
    file = repo / path
    if not file.is_file():
        raise Unavailable(f"{repo} has no {path}")
    return file.read_text()


def _list(repo: Path, revision: str, folder: str) -> list[str]:
    """The ``.py`` files directly in ``folder`` (not its subfolders) at ``revision``."""
    if _is_git(repo):
        names = (_git(repo, "ls-tree", "--name-only", f"{revision}:{folder}") or "").split()
    elif revision != "HEAD":
        raise Unavailable(f"{repo} is not a git checkout: cannot read {folder} at {revision}")
    elif (repo / folder).is_dir():
        names = [p.name for p in (repo / folder).iterdir() if p.is_file()]
    else:
        names = []
    files = sorted(name for name in names if name.endswith(".py"))
    if "__init__.py" not in files:
        raise Unavailable(f"{repo} has no package {folder} at {revision}")
    return files


def load_openenv_clients(repo: Path, workdir: Path) -> SimpleNamespace:
    """OpenEnv's typed clients, imported as ``textarena_env``, ``openspiel_env``, ``echo_env``.

    The packages are written under ``workdir`` and imported from there; they stay in
    ``sys.modules`` (TRL's scripts import them by name). A second call returns the same modules.
    """
    modules: dict[str, ModuleType] = {}
    missing = [name for name in PACKAGES if name not in sys.modules]
    for name in missing:
        revision = PACKAGES[name]
        folder = f"envs/{name}"
        (workdir / name).mkdir(parents=True, exist_ok=True)
        for file in _list(repo, revision, folder):
            (workdir / name / file).write_text(read(repo, revision, f"{folder}/{file}"))
    if missing:
        sys.path.insert(0, str(workdir))
        try:
            for name in missing:
                importlib.import_module(name)
        finally:
            sys.path.remove(str(workdir))
    for name in PACKAGES:
        modules[name] = sys.modules[name]
    textarena, openspiel, echo = (modules[name] for name in PACKAGES)
    return SimpleNamespace(
        TextArenaEnv=textarena.TextArenaEnv,
        TextArenaAction=textarena.TextArenaAction,
        TextArenaState=textarena.TextArenaState,
        OpenSpielEnv=openspiel.OpenSpielEnv,
        OpenSpielAction=openspiel.OpenSpielAction,
        OpenSpielState=openspiel.OpenSpielState,
        EchoEnv=echo.EchoEnv,
        EchoAction=importlib.import_module("echo_env.models").EchoAction,
    )


def load_openenv_servers(repo: Path, workdir: Path) -> SimpleNamespace:
    """OpenEnv's official server environments for the kit's games, ready for ``create_app``.

    ``textarena_env``'s (Wordle, Sudoku; TextArena and NLTK's data must be installed, as
    ``tests/conftest.py`` arranges), ``openspiel_env``'s (Catch; ``open_spiel``) and the pre-MCP
    ``echo_env``'s, each with its action, observation and state models. Loaded beside the clients
    (``load_openenv_clients``), whose packages they extend with their ``server/`` folders.
    """
    load_openenv_clients(repo, workdir)
    for name, revision in PACKAGES.items():
        # Beside the client package already imported (perhaps from an earlier workdir), so that
        # `<name>.server` resolves inside it.
        folder, package = f"envs/{name}/server", Path(sys.modules[name].__file__).parent
        (package / "server").mkdir(exist_ok=True)
        for file in _list(repo, revision, folder):
            (package / "server" / file).write_text(read(repo, revision, f"{folder}/{file}"))
    textarena = importlib.import_module("textarena_env.server.environment")
    openspiel = importlib.import_module("openspiel_env.server.openspiel_environment")
    echo = importlib.import_module("echo_env.server.echo_environment")
    ta_models = importlib.import_module("textarena_env.models")
    os_models = importlib.import_module("openspiel_env.models")
    echo_models = importlib.import_module("echo_env.models")
    return SimpleNamespace(
        TextArenaEnvironment=textarena.TextArenaEnvironment,
        textarena_models=(
            ta_models.TextArenaAction,
            ta_models.TextArenaObservation,
            ta_models.TextArenaState,
        ),
        OpenSpielEnvironment=openspiel.OpenSpielEnvironment,
        openspiel_models=(
            os_models.OpenSpielAction,
            os_models.OpenSpielObservation,
            os_models.OpenSpielState,
        ),
        EchoEnvironment=echo.EchoEnvironment,
        echo_models=(echo_models.EchoAction, echo_models.EchoObservation),
    )


def _defined(node: ast.stmt) -> set[str]:
    """The module-level names a statement defines."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
    return {n.id for t in targets if t is not None for n in ast.walk(t) if isinstance(n, ast.Name)}


def _used(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _importable(node: ast.stmt) -> bool:
    """Whether an import of the script may run here: the standard library or OpenEnv's clients.

    Why not the rest: ``trl``, ``datasets``, ``requests`` and Docker providers are what the
    script needs to train, not what its env class needs to play.
    """
    if isinstance(node, ast.ImportFrom):
        roots = {(node.module or "").split(".")[0]} if node.level == 0 else {""}
    else:
        roots = {alias.name.split(".")[0] for alias in node.names}
    allowed = set(PACKAGES) | set(sys.stdlib_module_names)
    return all(root in allowed for root in roots)


def trl_source(source: str, class_name: str) -> str:
    """The code of TRL's class ``class_name`` and of the module-level things it uses, in order.

    The class is found at module level or directly in ``main()``. Everything it needs is taken
    transitively (a helper function that uses a constant brings the constant); statements that
    run the script (argument parsing, ``sys.path`` edits, the trainer) are left out.
    """
    tree = ast.parse(source)
    classes = [node for node in tree.body if isinstance(node, ast.ClassDef)]
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "main":
            classes += [n for n in node.body if isinstance(n, ast.ClassDef)]
    wanted = [node for node in classes if node.name == class_name]
    if len(wanted) != 1:
        raise Unavailable(f"the script defines {len(wanted)} classes named {class_name!r}")
    candidates = [
        node
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.Assign, ast.AnnAssign))
        and not (isinstance(node, ast.FunctionDef) and node.name == "main")
        or isinstance(node, (ast.Import, ast.ImportFrom))
        and _importable(node)
    ]
    keep: list[ast.stmt] = []
    needed = _used(wanted[0])
    changed = True
    while changed:  # the closure of what the class uses, through helpers and constants
        changed = False
        for node in candidates:
            if node not in keep and _defined(node) & needed:
                keep.append(node)
                needed |= _used(node)
                changed = True
    lines = source.splitlines(keepends=True)
    chunks = []
    for node in [node for node in tree.body if node in keep] + wanted:
        # The source text itself (dedented out of main()), not ast.unparse: TRL's code as written.
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        chunks.append(textwrap.dedent("".join(lines[first - 1 : node.end_lineno])))
    return "\n\n".join(chunks)


def free_names(code: str) -> set[str]:
    """The global names ``code`` reads but neither defines nor gets from builtins."""
    table = symtable.symtable(code, "<trl>", "exec")
    defined = {s.get_name() for s in table.get_symbols() if s.is_assigned() or s.is_imported()}
    used: set[str] = set()

    def walk(scope: symtable.SymbolTable) -> None:
        for symbol in scope.get_symbols():
            is_module = scope.get_type() == "module"
            if symbol.is_referenced() and (is_module or symbol.is_global()):
                used.add(symbol.get_name())
        for child in scope.get_children():
            walk(child)

    walk(table)
    return used - defined - set(dir(builtins))


def trl_class(repo: Path, script: str, class_name: str, **closure: Any) -> type:
    """TRL's env class ``class_name`` of ``examples/scripts/openenv/<script>.py``, runnable here.

    ``closure``: the variables of ``main()`` the class reads (``env_url``, ``args``...); a name
    the class needs and nobody gave is an error here, not a ``NameError`` mid-game. The OpenEnv
    clients must be loaded first (``load_openenv_clients``).
    """
    code = trl_source(read(repo, "HEAD", f"{TRL_SCRIPTS}/{script}.py"), class_name)
    missing = free_names(code) - set(closure)
    if missing:
        raise Unavailable(
            f"TRL's {script}.{class_name} needs {sorted(missing)}, which were not given"
        )
    namespace: dict[str, Any] = {"__name__": f"trl_examples.{script}", **closure}
    exec(compile(code, f"<trl {TRL_SCRIPTS}/{script}.py>", "exec"), namespace)  # noqa: S102
    return namespace[class_name]


def main() -> None:
    openenv, trl = checkout(OPENENV_VAR), checkout(TRL_VAR)
    with tempfile.TemporaryDirectory() as workdir:
        clients = load_openenv_clients(openenv, Path(workdir))
        print("OpenEnv clients:", ", ".join(sorted(vars(clients))))
    for script, name in [
        ("echo", "EchoToolEnv"),
        ("wordle", "WordleEnv"),
        ("catch", "CatchEnv"),
        ("sudoku", "SudokuEnv"),
        ("multi_env", "MultiEnv"),
    ]:
        code = trl_source(read(trl, "HEAD", f"{TRL_SCRIPTS}/{script}.py"), name)
        print(
            f"TRL {script}.{name}: {len(code.splitlines())} lines, needs {sorted(free_names(code))}"
        )


if __name__ == "__main__":
    main()
