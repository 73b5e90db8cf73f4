from notebook_builder.cli import main

raise SystemExit(main())
