"""The registry's entries, one module per family of codes; diagnostics/codes.py gathers them."""
