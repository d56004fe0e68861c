"""The grammar: statewright.lark, the parser front and the syntax tree it builds. Lark stays in here."""

from . import ast
from .parser import ParseResult, build_parser, parse_source, parse_text, read_source

__all__ = ["ParseResult", "ast", "build_parser", "parse_source", "parse_text", "read_source"]
