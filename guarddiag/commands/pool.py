"""Sub-commands: pool (work in progress)."""


def register(sub, bench) -> None:
    return None
