"""`python -m bert_tf.cli`: the `bert-tf` command."""

import sys

from bert_tf.cli import main

sys.exit(main())
