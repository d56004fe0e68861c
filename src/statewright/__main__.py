from statewright.cli import main

raise SystemExit(main())
