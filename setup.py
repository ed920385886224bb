"""The one build step pyproject.toml cannot say: ship examples/*.ipynb as distlab/walkthroughs/*.ipynb and
lessons/<scenario>/*.py as distlab/lessons/<scenario>/*.py (and recordings/ as distlab/recordings/).

pyproject.toml finds the packages (`distlab`, `distlab.*`) and maps `distlab.walkthroughs` to examples/ and
`distlab.lessons` to lessons/, but setuptools builds only the packages `find` returned, so build_py adds those two.
Everything else is in pyproject.toml.
"""
from setuptools import setup
from setuptools.command.build_py import build_py

MAPPED = ("distlab.walkthroughs", "distlab.lessons", "distlab.recordings")  # mapped to examples/, lessons/, recordings/ by [tool.setuptools.package-dir]


class build_py_with_mapped(build_py):
    "build_py that also builds the walkthroughs and lessons packages (the notebooks and scripts are their package data)."
    def finalize_options(self):
        super().finalize_options()
        self.packages = [*(self.packages or []), *(p for p in MAPPED if p not in (self.packages or []))]


setup(cmdclass={"build_py": build_py_with_mapped})
