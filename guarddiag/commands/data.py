"""Sub-commands: data (work in progress)."""


def register(sub, bench) -> None:
    return None
