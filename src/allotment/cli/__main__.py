"""`python -m allotment.cli …`: the `allot` command line without the console script (all commands registered).

Owns: nothing but the entry point. Must not: define commands (main.py and the modules it registers do).
"""

from allotment.cli.main import app

app(prog_name="allot")
