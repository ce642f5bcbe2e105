from pear_agent.cli import main

raise SystemExit(main())
