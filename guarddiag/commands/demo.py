"""Sub-commands: demo (work in progress)."""


def register(sub, bench) -> None:
    return None
