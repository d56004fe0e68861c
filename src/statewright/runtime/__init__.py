"""The runtime: the engine that executes machines.

It imports nothing from the rest of the package: generated runners carry it verbatim, so
`statewright run` and every generated runner execute the same code.
"""
