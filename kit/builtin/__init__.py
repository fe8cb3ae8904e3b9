"""The built-in games, one module each: everything the kit knows about a game, as its ``GameSpec``.

Each module registers its game with ``kit.registry.register`` when imported; the registry imports
a built-in game's module the first time the game is asked for. The engines and solvers they name
live in ``kit.games`` and ``kit.solvers``; the rest (the tool env, prompt, tasks and splits,
limits, reward terms, reasoning and closing texts, what is held out and how a leak is found, the
SFT set's options) lives here.
"""
