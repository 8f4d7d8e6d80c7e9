"""Figures without pyplot: importing the toolkit, and drawing and saving a figure, leave matplotlib's backend alone.

A notebook chooses its backend (``%matplotlib inline``, widget, ...); the toolkit builds
:class:`matplotlib.figure.Figure` objects itself and never imports :mod:`matplotlib.pyplot` or calls
:func:`matplotlib.use`. Each case runs in a fresh interpreter whose backend is preset to ``svg``
through ``MPLBACKEND`` (a non-interactive backend that exists everywhere, and not the ``agg`` the
toolkit once forced).
"""

import os
import subprocess
import sys

#: Loads every topic (every module of the toolkit that draws), draws the E5 figure from synthetic rows and saves it.
SCRIPT = """
import sys

import matplotlib

before = matplotlib.get_backend()
from attneb.proofs_check.engine import content
from attneb.proofs_check.engine.plotting import save
from attneb.proofs_check.topics.attention import plot_clean_context

content.load_default()
imported = "matplotlib.pyplot" in sys.modules
rows = {"a prior": [{"n": n, "gap": 1.0 / n, "seed": seed} for n in (256, 1024) for seed in (0, 1)]}
save(plot_clean_context(rows), sys.argv[1], "E5_clean_context")
print(before, imported, "matplotlib.pyplot" in sys.modules, matplotlib.get_backend())
"""


def test_importing_every_topic_and_saving_a_figure_keep_the_backend_and_skip_pyplot(tmp_path):
    env = {**os.environ, "MPLBACKEND": "svg"}
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path)], env=env, capture_output=True, text=True,
                          check=False, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["svg", "False", "False", "svg"]
    assert (tmp_path / "E5_clean_context.png").is_file() and (tmp_path / "E5_clean_context.pdf").is_file()
