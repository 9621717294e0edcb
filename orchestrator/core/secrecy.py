"""What counts as a secret by name; kept tiny, as the command line reads it before anything else."""

from __future__ import annotations

import re

# PASS covers PASSWORD; AUTH(?!OR) so that GIT_AUTHOR_NAME is not taken for a secret.
SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET|PASS|CREDENTIAL|AUTH(?!OR)|PRIVATE", re.IGNORECASE)
