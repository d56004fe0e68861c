"""The compiler: a parsed machine checked, lowered to IR, optimized and written out as Python.

The pipeline, in order:

    checks/   names, flow, types, templates, test blocks, settings and shapes, the graph, listeners
    lower.py  the checked machine as IR (ir.py), every default filled in
    passes/   optimizations over the IR
    codegen/  the IR as Python: a runner (beside the runtime package, or one file), or the machine part
              loaded in memory

views/ holds what reads a machine without being a stage of it: the formatter, graphs, JSON.
"""
