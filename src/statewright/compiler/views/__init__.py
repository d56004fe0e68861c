"""Views of a machine, read without changing it: the formatter, graphs (Mermaid, dot) and JSON.

None of them is a stage of the pipeline: the formatter prints the syntax tree, graph.py and ir_json.py
read the syntax tree or the IR.
"""
