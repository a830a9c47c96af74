import sys

from keras_elmo.cli.main import console_main

sys.exit(console_main())
