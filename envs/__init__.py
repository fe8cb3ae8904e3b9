"""The kit games as deployable OpenEnv environments: one server module per game (see README.md)."""
