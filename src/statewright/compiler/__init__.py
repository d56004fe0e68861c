"""The compiler pipeline: resolve names -> check -> lower to IR -> passes -> codegen.

    grammar.parse_source  ->  resolve.py / checks  ->  lower.py (ir.py)  ->  passes/  ->  codegen/
"""
