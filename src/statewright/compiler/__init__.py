"""The compiler: a parsed machine checked, lowered to IR, optimized and written out as a runner.

    check.py:  resolve -> typecheck -> templates -> testblocks -> lower (ir.py) -> graph_checks
    then:      passes/ -> codegen/
"""
