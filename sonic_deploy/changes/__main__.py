import sys

from sonic_deploy.changes.cli import main

sys.exit(main())
