"""Sub-commands: guards (work in progress)."""


def register(sub, bench) -> None:
    return None
