from guarddiag.cli import run

run()
