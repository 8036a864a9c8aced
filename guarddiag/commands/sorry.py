"""Sub-commands: sorry (work in progress)."""


def register(sub, bench) -> None:
    return None
