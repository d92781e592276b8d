"""``python -m sparkclient.demo`` (``make demo``): the whole system on one machine."""

import sys

from sparkclient.demo.launch import main

sys.exit(main())
