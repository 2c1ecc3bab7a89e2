"""The `allot` command-line interface (Typer + Rich): the outermost shell around the configuration and the core.

Must not: hold scheduling logic; commands load, call and render.
"""
