"""The built-in games, one folder each, shaped as a game of your own is: everything the kit
knows about a game in one place.

``kit/builtin/<game>/``:

* ``engine.py``: the dependency-free engine that agrees with its reference byte for byte
  (``kit.games`` holds the contract every engine meets: ``Step``, ``make``);
* ``solver.py``: the player that sees only what a model sees (the contract: ``kit.solvers``);
* ``__init__.py``: the tool env ``GRPOTrainer(environment_factory=...)`` trains through and the
  ``GameSpec`` (prompt, tasks and splits, limits, reward terms, reasoning and closing texts,
  what is held out and how a leak is found, the SFT set's options);
* ``serve.py``: the OpenEnv server adapter, its official wire schema and reader (needs the
  ``serve`` extra; imported only to serve).

Each ``__init__`` registers its game with ``kit.registry.register`` when imported; the registry
imports a built-in game's package the first time the game is asked for. ``examples/guess_number.py``
is the same shape in one file.
"""
