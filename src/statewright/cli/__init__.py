"""The `statewright` command: a thin shell over api.py, one module per group of commands.

common.py holds what every command shares, reading.py the commands that read specs, making.py those that
make files from them, running.py those that run machines, and app.py the table of commands, the parser and
the program. Exit codes, for every command: 0 ok, 1 the input has errors (a file that cannot be read
included) or a run / test failed, 2 usage error, 3 internal error.
"""

from .app import COMMANDS, SHORT_LIVED, build_parser, command_name, console_main, main
from .common import EXIT_INPUT, EXIT_INTERNAL, EXIT_OK, EXIT_USAGE, UsageError, use_color

__all__ = ["COMMANDS", "EXIT_INPUT", "EXIT_INTERNAL", "EXIT_OK", "EXIT_USAGE", "SHORT_LIVED", "UsageError",
           "build_parser", "command_name", "console_main", "main", "use_color"]
