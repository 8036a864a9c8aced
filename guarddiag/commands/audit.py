"""Sub-commands: audit (work in progress)."""


def register(sub, bench) -> None:
    return None
