from statewright.cli import console_main

console_main()
