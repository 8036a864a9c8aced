"""Sub-commands: report (work in progress)."""


def register(sub, bench) -> None:
    return None
