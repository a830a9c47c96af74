import sys

from keras_elmo.cli.main import main

sys.exit(main())
