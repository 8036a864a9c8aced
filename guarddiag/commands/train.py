"""Sub-commands: train (work in progress)."""


def register(sub, bench) -> None:
    return None
