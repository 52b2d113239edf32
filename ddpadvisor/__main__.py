from ddpadvisor.cli import main

raise SystemExit(main())
